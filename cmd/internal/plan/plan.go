package plan

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/examples"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/report"
	"github.com/pipette-launch/pipette-launch/templates"
)

// Options are the inputs of `pipette-launch plan`.
type Options struct {
	IO *cmdutil.IOStreams
	// ClusterFile is a cluster YAML; empty uses the embedded example.
	ClusterFile string
	// Model is a preset name or a model YAML file.
	Model       string
	GlobalBatch int
	SeqLength   int // 0 keeps the model's
	// MemoryHeadroom is --memory-headroom (search.Options.MemoryHeadroom).
	MemoryHeadroom float64
	Framework      string
	Top            int
	JSON           bool
	Breakdown      bool
	// UseAllGPUs is --use-all-gpus (search.Options.UseAllGPUs).
	UseAllGPUs bool
	Seed       int64
	// NCCLMode prices links as `run --nccl-mode` will render them.
	NCCLMode        string
	PlacementBudget time.Duration
	Fixed           parallel.Constraints
	Report          cmdutil.ReportOptions
	// Schedules re-prices plan 1 under each named pipeline schedule (a
	// what-if table; the wave is shown, never chosen or rendered).
	Schedules []string
	// AsIs prices the user's own layout (torchrun's rank order on the
	// hosts in Hosts/Hostfile order, else the cluster file's) beside the
	// plan; MegatronArgs (after --) add the user's parallel sizes to it.
	AsIs            bool
	Hosts, Hostfile string
	MegatronArgs    []string
}

