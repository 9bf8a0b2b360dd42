package launchline

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// Line is what a launch line says in its launchers' terms: how many hosts
// and ranks, where rank 0 meets the others, how the script is started and
// which launcher it was written for. run embeds it in its Options.
type Line struct {
	// NProcPerNode and NNodes are --nproc-per-node and --nnodes as given
	// (DeepSpeed's --num_gpus and --num_nodes land here too).
	NProcPerNode, NNodes string
	MasterAddr           string
	MasterPort           int
	MaxRestarts          int
	NoPython, Module     bool
	LogDir               string
	// Hosts is --hosts (a hostlist expression), Hostfile DeepSpeed's
	// --hostfile.
	Hosts, Hostfile string
	// Include/Exclude are DeepSpeed's host:slot filters; NoLocalRank is
	// --no_local_rank / --use_env.
	Include, Exclude string
	NoLocalRank      bool
	// Role is ROLE_NAME; Ignored lists torchrun and DeepSpeed launcher
	// flags given that mean nothing here, IgnoredWhy why (warned about).
	Role       string
	Ignored    []string
	IgnoredWhy []string
	// LocalRanksFilter is torchrun's --local-ranks-filter.
	LocalRanksFilter []int
	// StopSignals are --signals-to-handle's signals beyond
	// DefaultStopSignals; ShutdownTimeout is --shutdown-timeout (0: not
	// given), run's --stop-grace in torchrun's spelling.
	StopSignals     []os.Signal
	ShutdownTimeout time.Duration
	// DeepSpeedHostfile is DeepSpeed's launcher's default hostfile, read by
	// a DeepSpeed line that names no hosts when it exists: /job/hostfile
	// (DeepSpeedHostfile) unless $PIPETTE_DEEPSPEED_HOSTFILE names
	// another; "" reads none. Tests point it into their temporary directory.
	DeepSpeedHostfile string
	// Standalone is --standalone, or a line that names no hosts run on
	// this machine (DefaultHosts).
	Standalone bool
	// Style is the launcher the line was written for (--as, else its
	// flags: LauncherStyle): torchrun, deepspeed, torch.distributed.launch
	// or "" (by framework). AsGiven: --as named it.
	Style   string
	AsGiven bool
	// Notes say how the line was given what it left out (its hosts, a
	// free port); DefaultSlots is DeepSpeed's every-GPU default.
	Notes        []string
	DefaultSlots int
	Script       string
	ScriptArgs   []string
}

