package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pipette-launch/pipette-launch/testbed"
	"github.com/urfave/cli/v2"
)

// usageError marks bad flags or input: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// run is main without the process: tests call it with their own streams.
func run(args []string, out, errOut io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newApp(out, errOut).RunContext(ctx, args)
	if err == nil {
		return 0
	}
	fmt.Fprintf(errOut, "pipette-testbed: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func newApp(out, errOut io.Writer) *cli.App {
	stateRoot := &cli.StringFlag{Name: "state-root", Value: testbed.DefaultStateRoot, Usage: "directory holding one state dir per test-bed (not under /tmp)"}
	return &cli.App{
		Name:      "pipette-testbed",
		Usage:     "real multi-host clusters on one machine (netns + sshd) for pipette-launch",
		Writer:    out,
		ErrWriter: errOut,
		// Errors are printed once, by run, with the exit status it picks.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err.Error()}
		},
		Commands: []*cli.Command{
			{
				Name:  "up",
				Usage: "create a test-bed and print how to reach it",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Value: "testbed", Usage: "instance name (for status and down)"},
					&cli.IntFlag{Name: "hosts", Usage: "number of hosts (default 4; with --groups, must match their sum)"},
					&cli.StringFlag{Name: "groups", Usage: "groups as NAME:COUNT[:RDMA],... with RDMA ib, roce or eth (e.g. ib:2:ib,eth:2)"},
					&cli.StringSliceFlag{Name: "ib", Usage: "groups whose hosts get a fake InfiniBand NIC"},
					&cli.StringSliceFlag{Name: "roce", Usage: "groups whose hosts get a fake RoCE NIC"},
					&cli.IntFlag{Name: "rate", Value: 200, Usage: "rate in Gbit/s the fake RDMA NICs report"},
					&cli.StringFlag{Name: "shape", Usage: "tc rate of links between groups (e.g. 100mbit); inside a group links are unshaped"},
					&cli.StringFlag{Name: "host-shape", Usage: "tc rates of single hosts' own links, `HOST=RATE,...` (e.g. node01=400mbit,node02=250mbit): uneven links inside a group"},
					&cli.StringFlag{Name: "prefix", Value: "node", Usage: "host name prefix (hosts are PREFIX01, PREFIX02, ...)"},
					&cli.BoolFlag{Name: "slurm", Usage: "also run a real Slurm cluster on the hosts (slurmctld on the first, slurmd on each; needs munge, slurmctld, slurmd, slurm-client)"},
					&cli.StringFlag{Name: "names", Usage: "how host names resolve on the hosts: none (no name resolves, as in many containers) or loopback (a host's own name is 127.0.1.1); default: every host's /etc/hosts names them all"},
					kubernetesFlag("start a single-machine Kubernetes instead (testbed/kube): `MODE` kwok (fake GPU nodes), kubelet (one real node) or both"),
					stateRoot,
				},
				OnUsageError: usageOnly,
				Action: func(c *cli.Context) error {
					if c.Args().Len() > 0 {
						return usagef("up: unexpected arguments %q", c.Args().Slice())
					}
					if c.IsSet("kubernetes") {
						return runKubernetesUp(c.Context, c.String("kubernetes"), out, errOut)
					}
					o := upOptions{
						Name: c.String("name"), Hosts: c.Int("hosts"), Groups: c.String("groups"),
						IB: c.StringSlice("ib"), RoCE: c.StringSlice("roce"), Rate: c.Int("rate"),
						Shape: c.String("shape"), HostShape: c.String("host-shape"), Prefix: c.String("prefix"), StateRoot: c.String("state-root"),
						Slurm: c.Bool("slurm"),
						Names: c.String("names"),
					}
					return runUp(c.Context, o, out)
				},
			},
			{
				Name:  "down",
				Usage: "remove test-beds and everything they made",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Usage: "remove the test-bed with this name"},
					&cli.StringFlag{Name: "dir", Usage: "remove the test-bed whose state dir this is"},
					&cli.BoolFlag{Name: "all", Usage: "remove every test-bed not in use by a running test"},
					&cli.BoolFlag{Name: "force", Usage: "with --all: also those owned by a running process"},
					&cli.BoolFlag{Name: "kubernetes", Usage: "stop the Kubernetes stack `up --kubernetes` started, and any a killed test left"},
					stateRoot,
				},
				OnUsageError: usageOnly,
				Action: func(c *cli.Context) error {
					if c.Args().Len() > 0 {
						return usagef("down: unexpected arguments %q", c.Args().Slice())
					}
					if c.Bool("kubernetes") {
						return runKubernetesDown(c.Context, out)
					}
					o := downOptions{Name: c.String("name"), Dir: c.String("dir"), All: c.Bool("all"), Force: c.Bool("force"), StateRoot: c.String("state-root")}
					return runDown(o, out)
				},
			},
			{
				Name:  "status",
				Usage: "list test-beds and their hosts",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "hosts", Aliases: []string{"v"}, Usage: "also list each test-bed's hosts"},
					stateRoot,
				},
				OnUsageError: usageOnly,
				Action: func(c *cli.Context) error {
					return runStatus(statusOptions{Hosts: c.Bool("hosts"), StateRoot: c.String("state-root")}, out)
				},
			},
			buildCommand(out, errOut),
		},
	}
}

