package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/probe/measure"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// Options are the inputs of `pipette-launch probe`.
type Options struct {
	IO *cmdutil.IOStreams
	// Context cancels probing and measuring (SIGINT/SIGTERM in the CLI);
	// nil means context.Background().
	Context context.Context

	Hosts    string
	Hostfile string
	// Getenv reads SLURM_JOB_NODELIST (os.Getenv when nil).
	Getenv func(string) string
	SSH    remote.SSHOptions
	Fanout int
	// Launcher is how hosts are reached: ssh, slurm (srun inside the
	// allocation), or auto (slurm when SLURM_JOB_ID is set).
	Launcher string

	NProcPerNode  int
	Group         string
	CPUSlotTFLOPS float64

	Measure        bool
	MeasureSeconds int
	MeasurePort    int
	PairsAtOnce    int
	Reprobe        bool
	MaxAge         time.Duration
	CacheDir       string
	// ComputeSeconds bounds each host's GEMM sweep under --measure (0
	// skips the compute measurement); Python runs it; Model, when set,
	// gives the sweep the model's layer shapes.
	ComputeSeconds float64
	Python         string
	Model          string

	// Output is the cluster file to write; "-" writes it to IO.Out.
	Output string
	// JSON prints {"hosts", "cluster_file", "output"} on IO.Out instead of
	// the summary; the cluster file is still written to Output unless it
	// is "-" (then it is only in the JSON).
	JSON bool
	// K8s are the --launcher k8s settings.
	K8s K8sOptions
}

func NewCmd(io *cmdutil.IOStreams) *cli.Command {
	opts := &Options{IO: io}
	return &cli.Command{
		Name:  "probe",
		Usage: "probe hosts over SSH (GPUs, NICs, memory, CPUs, optionally link bandwidth) and write a cluster file",
		Description: `Runs one command per host over SSH and reads nvidia-smi, /sys/class/infiniband,
/sys/class/net, /proc/meminfo and the host's address. Hosts with identical hardware form
one cluster (island). --measure runs iperf3 between every pair of hosts (n-1 rounds of
disjoint pairs, both directions) and stores the matrix; a measurement younger than
--max-age is reused unless --reprobe. --measure also times torch.matmul on every host's
GPUs (bf16; CPU process slots: fp32), all devices of a host at once, at a decoder layer's
GEMM shapes (--model's, else generic ones) for --measure-compute-seconds, and an
all-reduce among them (NCCL, or gloo on CPU); stored as measured_compute with the date.
The planner then uses these rates instead of the catalog's (docs/cluster-format.md).`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "hosts", Usage: "hosts as a hostlist expression (node[01-16],gpu3; user@host:port accepted)", Destination: &opts.Hosts},
			&cli.StringFlag{Name: "hostfile", Usage: "DeepSpeed-style hostfile or one host per line", Destination: &opts.Hostfile},
			&cli.StringFlag{Name: "launcher", Value: cmdutil.LauncherAuto, Usage: "reach hosts by `ssh`, or by `slurm` (srun steps inside the allocation; --hosts/--hostfile narrow and order its nodes), or read a Kubernetes cluster's GPU nodes (`k8s`); auto: slurm when SLURM_JOB_ID is set", Destination: &opts.Launcher},
			&cli.BoolFlag{Name: "json", Usage: "print the probed hosts and the cluster file as one JSON object on stdout (the file is still written to -o unless -o -); errors as JSON on stderr", Destination: &opts.JSON},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "cluster.yaml", Usage: "cluster file to write (- for stdout)", Destination: &opts.Output},
			&cli.IntFlag{Name: "nproc-per-node", Usage: "process slots on hosts without GPUs", Destination: &opts.NProcPerNode},
			&cli.StringFlag{Name: "group", Value: probe.GroupByHardware, Usage: "form clusters by identical `hardware`, or one per `host`", Destination: &opts.Group},
			&cli.Float64Flag{Name: "cpu-tflops", Value: probe.DefaultCPUSlotTFLOPS, Usage: "nominal TFLOP/s of one slot on a GPU-less host", Destination: &opts.CPUSlotTFLOPS},
			&cli.BoolFlag{Name: "measure", Usage: "measure pairwise bandwidth with iperf3 (must be installed on the hosts)", Destination: &opts.Measure},
			&cli.IntFlag{Name: "measure-seconds", Value: 2, Usage: "seconds per direction per pair", Destination: &opts.MeasureSeconds},
			&cli.IntFlag{Name: "measure-port", Value: 5201, Usage: "TCP port of the iperf3 servers", Destination: &opts.MeasurePort},
			&cli.IntFlag{Name: "measure-pairs-at-once", Usage: "pairs measured together per round (0: all n/2; 1: each pair alone)", Destination: &opts.PairsAtOnce},
			&cli.BoolFlag{Name: "reprobe", Usage: "measure again even when a fresh cached measurement exists", Destination: &opts.Reprobe},
			&cli.DurationFlag{Name: "max-age", Value: measure.DefaultMeasureMaxAge, Usage: "reuse a cached measurement younger than this", Destination: &opts.MaxAge},
			&cli.StringFlag{Name: "cache-dir", Usage: "where measurements are cached (default: the user cache dir)", Destination: &opts.CacheDir},
			&cli.Float64Flag{Name: "measure-compute-seconds", Value: 3, Usage: "with --measure: seconds of GEMM sweep per host (0: no compute measurement)", Destination: &opts.ComputeSeconds},
			&cli.StringFlag{Name: "python", Value: "python3", Usage: "interpreter with torch on the hosts, for --measure's compute sweep", Destination: &opts.Python},
			&cli.StringFlag{Name: "model", Usage: "with --measure: sweep this model's layer GEMMs (preset or model YAML) instead of generic shapes", Destination: &opts.Model},
		}, append(cmdutil.SSHFlags(true), k8sFlags(&opts.K8s)...)...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("probe: unexpected argument %q (hosts go in --hosts or --hostfile)", c.Args().First()), 2)
			}
			opts.SSH, opts.Fanout = cmdutil.SSHOptionsFromCLI(c)
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Context = ctx
			return probeExitStatus(Run(opts))
		},
	}
}