func NewCmd(io *cmdutil.IOStreams) *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "rank parallel configurations and rank placements for a model on a cluster",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "cluster", Usage: "cluster YAML `FILE`, or example (default: the embedded example cluster)"},
			&cli.StringFlag{Name: "model", Usage: "model preset `NAME` (" + strings.Join(model.PresetNames(), ", ") + ") or model YAML file"},
			&cli.IntFlag{Name: "global-batch-size", Usage: "sequences per iteration"},
			&cli.IntFlag{Name: "seq-length", Usage: "override the model's sequence length"},
			cmdutil.MemoryHeadroomFlag(),
			&cli.StringFlag{Name: "framework", Value: "megatron", Usage: "megatron or deepspeed"},
			&cli.IntFlag{Name: "top", Value: 5, Usage: "show the best `N` plans"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.BoolFlag{Name: "breakdown", Usage: "add time and memory breakdowns"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "placement search seed"},
			&cli.StringFlag{Name: "nccl-mode", Value: "auto", Usage: "price links as run --nccl-mode renders them: auto (Megatron across RDMA islands: RDMA for TP/CP/DP inside islands, sockets for pipeline groups; sockets everywhere when that cannot be kept), sockets or per-group"},
			&cli.DurationFlag{Name: "placement-budget", Value: 2 * time.Second, Usage: "time limit of the placement search per configuration"},
			&cli.IntFlag{Name: "tp", Usage: "fix tensor parallel size"},
			&cli.IntFlag{Name: "pp", Usage: "fix pipeline parallel size"},
			&cli.IntFlag{Name: "dp", Usage: "fix data parallel size"},
			&cli.IntFlag{Name: "cp", Usage: "fix context parallel size"},
			&cli.IntFlag{Name: "vpp", Usage: "fix virtual stages per pipeline rank"},
			&cli.IntFlag{Name: "ep", Usage: "fix the expert parallel size (mixture-of-experts models)"},
			&cli.IntFlag{Name: "etp", Usage: "fix the expert tensor parallel size (mixture-of-experts models; Megatron's default is TP)"},
			&cli.IntFlag{Name: "micro-batch-size", Usage: "fix the micro-batch size"},
			cmdutil.RecomputeFlag(),
			&cli.IntFlag{Name: "zero-stage", Value: -1, Usage: "fix the DeepSpeed ZeRO stage (0-3)"},
			cmdutil.DistributedOptimizerFlag(),
			cmdutil.NoOffloadFlag(),
			cmdutil.OffloadFlag(),
			cmdutil.UseAllGPUsFlag(),
			&cli.StringFlag{Name: "sequence-parallel", Value: "auto", Usage: "Megatron sequence parallelism: on, off or auto (on wherever TP > 1: it moves the same bytes and saves memory); --sequence-parallel is rendered only when the plan uses it"},
			&cli.StringFlag{Name: "schedules", Usage: "what-if: re-price plan 1 under each pipeline schedule in `LIST` (1f1b,interleaved,wave), same placement; wave is Hanayo's wave-like schedule, which Megatron-LM/DeepSpeed cannot launch: it is shown, never chosen or rendered"},
			&cli.StringFlag{Name: "precision", Value: "bf16", Usage: "bf16, fp16, fp32 (TF32 tensor cores where the GPU has them; what a Megatron line without --bf16/--fp16 runs) or fp8 (Transformer Engine FP8 in Megatron-LM, --fp8-format hybrid: GEMMs at the GPU's FP8 tensor-core rate, FP8 weight copies in memory; Hopper, Ada, Blackwell)"},
			&cli.BoolFlag{Name: "as-is", Usage: "also price your own layout: torchrun's rank order (rank r on the host holding GPU r) on the hosts in --hosts/--hostfile order (else the cluster file's), with your parallel sizes (the flags above, and Megatron arguments after --); knobs you leave free are chosen best for that layout"},
			&cli.StringFlag{Name: "hosts", Usage: "plan on these hosts of the cluster file, in this order (`LIST`, e.g. node[01-04]; with --as-is: the order torchrun would use)"},
			&cli.StringFlag{Name: "hostfile", Usage: "plan on the hosts of this hostfile (`FILE`, one host per line or DeepSpeed's HOST slots=N), which must be in the cluster file; with --as-is: their order is your layout's"},
		}, cmdutil.ReportFlags()...),
		Description: "Columns: TFLOP/s/GPU is model FLOPs per second per GPU (forward and backward of the model, 6 x parameters x tokens\n" +
			"plus attention, no recomputation: what MFU counts; JSON tflops_per_gpu); HW TFLOP/s adds the FLOPs that activation\n" +
			"recomputation runs again (hardware FLOPs, what Megatron-LM's papers report; JSON hw_tflops_per_gpu).",
		Action: func(c *cli.Context) error {
			opts := &Options{
				IO: io, ClusterFile: c.String("cluster"), Model: c.String("model"),
				GlobalBatch: c.Int("global-batch-size"), SeqLength: c.Int("seq-length"), MemoryHeadroom: c.Float64("memory-headroom"),
				Framework: c.String("framework"), Top: c.Int("top"), JSON: c.Bool("json"),
				Breakdown: c.Bool("breakdown"), UseAllGPUs: c.Bool("use-all-gpus"), Seed: c.Int64("seed"), NCCLMode: c.String("nccl-mode"), PlacementBudget: c.Duration("placement-budget"),
				Fixed: parallel.Constraints{
					TP: c.Int("tp"), PP: c.Int("pp"), DP: c.Int("dp"), CP: c.Int("cp"), VPP: c.Int("vpp"),
					EP: c.Int("ep"), ETP: c.Int("etp"),
					MicroBatch: c.Int("micro-batch-size"), Recompute: parallel.Recompute(c.String("recompute")),
					ZeroStage: c.Int("zero-stage"), NoOffload: c.Bool("no-offload"), ForceOffload: c.Bool("offload"),
				},
				Report: cmdutil.ReportOptionsFrom(c),
				AsIs:   c.Bool("as-is"), Hosts: c.String("hosts"), Hostfile: c.String("hostfile"), MegatronArgs: c.Args().Slice(),
			}
			if len(opts.MegatronArgs) > 0 && !opts.AsIs {
				return cmdutil.UsageError("plan: arguments after the flags (%s) are your Megatron arguments for --as-is; add --as-is or drop them", strings.Join(opts.MegatronArgs, " "))
			}
			sp, err := cmdutil.ParseSequenceParallel(c.String("sequence-parallel"))
			if err != nil {
				return cmdutil.UsageError("%v", err)
			}
			opts.Fixed.SequenceParallel = sp
			if opts.Schedules, err = search.ParseSchedules(c.String("schedules")); err != nil {
				return cmdutil.UsageError("%v", err)
			}
			opts.Fixed.Precision = gpu.Precision(c.String("precision"))
			opts.Fixed.DistributedOptimizer = cmdutil.DistributedOptimizerPin(c)
			return Run(opts)
		},
	}
}