func usageOnly(_ *cli.Context, err error, _ bool) error { return usageError{err.Error()} }

type upOptions struct {
	Name      string
	Hosts     int
	Groups    string
	IB, RoCE  []string
	Rate      int
	Shape     string
	HostShape string // HOST=RATE,... for single hosts' links
	Prefix    string
	StateRoot string
	Slurm     bool
	Names     string
}

type groupSpec struct {
	name  string
	count int
	rdma  string
}

// parseGroups reads NAME:COUNT[:RDMA],... ; RDMA is ib|infiniband|roce|eth|none.
func parseGroups(s string) ([]groupSpec, error) {
	var out []groupSpec
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		f := strings.Split(item, ":")
		if len(f) < 2 || len(f) > 3 || f[0] == "" {
			return nil, usagef("--groups %q: item %q: want NAME:COUNT or NAME:COUNT:RDMA (e.g. ib:2:ib,eth:2)", s, item)
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 {
			return nil, usagef("--groups %q: group %s: count %q is not a positive number", s, f[0], f[1])
		}
		if seen[f[0]] {
			return nil, usagef("--groups %q: group %s appears twice", s, f[0])
		}
		seen[f[0]] = true
		g := groupSpec{name: f[0], count: n}
		if len(f) == 3 {
			if g.rdma, err = parseRDMA(f[2]); err != nil {
				return nil, usagef("--groups %q: group %s: %v", s, f[0], err)
			}
		}
		out = append(out, g)
	}
	return out, nil
}

func parseRDMA(s string) (string, error) {
	switch strings.ToLower(s) {
	case "ib", "infiniband":
		return testbed.RDMAInfiniBand, nil
	case "roce":
		return testbed.RDMARoCE, nil
	case "eth", "ethernet", "none", "":
		return testbed.RDMANone, nil
	}
	return "", fmt.Errorf("RDMA %q: want ib, roce or eth", s)
}