// Flags are the launchers' flags of a launch line: torchrun's (dashed and
// underscored spellings, PET_* environment defaults as torchrun), DeepSpeed
// launcher's spellings and --as. The ignored ones are IgnoredLauncherFlags.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "nproc-per-node", EnvVars: []string{"PET_NPROC_PER_NODE"}, Aliases: []string{"nproc_per_node"}, Usage: "ranks per host: N, or gpu/auto for every GPU (a cluster file's; on this machine alone, counted here with nvidia-smi, auto falling back to one rank per CPU), or cpu for one rank per CPU of this machine; with --hosts/--hostfile default 1, as torchrun"},
		&cli.StringFlag{Name: "nnodes", EnvVars: []string{"PET_NNODES"}, Usage: "number of hosts to use: N, or MIN:MAX for an elastic job (starts on at least MIN of the listed hosts, uses at most MAX, restarts on the hosts left when one is lost; see docs/elastic.md)"},
		&cli.StringFlag{Name: "num_gpus", Aliases: []string{"num-gpus", "num_accelerators"}, Usage: "DeepSpeed's spelling of --nproc-per-node (a line with DeepSpeed's launcher flags gets --local_rank=N, as DeepSpeed's launcher passes it)"},
		&cli.StringFlag{Name: "num_nodes", Aliases: []string{"num-nodes"}, Usage: "DeepSpeed's spelling of --nnodes"},
		&cli.StringFlag{Name: "master-addr", EnvVars: []string{"PET_MASTER_ADDR"}, Aliases: []string{"master_addr"}, Usage: "address of rank 0 (default: rank 0's host from the plan)"},
		&cli.IntFlag{Name: "master-port", EnvVars: []string{"PET_MASTER_PORT"}, Aliases: []string{"master_port"}, Value: 29500, Usage: "port of rank 0's rendezvous"},
		&cli.IntFlag{Name: "max-restarts", EnvVars: []string{"PET_MAX_RESTARTS"}, Aliases: []string{"max_restarts"}, Usage: "restart the whole job up to N times when a rank fails or (with --nnodes MIN:MAX) a host is lost, as torchrun counts them"},
		&cli.BoolFlag{Name: "elastic_training", Aliases: []string{"elastic-training"}, Usage: "DeepSpeed's elastic launch: --nnodes MIN:MAX from --min_elastic_nodes (default 1) and --max_elastic_nodes (default --num_nodes, else every listed host); 100 restarts unless --max-restarts, as DeepSpeed's launcher gives its elastic agent"},
		&cli.IntFlag{Name: "min_elastic_nodes", Aliases: []string{"min-elastic-nodes"}, Usage: "with --elastic_training: the fewest hosts the job runs on (DeepSpeed's spelling of MIN in --nnodes MIN:MAX)"},
		&cli.IntFlag{Name: "max_elastic_nodes", Aliases: []string{"max-elastic-nodes"}, Usage: "with --elastic_training: the most hosts the job uses (DeepSpeed's spelling of MAX in --nnodes MIN:MAX)"},
		&cli.BoolFlag{Name: "no-python", EnvVars: []string{"PET_NO_PYTHON"}, Aliases: []string{"no_python"}, Usage: "run the script as a program, not under python"},
		&cli.BoolFlag{Name: "module", EnvVars: []string{"PET_MODULE"}, Aliases: []string{"m"}, Usage: "the script is a python module (python -m)"},
		&cli.StringFlag{Name: "log-dir", EnvVars: []string{"PET_LOG_DIR"}, Aliases: []string{"log_dir"}, Usage: "one log file per rank: on this machine when launching, on each host in --output-dir scripts"},
		&cli.StringFlag{Name: "hosts", Usage: "hosts as a hostlist expression (node[01-04]); no planning: torchrun's rank order"},
		&cli.StringFlag{Name: "include", Aliases: []string{"i"}, Usage: "DeepSpeed's host filter: use only these hosts/slots of --hostfile/--hosts (host1@host2:0,2)"},
		&cli.StringFlag{Name: "exclude", Aliases: []string{"e"}, Usage: "DeepSpeed's host filter: leave out these hosts/slots (host1:3@host2)"},
		&cli.BoolFlag{Name: "no-local-rank", Aliases: []string{"no_local_rank", "use-env", "use_env"}, Usage: "do not pass --local_rank=N to the script (DeepSpeed's --no_local_rank, torch.distributed.launch's --use_env); LOCAL_RANK is set either way"},
		&cli.StringFlag{Name: "hostfile", Aliases: []string{"H"}, Usage: "DeepSpeed-style hostfile (HOST slots=N lines); no planning: torchrun's rank order"},
		&cli.StringFlag{Name: "as", Usage: "the launcher the line was written for: torchrun, deepspeed or torch.distributed.launch; the last two pass --local_rank=N right after the script, and DeepSpeed's uses every GPU (or /job/hostfile) when no hosts are named (default: the line's flags decide, else DeepSpeed's for a DeepSpeed script)"},
		&cli.BoolFlag{Name: "standalone", EnvVars: []string{"PET_STANDALONE"}, Usage: "torchrun's single-host mode: this machine only, without SSH (ranks meet on 127.0.0.1)"},
		&cli.StringFlag{Name: "rdzv-endpoint", EnvVars: []string{"PET_RDZV_ENDPOINT"}, Aliases: []string{"rdzv_endpoint"}, Usage: "torchrun's HOST[:PORT]: taken as --master-addr/--master-port"},
		&cli.StringFlag{Name: "role", EnvVars: []string{"PET_ROLE"}, Value: "default", Usage: "ROLE_NAME of the workers"},
		&cli.StringFlag{Name: "local-ranks-filter", EnvVars: []string{"PET_LOCAL_RANKS_FILTER"}, Aliases: []string{"local_ranks_filter"}, Usage: "stream output only of these local ranks (0,3); the rest still go to --log-dir"},
		&cli.StringFlag{Name: "signals-to-handle", EnvVars: []string{"PET_SIGNALS_TO_HANDLE"}, Aliases: []string{"signals_to_handle"}, Usage: "more signals that stop the job, as torchrun's list (SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1: SIGUSR1 for Slurm's --signal); SIGTERM, SIGINT, SIGHUP and SIGQUIT always do. Every rank on every host then gets SIGTERM, and SIGKILL after --stop-grace"},
		&cli.IntFlag{Name: "shutdown-timeout", EnvVars: []string{"PET_SHUTDOWN_TIMEOUT", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"}, Aliases: []string{"shutdown_timeout"}, Usage: "torchrun's seconds between SIGTERM and SIGKILL to every rank: --stop-grace Ns"},
	}
}