// Run loads the cluster and model, searches, and prints the plans.
func Run(opts *Options) error {
	mode, err := fabric.ParseMode(opts.NCCLMode)
	if err != nil {
		return cmdutil.UsageError("%v", err)
	}
	if opts.Hosts != "" && opts.Hostfile != "" {
		return cmdutil.UsageError("--hosts and --hostfile both list hosts: give one")
	}
	if (opts.Hosts != "" || opts.Hostfile != "") && opts.ClusterFile == "" {
		return cmdutil.UsageError("--hosts/--hostfile name hosts of a cluster file, which prices them: give --cluster FILE (write one with pipette-launch probe --hostfile FILE)")
	}
	m, err := cmdutil.LoadModel(opts.Model, opts.SeqLength)
	if err != nil {
		return cmdutil.UsageError("%v", err)
	}
	so, err := SearchOptions(opts)
	if err != nil {
		return cmdutil.UsageError("%v", err)
	}
	var order []string // the listed hosts in the order ranks fill them
	resolve := func(t fabric.Transport) (*cluster.Cluster, error) {
		c, listed, err := loadListedCluster(opts.ClusterFile, t, opts.Hosts, opts.Hostfile)
		if err != nil {
			return nil, cmdutil.UsageError("%v", err)
		}
		order = listed
		return c, nil
	}
	plan := func(c *cluster.Cluster) (*search.Result, *search.Plan, error) {
		res, err := search.Search(c, m, so)
		var nf *search.NoFitError
		switch {
		case errors.As(err, &nf):
			return nil, nil, cli.Exit("plan: "+nf.Message, cmdutil.ExitNoFit)
		case err != nil:
			return nil, nil, cmdutil.UsageError("plan: %v", err)
		case len(res.Plans) == 0:
			return res, nil, nil
		}
		return res, &res.Plans[0], nil
	}
	fallback := func(c *cluster.Cluster, p *search.Plan) string {
		return templates.IslandsFallback(c, p, templates.Options{})
	}
	ahead := func(c *cluster.Cluster) string {
		return templates.IslandsFallbackAhead(c, so.Framework, templates.Options{})
	}
	c, res, err := planner.OnFabric(mode.TransportFor(so.Framework), resolve, plan, fallback, ahead)
	if err != nil {
		return err
	}
	var naive *search.Plan
	var asIs *asIsLayout
	if opts.AsIs {
		a := priceAsIs(c, m, so, order, opts.MegatronArgs)
		asIs = &a
	} else if len(c.Islands) > 1 {
		so.IgnoreIslands, so.TopK = true, 1
		if r, err := search.Search(c, m, so); err == nil && len(r.Plans) > 0 {
			naive = &r.Plans[0]
		}
	}
	in := report.Input{Cluster: c, Model: m, Result: res, Naive: naive}
	if asIs != nil {
		in.AsIs = asIs.plan
	}
	if err := cmdutil.WriteReport(opts.Report, in, opts.ClusterFile, opts.IO); err != nil {
		return cmdutil.UsageError("%v", err)
	}
	calibrated, corrected := calibrationSummary(opts.ClusterFile)
	var assumptions []string
	if len(res.Plans) > 0 {
		assumptions = search.Assumptions(c, m, &res.Plans[0], corrected)
	}
	if flags := megatron.UnpricedFlags(opts.MegatronArgs); opts.AsIs && len(flags) > 0 {
		assumptions = append(assumptions, fmt.Sprintf("your layout's %s passed through, not priced: the prediction assumes they do not change the step time",
			strings.Join(flags, ", ")))
	}
	var whatIf []search.ScheduleWhatIf
	if len(opts.Schedules) > 0 && len(res.Plans) > 0 {
		whatIf = search.WhatIfSchedules(c, m, &res.Plans[0], opts.Schedules)
	}
	if opts.JSON {
		out := struct {
			*search.Result
			IgnoringIslands *search.Plan `json:"ignoring_islands,omitempty"`
			*asIsJSON
			Calibration     string                  `json:"calibration,omitempty"`
			Assumptions     []string                `json:"assumptions,omitempty"`
			WhatIfSchedules []search.ScheduleWhatIf `json:"what_if_schedules,omitempty"`
		}{res, naive, asIsView(asIs, &res.Plans[0]), calibrated, assumptions, whatIf}
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if calibrated != "" {
		fmt.Fprintln(opts.IO.Out, calibrated)
	}
	printPlans(opts, c, res, naive, asIs)
	if len(assumptions) > 0 {
		fmt.Fprintln(opts.IO.Out)
	}
	for _, a := range assumptions {
		fmt.Fprintf(opts.IO.Out, "assumes: %s\n", a)
	}
	printWhatIfSchedules(opts.IO.Out, &res.Plans[0], whatIf)
	return nil
}

// printWhatIfSchedules is the --schedules table: plan 1 re-priced under
// each schedule. Only launchable rows could become a plan.
func printWhatIfSchedules(out io.Writer, p *search.Plan, rows []search.ScheduleWhatIf) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\nwhat-if schedules for plan 1 (TP %d, PP %d, DP %d, MB %d, same placement; memory not re-estimated):\n", p.TP, p.PP, p.DP, p.MicroBatch)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tCHUNKS/RANK\tITER s\tVS PLAN 1\tBUBBLE\tLAUNCHABLE")
	for _, w := range rows {
		if w.IterationSeconds <= 0 {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t%s\n", w.Schedule, w.ChunksPerRank, yesNo(w.Launchable, w.Note))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%+.1f%%\t%.1f%%\t%s\n", w.Schedule, w.ChunksPerRank, w.IterationSeconds,
			100*(w.IterationSeconds/p.Predicted.IterationSeconds-1), 100*w.BubbleFraction, yesNo(w.Launchable, w.Note))
	}
	tw.Flush()
}