// probeInputError marks bad flags or input: the CLI exits 2 for them.
type probeInputError struct{ error }

func (e probeInputError) Unwrap() error { return e.error }

func probeInputErrorf(format string, args ...any) error {
	return probeInputError{fmt.Errorf(format, args...)}
}

// probeExitStatus turns input errors into exit status 2 and others into 1.
func probeExitStatus(err error) error {
	var in probeInputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &in):
		return cli.Exit(err.Error(), 2)
	default:
		return cli.Exit(err.Error(), 1)
	}
}

func (o *Options) validate() error {
	switch {
	case o.Group != "" && o.Group != probe.GroupByHardware && o.Group != probe.GroupPerHost:
		return probeInputErrorf("--group %q: want %s or %s", o.Group, probe.GroupByHardware, probe.GroupPerHost)
	case o.NProcPerNode < 0:
		return probeInputErrorf("--nproc-per-node %d: want a positive number", o.NProcPerNode)
	case o.MeasureSeconds < 0 || o.MeasureSeconds > 600:
		return probeInputErrorf("--measure-seconds %d: want 1-600", o.MeasureSeconds)
	case o.MeasurePort < 0 || o.MeasurePort > 65535:
		return probeInputErrorf("--measure-port %d: want 1-65535", o.MeasurePort)
	case o.Output == "":
		return probeInputErrorf("-o: give the cluster file to write (or - for stdout)")
	case !(o.ComputeSeconds >= 0 && o.ComputeSeconds <= 300): // NaN too
		return probeInputErrorf("--measure-compute-seconds %g: want 0-300", o.ComputeSeconds)
	case o.CPUSlotTFLOPS != 0 && !limits.TFLOPS.Contains(o.CPUSlotTFLOPS):
		return probeInputErrorf("--cpu-tflops %g: want a number from %s (it is written as peak_bf16_tflops)", o.CPUSlotTFLOPS, limits.TFLOPS)
	}
	if _, err := cmdutil.ChooseLauncher(o.Launcher, o.getenv()); err != nil {
		return probeInputError{err}
	}
	return nil
}

// Run probes the hosts, optionally measures them, and writes the
// cluster file.
func Run(opts *Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if onKubernetes(opts.Launcher) {
		return runKubernetes(ctx, opts)
	}
	progress := progress.New(opts.IO.ErrOut)
	reach, err := newHostReach(opts)
	if err != nil {
		return err
	}
	defer reach.close()
	targets := reach.targets
	probes, err := reach.probe(ctx, progress)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	for _, hp := range probes {
		for _, w := range hp.Warnings {
			fmt.Fprintf(opts.IO.ErrOut, "warning: %s: %s\n", hp.Target, w)
		}
	}
	co := probe.ClusterOptions{
		NProcPerNode:  opts.NProcPerNode,
		Group:         opts.Group,
		Entries:       probe.HostEntries(targets),
		CPUSlotTFLOPS: opts.CPUSlotTFLOPS,
	}
	if opts.Measure {
		if co.Measured, err = measureHosts(ctx, opts, reach.runner, targets, probes, progress); err != nil {
			return err
		}
		if co.MeasuredCompute, err = measureCompute(ctx, opts, reach.runner, targets, probes, progress); err != nil {
			return err
		}
	}
	f, warnings, err := probe.BuildClusterFile(probes, co)
	if err != nil {
		return probeInputError{fmt.Errorf("probe: %w", err)}
	}
	for _, w := range warnings {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s\n", w)
	}
	warnNoRDMA(opts.IO, f)
	data, err := clusterFileText(f)
	if err != nil {
		return err
	}
	if opts.JSON {
		return printProbeJSON(opts, probes, data)
	}
	if err := writeClusterFile(opts, data); err != nil {
		return err
	}
	printProbeSummary(opts, f)
	return nil
}