// Read reads the launch line's flags from c (Flags, IgnoredLauncherFlags,
// and run's --cluster, which --standalone refuses) and its script and
// arguments; env is the environment pipette-launch runs in.
func Read(c *cli.Context, env []string) (*Line, error) {
	l := &Line{
		NProcPerNode: c.String("nproc-per-node"),
		NNodes:       c.String("nnodes"),
		MasterAddr:   c.String("master-addr"),
		MasterPort:   c.Int("master-port"),
		MaxRestarts:  c.Int("max-restarts"),
		NoPython:     c.Bool("no-python"),
		Module:       c.Bool("module"),
		LogDir:       c.String("log-dir"),
		Hosts:        c.String("hosts"),
		Hostfile:     c.String("hostfile"),
		Role:         c.String("role"),
		Include:      c.String("include"),
		Exclude:      c.String("exclude"),
		NoLocalRank:  c.Bool("no-local-rank"),
	}
	for _, f := range IgnoredLauncherFlags() {
		name := f.Names()[0]
		if c.IsSet(name) {
			l.Ignored = append(l.Ignored, "--"+name)
			l.IgnoredWhy = append(l.IgnoredWhy, strings.TrimPrefix(f.(cli.DocGenerationFlag).GetUsage(), "ignored: "))
		}
	}
	l.Style = LauncherStyle(c)
	if as := c.String("as"); as != "" {
		l.AsGiven = true
		// torch.distributed.launch and deepspeed --module lines have no
		// flag only their launcher has: the user names it.
		var err error
		if l.Style, err = ParseLauncherStyle(as); err != nil {
			return nil, err
		}
	}
	l.DeepSpeedHostfile = cmp.Or(cmdutil.EnvLookup(env)(DeepSpeedHostfileEnv), DeepSpeedHostfile)
	for _, pair := range [][2]string{{"num_gpus", "nproc-per-node"}, {"num_nodes", "nnodes"}} {
		if !c.IsSet(pair[0]) {
			continue
		}
		if c.IsSet(pair[1]) {
			return nil, cmdutil.InputErrorf("--%s and --%s say the same (DeepSpeed's and torchrun's spelling): give one", pair[0], pair[1])
		}
		if pair[1] == "nnodes" {
			l.NNodes = c.String(pair[0])
		} else {
			l.NProcPerNode = c.String(pair[0])
		}
	}
	if err := l.readDeepSpeedElastic(c); err != nil {
		return nil, err
	}
	if err := checkNotKeyFile(l.Include); err != nil {
		return nil, err
	}
	if c.Bool("standalone") {
		if c.String("cluster") != "" || l.Hosts != "" || l.Hostfile != "" {
			return nil, cmdutil.InputErrorf("--standalone runs on this host only: it cannot be combined with --cluster, --hosts or --hostfile")
		}
		l.Hosts, l.MasterAddr = "localhost", cmp.Or(l.MasterAddr, "127.0.0.1")
		l.Standalone = true
	}
	if ep := c.String("rdzv-endpoint"); ep != "" {
		if err := l.applyRdzvEndpoint(ep, c.IsSet("master-port")); err != nil {
			return nil, err
		}
	}
	var err error
	if l.LocalRanksFilter, err = cmdutil.ParseRankList("local-ranks-filter", c.String("local-ranks-filter")); err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	if err := checkNodeRank(c.String("node-rank")); err != nil {
		return nil, err
	}
	if l.StopSignals, err = ParseStopSignals("--signals-to-handle", c.String("signals-to-handle")); err != nil {
		return nil, err
	}
	if c.IsSet("shutdown-timeout") {
		n := c.Int("shutdown-timeout")
		if n < 1 {
			return nil, cmdutil.InputErrorf("--shutdown-timeout %d: want the seconds ranks get between SIGTERM and SIGKILL, at least 1", n)
		}
		if n > math.MaxInt64/int(time.Second) {
			// More would overflow the grace's time.Duration into a
			// negative one, which the job would then take as none.
			return nil, cmdutil.InputErrorf("--shutdown-timeout %d: want the seconds ranks get between SIGTERM and SIGKILL, at most %d", n, math.MaxInt64/int(time.Second))
		}
		l.ShutdownTimeout = time.Duration(n) * time.Second
	}
	args := c.Args().Slice()
	if len(args) == 0 {
		return nil, cmdutil.InputErrorf("no training script given: usage: pipette-launch [flags] script.py [script args...]")
	}
	l.Script, l.ScriptArgs = args[0], args[1:]
	return l, nil
}