func yesNo(ok bool, note string) string {
	s := "yes"
	if !ok {
		s = "no"
	}
	if note != "" {
		s += " (" + note + ")"
	}
	return s
}

// calibrationSummary is "calibrated from N runs, last error X% (...)" when
// the cluster file has a calibration section (the planner applies it), and
// whether the file corrects the model's compute at all (a calibration or
// probe --measure's measured compute).
func calibrationSummary(path string) (summary string, corrected bool) {
	if path == "" {
		return "", false
	}
	b, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return "", false
	}
	f, err := cluster.Parse(b)
	if err != nil {
		return "", false
	}
	corrected = f.Calibration != nil || f.MeasuredCompute != nil
	if f.Calibration == nil {
		return "", corrected
	}
	return f.Calibration.Summary(), corrected
}

// LoadCluster reads a cluster file (the embedded example when path is "").
func LoadCluster(path string, t fabric.Transport) (*cluster.Cluster, error) {
	c, _, err := loadListedCluster(path, t, "", "")
	return c, err
}

// loadListedCluster is LoadCluster keeping only the hosts --hosts or
// --hostfile lists (none: all), and returns the host names in the order
// torchrun would fill them: the list's, else the cluster file's.
func loadListedCluster(path string, t fabric.Transport, hosts, hostfile string) (*cluster.Cluster, []string, error) {
	data := examples.DefaultCluster
	name := "embedded example cluster"
	if path != "" {
		b, err := inputfile.Read(path, limits.MaxFileBytes)
		if err != nil && path == cmdutil.ExampleCluster {
			b, err = examples.DefaultCluster, nil // --cluster example, as run takes it
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--cluster: %w", err)
		}
		data, name = b, path
	}
	f, err := cluster.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	var names []string
	if hosts != "" || hostfile != "" {
		if names, err = restrictToListed(f, hosts, hostfile); err != nil {
			return nil, nil, fmt.Errorf("%s on cluster %s: %w", cmp.Or(hostfile, "--hosts"), name, err)
		}
	}
	c, err := f.ResolveFor(t)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	if names == nil {
		for _, h := range c.Hosts {
			names = append(names, h.Name)
		}
	}
	return c, names, nil
}