// printProbeJSON is probe --json: the probed hosts and the cluster file's
// text on stdout, the file written to -o first (not with -o -: stdout
// carries only the JSON).
func printProbeJSON(opts *Options, probes []*probe.HostProbe, data []byte) error {
	out := struct {
		Hosts       []*probe.HostProbe `json:"hosts"`
		ClusterFile string             `json:"cluster_file"`
		Output      string             `json:"output,omitempty"`
	}{Hosts: probes, ClusterFile: string(data)}
	if opts.Output != "-" {
		if err := writeClusterFile(opts, data); err != nil {
			return err
		}
		out.Output = opts.Output
	}
	enc := json.NewEncoder(opts.IO.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func measureHosts(ctx context.Context, opts *Options, runner func(remote.HostTarget) remote.Runner, targets []remote.HostTarget,
	probes []*probe.HostProbe, progress *progress.Line) (*cluster.MeasuredBandwidth, error) {
	if len(targets) < 2 {
		fmt.Fprintln(opts.IO.ErrOut, "measure: one host, no links to measure")
		return nil, nil
	}
	hosts := make([]measure.Host, len(targets))
	for i, t := range targets {
		hosts[i] = measure.Host{Name: t.Name, Addr: probes[i].Addr, Runner: runner(t)}
		if hosts[i].Addr == "" {
			return nil, fmt.Errorf("measure: %s: the probe found no IPv4 address other hosts could reach", t.Name)
		}
	}
	dir := opts.CacheDir
	if dir == "" {
		var err error
		if dir, err = measure.DefaultMeasureCacheDir(); err != nil {
			return nil, err
		}
	}
	cache := measure.Cache{Dir: dir}
	maxAge := opts.MaxAge
	if maxAge <= 0 {
		maxAge = measure.DefaultMeasureMaxAge
	}
	if !opts.Reprobe {
		if m, ok := cache.Load(hosts, maxAge, time.Now()); ok {
			fmt.Fprintf(opts.IO.ErrOut, "measure: using the measurement of %s (%s old; --reprobe measures again)\n",
				m.MeasuredAt.Format(time.RFC3339), time.Since(m.MeasuredAt).Round(time.Second))
			return m, nil
		}
	}
	m, err := measure.Measure(ctx, hosts, measure.Options{
		Seconds: opts.MeasureSeconds, Port: opts.MeasurePort, PairsAtOnce: opts.PairsAtOnce, Progress: progress,
	})
	if err != nil {
		return nil, err
	}
	if err := cache.Save(hosts, m); err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %v\n", err)
	}
	return m, nil
}

// warnNoRDMA says so when no host has an RDMA NIC: jobs will use sockets.
func warnNoRDMA(io *cmdutil.IOStreams, f *cluster.File) {
	for _, c := range f.Clusters {
		for _, n := range c.NICs {
			if n.Type.RDMA() {
				return
			}
		}
	}
	fmt.Fprintln(io.ErrOut, "warning: no host has an active InfiniBand or RoCE NIC: NCCL will use TCP sockets")
}

// clusterFileText is the cluster file as probe writes it, header included.
func clusterFileText(f *cluster.File) ([]byte, error) {
	data, err := f.Marshal()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	header := fmt.Sprintf("# written by pipette-launch probe at %s\n", time.Now().UTC().Format(time.RFC3339))
	return append([]byte(header), data...), nil
}

func writeClusterFile(opts *Options, data []byte) error {
	if opts.Output == "-" {
		_, err := opts.IO.Out.Write(data)
		return err
	}
	// A file the user names is replaced whole (never left half-written),
	// through a symlink to its target, keeping that file's mode.
	if err := atomicfile.WriteThrough(opts.Output, data, 0o644); err != nil {
		return fmt.Errorf("probe: write cluster file: %w", err)
	}
	return nil
}

// printProbeSummary lists the clusters found (and the matrix) on stderr
// when the file goes to stdout, else on stdout.
func printProbeSummary(opts *Options, f *cluster.File) {
	w := opts.IO.Out
	if opts.Output == "-" {
		w = opts.IO.ErrOut
	}
	for _, c := range f.Clusters {
		var names []string
		for _, h := range c.Hosts {
			names = append(names, h.Name)
		}
		var nics []string
		for _, n := range c.NICs {
			nics = append(nics, fmt.Sprintf("%dx %s %s", n.Count, n.Type, n.RateText()))
		}
		fmt.Fprintf(w, "%s: %d hosts (%s): %d x %s, %s, %.1f GiB, %d cores\n", c.Name, len(c.Hosts),
			strings.Join(names, ", "), c.GPUsPerHost, c.GPU.Model, strings.Join(nics, ", "), c.HostMemoryGiB, c.CPUCores)
	}
	if f.Measured != nil {
		fmt.Fprintf(w, "measured with %s at %s:\n%s", f.Measured.Tool, f.Measured.MeasuredAt.Format(time.RFC3339), measure.MatrixTable(f.Measured))
	}
	if mc := f.MeasuredCompute; mc != nil {
		fmt.Fprintf(w, "compute measured with %s at %s (TFLOP/s per GPU or slot, all at once):\n%s", mc.Tool, mc.MeasuredAt.Format(time.RFC3339), measure.ComputeTable(mc))
	}
	if opts.Output != "-" {
		fmt.Fprintf(w, "wrote %s\n", opts.Output)
	}
}