// checkNodeRank refuses torchrun's --node-rank (or PET_NODE_RANK) above 0.
// A per-node launch line runs once on every node, each copy with its own
// node rank (srun, a PyTorchJob's pods, a loop over ssh); pipette-launch
// starts every host of the job itself from one copy, so the others would
// each start the whole job again, on the same hosts and master port. Node
// rank 0's copy is the one to keep (its --node-rank is ignored).
func checkNodeRank(rank string) error {
	n, err := strconv.Atoi(strings.TrimSpace(rank))
	if rank == "" || err != nil || n <= 0 {
		return nil
	}
	return cmdutil.InputErrorf("--node-rank %s (or PET_NODE_RANK): pipette-launch starts every host of the job itself, so it runs once, on one machine; this is node %s's copy of a line meant to run on every node, and it would start the whole job a second time. Run the line once (node rank 0's) and leave --node-rank out", rank, rank)
}

// checkNotKeyFile refuses an --include (-i) that names a file: -i is
// DeepSpeed's --include on a launch line, and a file there is likelier
// ssh's -i habit (an SSH key) than a host filter.
func checkNotKeyFile(include string) error {
	if st, err := os.Stat(include); include != "" && err == nil && st.Mode().IsRegular() {
		return cmdutil.InputErrorf("--include/-i %q names a file: -i is DeepSpeed's --include (a host filter such as worker-1:0,1@worker-2); for an SSH key write --identity %s", include, include)
	}
	return nil
}

// DeepSpeedHostfileEnv names the variable that moves DeepSpeed's default
// hostfile (/job/hostfile) elsewhere, for a machine whose /job is not the
// cluster's and for tests that must not write outside their directory.
const DeepSpeedHostfileEnv = "PIPETTE_DEEPSPEED_HOSTFILE"

// applyRdzvEndpoint maps torchrun's HOST[:PORT] onto the static
// rendezvous' master address and port; explicit --master-* flags win.
func (l *Line) applyRdzvEndpoint(ep string, portSet bool) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		host, port = ep, ""
	}
	if l.MasterAddr == "" {
		l.MasterAddr = host
	}
	if port != "" && !portSet {
		n, err := strconv.Atoi(port)
		if err != nil {
			return cmdutil.InputErrorf("--rdzv-endpoint %q: port %q is not a number", ep, port)
		}
		if n == 0 {
			// torchrun's HOST:0: the rendezvous picks a free port.
			if n, err = cmdutil.FreePort(); err != nil {
				return fmt.Errorf("--rdzv-endpoint %s: find a free port: %w", ep, err)
			}
			l.Notes = append(l.Notes, fmt.Sprintf("--rdzv-endpoint %s: MASTER_PORT %d, a port free on this machine now (torchrun's port 0 picks a free one)", ep, n))
		}
		l.MasterPort = n
	}
	return nil
}

// Nodes is --nnodes: the hosts a job needs at least (Min) and uses at most
// (Max). Min == Max for a fixed size; both 0 when the line does not say.
type Nodes struct{ Min, Max int }

// Elastic says the job may run on fewer hosts than it starts with:
// torchrun's MIN:MAX with MIN < MAX (DeepSpeed's --elastic_training).
func (n Nodes) Elastic() bool { return n.Min < n.Max }