func SearchOptions(opts *Options) (search.Options, error) {
	so := search.Options{GlobalBatch: opts.GlobalBatch, Fixed: opts.Fixed, TopK: opts.Top, Seed: opts.Seed, PlacementBudget: opts.PlacementBudget, MemoryHeadroom: opts.MemoryHeadroom,
		UseAllGPUs: opts.UseAllGPUs}
	switch opts.Framework {
	case "", "megatron":
		so.Framework = parallel.FrameworkMegatron
	case "deepspeed":
		so.Framework = parallel.FrameworkDeepSpeed
	default:
		return so, fmt.Errorf("--framework %q: use megatron or deepspeed", opts.Framework)
	}
	if opts.GlobalBatch == 0 {
		return so, fmt.Errorf("--global-batch-size is required (sequences per iteration)")
	}
	if err := cmdutil.CheckIntFlag("global-batch-size", opts.GlobalBatch, 1, limits.MaxGlobalBatch); err != nil {
		return so, err
	}
	if err := cmdutil.CheckNumberFlag("memory-headroom", opts.MemoryHeadroom, limits.MemoryHeadroom); err != nil {
		return so, err
	}
	if opts.Top < 1 {
		return so, fmt.Errorf("--top %d: want at least 1 (plans to show)", opts.Top)
	}
	fx := opts.Fixed
	for name, v := range map[string]int{"--tp": fx.TP, "--pp": fx.PP, "--dp": fx.DP, "--cp": fx.CP, "--vpp": fx.VPP, "--micro-batch-size": fx.MicroBatch,
		"--ep": fx.EP, "--etp": fx.ETP} {
		if v < 0 {
			return so, fmt.Errorf("%s must be > 0 (got %d)", name, v)
		}
	}
	switch fx.Recompute {
	case "", parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull:
	default:
		return so, fmt.Errorf("--recompute %q: use none, selective or full", fx.Recompute)
	}
	switch fx.Precision {
	case "", gpu.PrecisionBF16, gpu.PrecisionFP16, gpu.PrecisionFP8, gpu.PrecisionFP32:
	default:
		return so, fmt.Errorf("--precision %q: use bf16, fp16, fp8 or fp32", fx.Precision)
	}
	if fx.ZeroStage < -1 || fx.ZeroStage > 3 {
		return so, fmt.Errorf("--zero-stage %d: use 0, 1, 2 or 3", fx.ZeroStage)
	}
	if fx.ZeroStage >= 0 && so.Framework == parallel.FrameworkMegatron {
		return so, fmt.Errorf("--zero-stage %d is DeepSpeed's; Megatron-LM has no ZeRO stages: use --distributed-optimizer (ZeRO-1-like sharding) or --framework deepspeed", fx.ZeroStage)
	}
	if fx.NoOffload && fx.ForceOffload {
		return so, fmt.Errorf("--offload and --no-offload contradict each other")
	}
	if opts.PlacementBudget < 0 {
		return so, fmt.Errorf("--placement-budget must not be negative")
	}
	return so, nil
}

const gibibyte = 1 << 30

// tableRow is one row of the plan table: a rank number or a comparison label.
type tableRow struct {
	label string
	plan  *search.Plan
}

// gpuModels names the GPUs the cluster's models resolved to, with counts
// ("24 H100-SXM + 8 A100-80GB-SXM"), so a misread model is seen.
func gpuModels(c *cluster.Cluster) string {
	var order []string
	count := map[string]int{}
	for _, h := range c.Hosts {
		m := cmp.Or(h.GPU.Model, "unknown GPU")
		if count[m] == 0 {
			order = append(order, m)
		}
		count[m] += h.GPUs
	}
	parts := make([]string, len(order))
	for i, m := range order {
		parts[i] = fmt.Sprintf("%d %s", count[m], m)
	}
	return strings.Join(parts, " + ")
}