// spec turns the flags into a testbed.Spec; every input error is a
// usageError naming the flag.
func (o upOptions) spec() (testbed.Spec, error) {
	groups := []groupSpec{{name: "default", count: o.Hosts}}
	if o.Groups != "" {
		var err error
		if groups, err = parseGroups(o.Groups); err != nil {
			return testbed.Spec{}, err
		}
		sum := 0
		for _, g := range groups {
			sum += g.count
		}
		if o.Hosts != 0 && o.Hosts != sum {
			return testbed.Spec{}, usagef("--hosts %d but --groups %q has %d hosts: give one or make them agree", o.Hosts, o.Groups, sum)
		}
	} else if o.Hosts == 0 {
		groups[0].count = 4
	} else if o.Hosts < 0 {
		return testbed.Spec{}, usagef("--hosts %d: want a positive number", o.Hosts)
	}
	index := map[string]int{}
	for i, g := range groups {
		index[g.name] = i
	}
	for flag, list := range map[string][]string{"--ib": o.IB, "--roce": o.RoCE} {
		kind := testbed.RDMAInfiniBand
		if flag == "--roce" {
			kind = testbed.RDMARoCE
		}
		for _, name := range list {
			i, ok := index[name]
			if !ok {
				return testbed.Spec{}, usagef("%s %s: no such group (groups: %s)", flag, name, groupNames(groups))
			}
			if groups[i].rdma != "" && groups[i].rdma != kind {
				return testbed.Spec{}, usagef("%s %s: group already has RDMA %s", flag, name, groups[i].rdma)
			}
			groups[i].rdma = kind
		}
	}
	if o.Shape != "" && len(groups) < 2 {
		return testbed.Spec{}, usagef("--shape %s needs at least two --groups (it shapes links between groups)", o.Shape)
	}
	total := 0
	for _, g := range groups {
		total += g.count
	}
	width := max(2, len(strconv.Itoa(total)))
	spec := testbed.Spec{Name: o.Name, GroupShape: o.Shape, StateRoot: o.StateRoot, Persistent: true, Slurm: o.Slurm, Names: o.Names}
	n := 0
	for _, g := range groups {
		for range g.count {
			n++
			spec.Hosts = append(spec.Hosts, testbed.HostSpec{
				Name: fmt.Sprintf("%s%0*d", o.Prefix, width, n), Group: g.name, RDMA: g.rdma, RateGbitPerS: o.Rate,
			})
		}
	}
	if err := applyHostShapes(&spec, o.HostShape); err != nil {
		return testbed.Spec{}, err
	}
	if err := spec.Validate(); err != nil {
		return testbed.Spec{}, usageError{err.Error()}
	}
	return spec, nil
}

// applyHostShapes sets HostSpec.Shape from --host-shape's HOST=RATE items.
func applyHostShapes(spec *testbed.Spec, list string) error {
	if list == "" {
		return nil
	}
	index := map[string]int{}
	for i, h := range spec.Hosts {
		index[h.Name] = i
	}
	for _, item := range strings.Split(list, ",") {
		name, rate, ok := strings.Cut(strings.TrimSpace(item), "=")
		i, known := index[name]
		switch {
		case !ok || rate == "":
			return usagef("--host-shape %q: item %q: want HOST=RATE (e.g. node01=400mbit)", list, item)
		case !known:
			return usagef("--host-shape %q: no host %s (hosts are %s..%s)", list, name, spec.Hosts[0].Name, spec.Hosts[len(spec.Hosts)-1].Name)
		}
		spec.Hosts[i].Shape = rate
	}
	return nil
}

func groupNames(gs []groupSpec) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.name
	}
	return strings.Join(names, ", ")
}