// ParseNNodes reads torchrun's --nnodes: N, or MIN:MAX (an elastic job:
// it starts on at least MIN hosts, uses at most MAX, and may go on with
// fewer after a host is lost, as torchrun's elastic agent).
func ParseNNodes(s string) (Nodes, error) {
	if s == "" {
		return Nodes{}, nil
	}
	lo, hi, ranged := strings.Cut(s, ":")
	n, err := strconv.Atoi(lo)
	if err != nil || n < 1 || n > limits.MaxHosts {
		return Nodes{}, cmdutil.InputErrorf("--nnodes %q: want a number of hosts from 1 to %d, or MIN:MAX", s, limits.MaxHosts)
	}
	if !ranged {
		return Nodes{Min: n, Max: n}, nil
	}
	m, err := strconv.Atoi(hi)
	if err != nil || m < 1 || m > limits.MaxHosts {
		return Nodes{}, cmdutil.InputErrorf("--nnodes %q: MAX %q is not a number of hosts from 1 to %d (torchrun's MIN:MAX)", s, hi, limits.MaxHosts)
	}
	if n > m {
		return Nodes{}, cmdutil.InputErrorf("--nnodes %q: MIN %d is above MAX %d; give MIN:MAX with MIN <= MAX, such as %d:%d", s, n, m, m, n)
	}
	return Nodes{Min: n, Max: m}, nil
}

// readDeepSpeedElastic turns DeepSpeed's --elastic_training
// --min_elastic_nodes A --max_elastic_nodes B into --nnodes A:B (runner.py
// and launch.py of DeepSpeed v0.14.4: A defaults to 1, B to --num_nodes;
// here, without --num_nodes, to every listed host) and, unless
// --max-restarts is given, the 100 restarts DeepSpeed's launch.py gives
// its DSElasticAgent.
func (l *Line) readDeepSpeedElastic(c *cli.Context) error {
	if !c.Bool("elastic_training") {
		for _, f := range []string{"min_elastic_nodes", "max_elastic_nodes"} {
			if c.IsSet(f) {
				return cmdutil.InputErrorf("--%s needs --elastic_training (DeepSpeed's launcher ignores it without)", f)
			}
		}
		return nil
	}
	if l.NoLocalRank {
		// DeepSpeed's runner.py asserts the same.
		return cmdutil.InputErrorf("--no_local_rank cannot be combined with --elastic_training (DeepSpeed's launcher refuses it too)")
	}
	fixed, err := ParseNNodes(l.NNodes)
	if err != nil {
		return err
	}
	lo, hi := 1, cmp.Or(fixed.Max, limits.MaxHosts)
	if fixed.Elastic() {
		lo = fixed.Min // --num_nodes MIN:MAX, as DeepSpeed's parse_num_nodes
	}
	if c.IsSet("min_elastic_nodes") {
		lo = c.Int("min_elastic_nodes")
	}
	if c.IsSet("max_elastic_nodes") {
		hi = c.Int("max_elastic_nodes")
	}
	if lo < 1 || hi < 1 {
		return cmdutil.InputErrorf("--min_elastic_nodes %d --max_elastic_nodes %d: want positive numbers of hosts (DeepSpeed asserts the same)", lo, hi)
	}
	l.NNodes = fmt.Sprintf("%d:%d", lo, hi)
	if _, err := ParseNNodes(l.NNodes); err != nil {
		return cmdutil.InputErrorf("--min_elastic_nodes %d above --max_elastic_nodes %d: give MIN <= MAX", lo, hi)
	}
	if !c.IsSet("max-restarts") {
		l.MaxRestarts = 100
		l.Notes = append(l.Notes, "--elastic_training: up to 100 restarts, as DeepSpeed's launcher gives its elastic agent (--max-restarts N to change)")
	}
	return nil
}

// ParseNProc returns ranks per host; all is true for gpu/auto (every GPU)
// and cpu (torchrun's one rank per CPU, for a job on this machine alone),
// which the hosts decide.
func ParseNProc(s string) (n int, all bool, err error) {
	switch s {
	case "":
		return 0, false, nil
	case "gpu", "auto", "cpu":
		return 0, true, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 1 || n > limits.MaxGPUsPerHost {
		return 0, false, cmdutil.InputErrorf("--nproc-per-node %q: want a number from 1 to %d (ranks per host), gpu, auto or cpu", s, limits.MaxGPUsPerHost)
	}
	return n, false, nil
}