func printPlans(opts *Options, c *cluster.Cluster, res *search.Result, naive *search.Plan, asIs *asIsLayout) {
	out := opts.IO.Out
	params := fmt.Sprintf("%.1fB parameters", float64(res.Model.Parameters)/1e9)
	moe := res.Model.Model.IsMoE()
	if moe {
		params += fmt.Sprintf(", %.1fB active; %d experts, top-%d", float64(res.Model.Model.ActiveParameters())/1e9,
			res.Model.Model.NumExperts, res.Model.Model.MoETopK())
	}
	fmt.Fprintf(out, "%s (%s) on %d GPUs (%s) in %d hosts, %d island(s); %d configurations considered, %d over memory\n\n",
		res.Model.Name, params, c.TotalGPUs(), gpuModels(c), len(c.Hosts), len(c.Islands), res.Considered, res.RejectedMemory)
	rows := make([]tableRow, 0, len(res.Plans)+2)
	for i := range res.Plans {
		rows = append(rows, tableRow{fmt.Sprint(i + 1), &res.Plans[i]})
	}
	why := explainOffload(res, opts.Fixed)
	if why.row != nil {
		rows = append(rows, *why.row)
	}
	if naive != nil {
		rows = append(rows, tableRow{"naive", naive})
	}
	if asIs != nil && asIs.plan != nil {
		rows = append(rows, tableRow{"as-is", asIs.plan})
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	ep := ""
	if moe {
		ep = "EP/ETP\t" // only MoE plans have expert parallelism
	}
	fmt.Fprintln(tw, "RANK\tTP\tPP\tDP\tCP\t"+ep+"VPP\tMB\tSP\tRECOMPUTE\tOPTIMIZER\tOFFLOAD\tLAYERS/STAGE\tITER s\tTOKENS/s\tTFLOP/s/GPU\tHW TFLOP/s\tBUBBLE\tGiB/GPU")
	for _, r := range rows {
		printRow(tw, r.label, r.plan, moe)
	}
	tw.Flush()
	for _, l := range idleLines(res.Plans) {
		fmt.Fprintf(out, "\n%s\n", l)
	}
	if why.line != "" {
		fmt.Fprintf(out, "\n%s\n", why.line)
	}
	if mode, _ := fabric.ParseMode(opts.NCCLMode); mode == fabric.ModeAuto && len(res.Plans) > 0 {
		p1 := &res.Plans[0]
		if tr := templates.GroupTransports(c, p1, templates.Options{}); tr != "" {
			fmt.Fprintf(out, "\nplan 1 NCCL transport (--nccl-mode auto): %s", tr)
			if why := templates.IslandsFallback(c, p1, templates.Options{}); why != "" && p1.Framework == parallel.FrameworkMegatron {
				fmt.Fprintf(out, "\n  (RDMA is not kept inside islands: %s)", why)
			}
			fmt.Fprintln(out)
		}
	}
	if naive != nil {
		fmt.Fprintf(out, "\nnaive: best plan ignoring islands (hosts in file order, default rank order); plan 1 is %.2fx faster\n",
			naive.Predicted.IterationSeconds/res.Plans[0].Predicted.IterationSeconds)
	}
	if asIs != nil {
		fmt.Fprintf(out, "\n%s\n", asIsLine(*asIs, &res.Plans[0]))
	}
	if opts.Breakdown {
		printBreakdown(out, rows, moe)
	}
}

func printRow(tw io.Writer, label string, p *search.Plan, moe bool) {
	cp := strconv.Itoa(p.CP)
	if moe {
		ep, etp := p.ExpertParallel()
		cp += fmt.Sprintf("\t%d/%d", ep, etp)
	}
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.3f\t%.0f\t%.1f\t%.1f\t%.1f%%\t%.1f/%.1f\n",
		label, p.TP, p.PP, p.DP, cp, p.VPP, p.MicroBatch, spLabel(p), p.Recompute, p.OptimizerLabel(), offloadLabel(p),
		search.CompactLayers(p.StageLayers), p.Predicted.IterationSeconds, p.Predicted.TokensPerSecond, p.Predicted.TFLOPSPerGPU,
		p.Predicted.HWTFLOPSPerGPU, 100*p.Predicted.BubbleFraction, p.Memory.PeakBytesPerGPU/gibibyte, p.Memory.GPUCapacityBytes/gibibyte)
}