func runUp(ctx context.Context, o upOptions, out io.Writer) error {
	spec, err := o.spec()
	if err != nil {
		return err
	}
	existing, err := testbed.List(o.StateRoot)
	if err != nil {
		return err
	}
	for _, in := range existing {
		if in.Name == o.Name {
			return usagef("a test-bed named %q exists (%s): pick another --name or run `pipette-testbed down --name %s`", o.Name, in.Dir, o.Name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tb, err := testbed.Up(ctx, spec)
	if err != nil {
		return err
	}
	printUp(out, tb, o.Shape, o.StateRoot)
	return nil
}

func printUp(out io.Writer, tb *testbed.Testbed, shape, root string) {
	fmt.Fprintf(out, "test-bed %q is up (index %d, subnet %s, state in %s)\n\n", tb.Name, tb.Index, tb.Subnet, tb.Dir)
	printHosts(out, tb.Hosts)
	if shape != "" {
		fmt.Fprintf(out, "\nlinks between groups are shaped to %s; links inside a group are not\n", shape)
	}
	fmt.Fprintf(out, "\nfiles:\n")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "  ssh_config\t%s\n", tb.SSHConfigFile)
	fmt.Fprintf(w, "  known_hosts\t%s\n", tb.KnownHostsFile)
	fmt.Fprintf(w, "  key\t%s\n", tb.KeyFile)
	fmt.Fprintf(w, "  host names\t%s\n", tb.HostsFile)
	fmt.Fprintf(w, "  addresses\t%s\n", tb.AddrsFile)
	fmt.Fprintf(w, "  /etc/hosts lines\t%s\n", tb.EtcHostsFile)
	w.Flush()
	first := tb.Hosts[0].Name
	fmt.Fprintf(out, "\ntry:\n  ssh -F %s %s hostname\n", tb.SSHConfigFile, first)
	fmt.Fprintf(out, "  pipette-launch probe --hostfile %s --ssh-config %s --known-hosts %s\n", tb.HostsFile, tb.SSHConfigFile, tb.KnownHostsFile)
	down := "pipette-testbed down --name " + tb.Name
	if root != "" && root != testbed.DefaultStateRoot {
		down += " --state-root " + root
	}
	if conf := tb.SlurmConfFile(); conf != "" {
		fmt.Fprintf(out, "  SLURM_CONF=%s srun -N%d -l hostname\n", conf, len(tb.Hosts))
	}
	fmt.Fprintf(out, "remove with:\n  %s\n", down)
}

func printHosts(out io.Writer, hosts []testbed.Host) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "HOST\tADDRESS\tGROUP\tRDMA\tNETNS\tSSHD PID")
	for _, h := range hosts {
		rdma := h.RDMA
		if rdma == "" {
			rdma = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", h.Name, h.Addr, h.Group, rdma, h.Netns, h.SshdPid)
	}
	w.Flush()
}

type downOptions struct {
	Name, Dir  string
	All, Force bool
	StateRoot  string
}

func runDown(o downOptions, out io.Writer) error {
	chosen := 0
	for _, set := range []bool{o.Name != "", o.Dir != "", o.All} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return usagef("down: give exactly one of --name N, --dir DIR or --all")
	}
	if o.Force && !o.All {
		return usagef("down: --force only goes with --all")
	}
	switch {
	case o.Name != "":
		if err := testbed.DownName(o.StateRoot, o.Name); err != nil {
			return err
		}
		fmt.Fprintf(out, "removed test-bed %q\n", o.Name)
	case o.Dir != "":
		if err := testbed.DownDir(o.Dir); err != nil {
			return err
		}
		fmt.Fprintf(out, "removed test-bed in %s\n", o.Dir)
	default:
		removed, err := testbed.DownAll(o.StateRoot, o.Force)
		for _, d := range removed {
			fmt.Fprintf(out, "removed test-bed in %s\n", d)
		}
		if err != nil {
			return err
		}
		if len(removed) == 0 {
			fmt.Fprintln(out, "no test-beds to remove")
		}
	}
	return nil
}

type statusOptions struct {
	Hosts     bool
	StateRoot string
}

func runStatus(o statusOptions, out io.Writer) error {
	infos, err := testbed.List(o.StateRoot)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		fmt.Fprintln(out, "no test-beds")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "INDEX\tNAME\tHOSTS\tSSHD UP\tSTATE\tCREATED\tDIR")
	for _, in := range infos {
		fmt.Fprintf(w, "%d\t%s\t%d\t%d/%d\t%s\t%s\t%s\n", in.Index, in.Name, len(in.Hosts), in.SshdAlive, len(in.Hosts),
			describe(in), in.Created.Format(time.RFC3339), in.Dir)
	}
	w.Flush()
	if o.Hosts {
		for _, in := range infos {
			fmt.Fprintf(out, "\n%s (index %d):\n", in.Name, in.Index)
			printHosts(out, in.Hosts)
		}
	}
	return nil
}

func describe(in testbed.Info) string {
	switch {
	case !in.Ready && in.OwnerAlive:
		return "starting"
	case !in.OwnerAlive:
		return "abandoned (owner died; reclaimed by the next up)"
	case in.Persistent:
		return "up"
	default:
		return "up (test in progress)"
	}
}