// spLabel says whether the plan uses sequence parallelism (only TP > 1 can).
func spLabel(p *search.Plan) string {
	switch {
	case p.TP <= 1:
		return "-"
	case p.SequenceParallel:
		return "on"
	}
	return "off"
}

// printBreakdown is a second table, one row per plan row, so that the
// ranked table keeps its columns.
func printBreakdown(out io.Writer, rows []tableRow, moe bool) {
	fmt.Fprintln(out, "\nbreakdown: seconds per iteration on the critical path; GiB per GPU on the peak stage; host GiB per node")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	ep := ""
	if moe {
		ep = "EP s\t" // the expert all-to-all
	}
	fmt.Fprintln(tw, "RANK\tCOMPUTE s\tTP s\t"+ep+"PP s\tDP s\tOFFLOAD s\tSTAGE\tWEIGHTS\tGRADIENTS\tOPTIMIZER\tACTIVATIONS\tOTHER\tHOST\tIDLE")
	for _, r := range rows {
		b, mb := r.plan.Predicted.Breakdown, r.plan.Memory.Breakdown
		tp := fmt.Sprintf("%.3f", b.TP)
		if moe {
			tp += fmt.Sprintf("\t%.3f", b.EP)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%s\t%.3f\t%.3f\t%.3f\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\n",
			r.label, b.Compute, tp, b.PP, b.DP, b.Offload, r.plan.Memory.PeakStage,
			mb.Weights/gibibyte, mb.Gradients/gibibyte, mb.Optimizer/gibibyte, mb.Activations/gibibyte, mb.Other/gibibyte,
			hostLabel(r.plan.Memory), idleLabel(r.plan))
	}
	tw.Flush()
}

// idleLabel is the breakdown's IDLE column: the GPUs and hosts the plan
// leaves without ranks ("-": none).
func idleLabel(p *search.Plan) string {
	if p.Idle == nil {
		return "-"
	}
	return fmt.Sprintf("%d GPUs on %d %s", p.Idle.GPUs, len(p.Idle.Hosts), text.Plural(len(p.Idle.Hosts), "host", "hosts"))
}

// idleLines say, once per distinct set of idle hosts, which plans leave
// them idle and why.
func idleLines(plans []search.Plan) []string {
	var keys []string
	ranks := map[string][]string{}
	why := map[string]*search.IdleHosts{}
	for i := range plans {
		idle := plans[i].Idle
		if idle == nil {
			continue
		}
		k := strings.Join(idle.Hosts, ",") + "\n" + idle.Reason
		if _, ok := why[k]; !ok {
			keys = append(keys, k)
			why[k] = idle
		}
		ranks[k] = append(ranks[k], strconv.Itoa(i+1))
	}
	var out []string
	for _, k := range keys {
		idle := why[k]
		n := len(ranks[k])
		out = append(out, fmt.Sprintf("%s %s %s %d GPUs idle on %d %s (%s): %s; --use-all-gpus plans on every GPU or refuses",
			text.Plural(n, "plan", "plans"), strings.Join(ranks[k], ", "), text.Plural(n, "leaves", "leave"),
			idle.GPUs, len(idle.Hosts), text.Plural(len(idle.Hosts), "host", "hosts"), hostNames(idle.Hosts), idle.Reason))
	}
	return out
}

// hostNames lists names, eliding the middle of long lists.
func hostNames(names []string) string {
	if len(names) <= 6 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... %s", strings.Join(names[:3], ", "), strings.Join(names[len(names)-2:], ", "))
}

func hostLabel(m memory.Estimate) string {
	if m.HostCapacityBytes <= 0 {
		return fmt.Sprintf("%.1f", m.HostBytesPerNode/gibibyte)
	}
	return fmt.Sprintf("%.1f/%.1f", m.HostBytesPerNode/gibibyte, m.HostCapacityBytes/gibibyte)
}

// offloadWhy is the table's answer to "why (not) offload": an extra row for
// the best plan of the other kind when the table lacks one, and a line.
type offloadWhy struct {
	row  *tableRow
	line string
}

// explainOffload compares plan 1 with the best plan of the other kind:
// with offload when plan 1 has none, without when plan 1 offloads.
func explainOffload(res *search.Result, fx parallel.Constraints) offloadWhy {
	cmp := res.Comparison
	if cmp == nil || len(res.Plans) == 0 {
		return offloadWhy{}
	}
	first := &res.Plans[0]
	alt, kind, label := cmp.BestWithOffload, "with", "offload"
	if first.UsesOffload() {
		alt, kind, label = cmp.BestWithoutOffload, "without", "no-offload"
	}
	head := "best " + kind + " offload"
	switch {
	case alt == nil:
		return offloadWhy{}
	case alt.Considered == 0:
		return offloadWhy{line: head + ": not tried (" + notTriedReason(kind, fx) + ")"}
	case !alt.Fits && alt.Miss != nil:
		return offloadWhy{line: head + ": does not fit: " + missLabel(alt.Miss, first.Framework)}
	case !alt.Fits:
		return offloadWhy{line: head + ": nothing fits"}
	}
	where, why := "", offloadWhy{}
	if rank := rankOf(res.Plans, alt.Plan); rank > 0 {
		where = fmt.Sprintf("rank %d", rank)
	} else {
		where = fmt.Sprintf("row %q", label)
		why.row = &tableRow{label, alt.Plan}
	}
	why.line = fmt.Sprintf("%s (%s): %.3f s/iteration, %.2fx plan 1's %.3f s", head, where,
		alt.IterationSeconds, alt.IterationSeconds/first.Predicted.IterationSeconds, first.Predicted.IterationSeconds)
	if alt.OffloadSeconds > 0 {
		why.line += fmt.Sprintf(", of which %.3f s is offload (PCIe copies and the CPU optimizer step)", alt.OffloadSeconds)
	}
	return why
}

// rankOf is p's 1-based rank among plans, 0 when absent.
func rankOf(plans []search.Plan, p *search.Plan) int {
	for i := range plans {
		if reflect.DeepEqual(plans[i].Config, p.Config) {
			return i + 1
		}
	}
	return 0
}

func notTriedReason(kind string, fx parallel.Constraints) string {
	switch {
	case kind == "with" && fx.NoOffload:
		return "--no-offload"
	case kind == "with":
		return "offload is tried only for configurations that do not fit without it, and every one fits"
	case fx.ForceOffload:
		return "--offload"
	}
	return "no configuration without offload was valid"
}

func missLabel(m *search.MemoryMiss, f parallel.Framework) string {
	c := m.Config
	closest := fmt.Sprintf("the closest (TP%d PP%d DP%d CP%d mb%d, recompute %s, %s)", c.TP, c.PP, c.DP, c.CP, c.MicroBatch, c.Recompute,
		(&search.Plan{Config: c, Framework: f}).OptimizerLabel())
	if m.Memory == "host" {
		return fmt.Sprintf("%s needs %.1f GiB of host memory per node, has %.1f GiB (misses by %.1f GiB)",
			closest, m.NeedBytes/gibibyte, m.CapacityBytes/gibibyte, m.MissBytes/gibibyte)
	}
	return fmt.Sprintf("%s needs %.1f GiB per GPU on stage %d, has %.1f GiB (misses by %.1f GiB)",
		closest, m.NeedBytes/gibibyte, m.Stage, m.CapacityBytes/gibibyte, m.MissBytes/gibibyte)
}

// offloadLabel is what is offloaded and its exposed time per iteration.
func offloadLabel(p *search.Plan) string {
	if !p.UsesOffload() {
		return "-"
	}
	return fmt.Sprintf("%s (%.2fs)", p.OffloadLabel(), p.Predicted.Breakdown.Offload)
}
