package run

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/launcher/elastic"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Flags are the launch line's launcher flags (launchline.Flags and the
// ignored ones) plus pipette-launch's own. Parsing stops at the script: everything after it
// belongs to the script, as with torchrun.
func Flags() []cli.Flag {
	own := []cli.Flag{
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"PET_RDZV_ID"}, Aliases: []string{"run_id", "rdzv-id", "rdzv_id"}, Value: "pipette", Usage: "job name, also TORCHELASTIC_RUN_ID"},
		&cli.StringFlag{Name: "python", Usage: "interpreter that runs the script on every host (default: the python3 on your PATH when every host has the same path, else python3)"},
		&cli.GenericFlag{Name: "env", Value: &envList{}, Usage: "KEY=VALUE set for every rank (repeatable; beats forwarded variables, .deepspeed_env and --env-file)"},
		&cli.StringFlag{Name: "env-file", Usage: "file of KEY=VALUE lines set for every rank (.deepspeed_env's format; beats .deepspeed_env)"},
		&cli.StringFlag{Name: "cluster", Usage: "cluster file (YAML, from pipette-launch probe or written by hand) to plan on, or example for the embedded example cluster (dry runs only); default: the hosts of --hosts/--hostfile, of the Slurm allocation, DeepSpeed's /job/hostfile for DeepSpeed lines, else this machine as torchrun"},
		&cli.StringFlag{Name: "framework", Usage: "megatron, deepspeed or torch (default: megatron for Megatron scripts/flags, deepspeed with --deepspeed, else torch)"},
		&cli.IntFlag{Name: "plan", Value: 1, Usage: "use the N-th ranked plan"},
		&cli.StringFlag{Name: "sequence-parallel", Value: "auto", Usage: "on, off or auto: auto lets the script's own --sequence-parallel decide (absent: off); on/off must agree with it"},
		&cli.StringFlag{Name: "model", Usage: "model preset name or model YAML, when the script's arguments do not give the shape"},
		&cli.IntFlag{Name: "global-batch-size", Usage: "global batch size to plan for (default: the script's --global-batch-size)"},
		cmdutil.MemoryHeadroomFlag(),
		cmdutil.UseAllGPUsFlag(),
		cmdutil.RecomputeFlag(),
		cmdutil.NoOffloadFlag(),
		cmdutil.OffloadFlag(),
		cmdutil.DistributedOptimizerFlag(),
		&cli.BoolFlag{Name: "dry-run", Usage: "print every host's command lines, environment and files; start nothing"},
		&cli.BoolFlag{Name: "json", Usage: "with --dry-run: print the job and its plan as one JSON object (errors: one JSON object on stderr)"},
		&cli.StringFlag{Name: "output-dir", Usage: "write one launch script per host and the job's files here (a directory of yours only you can write; made 0700 when missing); start nothing"},
		&cli.BoolFlag{Name: "force", Usage: "with --output-dir: replace files already in the directory (without it, any file or link there is refused)"},
		&cli.StringFlag{Name: "nccl-mode", Value: "auto", Usage: "auto (Megatron: one NCCL network per group type across RDMA islands, else sockets), sockets or per-group (Holmes' Megatron fork): NCCL transport across islands"},
		&cli.StringFlag{Name: "launcher", Value: cmdutil.LauncherAuto, Usage: "start ranks over `ssh`, or as one srun step inside the Slurm allocation (`slurm`); auto: slurm when SLURM_JOB_ID is set; a job whose only host is this machine (or --standalone) runs here without SSH unless ssh or slurm is given"},
		&cli.StringFlag{Name: "workdir", Usage: "directory on each host where ranks start and files land (default: the launch directory)"},
		&cli.BoolFlag{Name: "keep-files", Usage: "keep the job's own files directory (/tmp/pipette-launch-<job-id>: generated ds_config.json, hostfile, NCCL configs) on every host after the job; by default it is removed when the job ends, however it ends (logs go to --log-dir, never there)"},
		&cli.BoolFlag{Name: "no-check-script", Usage: "do not require the script to exist on this machine (it exists only on the hosts)"},
		&cli.BoolFlag{Name: "plan-overrides-config", Usage: "let the plan change your DeepSpeed config's batch sizes, ZeRO stage and offload (printed as a diff) instead of keeping them"},
		&cli.BoolFlag{Name: "reprobe", Usage: "with --dry-run/--output-dir: run the quick launch probe now (one SSH command per host: rank 0's address, each host's interface, python) instead of reading its cache"},
		&cli.DurationFlag{Name: "probe-max-age", Value: launchprobe.DefaultMaxAge, Usage: "--dry-run/--output-dir show a cached launch probe younger than this (a launch always probes and caches)"},
		&cli.StringFlag{Name: "quiet-ranks", Usage: "global ranks whose output is not streamed (0,3); they still go to --log-dir"},
		&cli.DurationFlag{Name: "stop-grace", Value: launch.DefaultGrace, Usage: "after a failure or signal: time between SIGTERM and SIGKILL to every rank"},
		&cli.BoolFlag{Name: "preflight", Usage: "before the job, run a collective test through the job's exact environment: an all-reduce in every TP, CP and DP group and a send/recv on every pipeline link; stop naming the group, hosts and transport that fail (pipette-launch preflight runs only the test)"},
		&cli.DurationFlag{Name: "preflight-timeout", Value: 30 * time.Second, Usage: "preflight: limit for every connection and operation"},
		&cli.Float64Flag{Name: "preflight-min-share", Value: 0.5, Usage: "preflight with NCCL: fail a group whose bus bandwidth is under this share of the plan's figure (gloo on CPU is reported, not judged)"},
		&cli.DurationFlag{Name: "rejoin-interval", Value: elastic.DefaultRejoinInterval, Usage: "with --nnodes MIN:MAX below MAX: a host left out that answers again is taken in by a restart right after the job's next checkpoint line, else this long after it answered; never more often than this (0: only at a restart a failure causes)"},
		&cli.DurationFlag{Name: "progress-timeout", Usage: "stop a job that printed iteration lines (Megatron-LM's, DeepSpeed's) and then no new step for this long, as a failure (an elastic job restarts; hosts that went silent while others printed on are left out); off by default"},
		&cli.DurationFlag{Name: "heartbeat-timeout", Value: launch.DefaultHeartbeatTimeout, Usage: "a host's agent stops its ranks when it hears nothing from pipette-launch this long (network cut), and a host not heard from this long is lost: the job stops everywhere"},
	}
	flags := append(launchline.Flags(), own...)
	for _, more := range [][]cli.Flag{cmdutil.SSHFlags(false), cmdutil.ReportFlags(), launchline.IgnoredLauncherFlags(), k8sFlags()} {
		flags = append(flags, more...)
	}
	return flags
}

// OptionsFromCLI fills Options from parsed flags; the first argument
// is the script, the rest its arguments.
func OptionsFromCLI(c *cli.Context, io *cmdutil.IOStreams, env []string) (*Options, error) {
	line, err := launchline.Read(c, env)
	if err != nil {
		return nil, err
	}
	o := &Options{
		Line:           *line,
		IO:             io,
		Env:            env,
		RunID:          c.String("run-id"),
		Python:         c.String("python"),
		ClusterFile:    c.String("cluster"),
		Framework:      c.String("framework"),
		PlanIndex:      c.Int("plan"),
		Model:          c.String("model"),
		GlobalBatch:    c.Int("global-batch-size"),
		MemoryHeadroom: c.Float64("memory-headroom"),
		UseAllGPUs:     c.Bool("use-all-gpus"),
		DryRun:         c.Bool("dry-run"),
		Reprobe:        c.Bool("reprobe"),
		ProbeMaxAge:    c.Duration("probe-max-age"),
		JSON:           c.Bool("json"),
		Report:         cmdutil.ReportOptionsFrom(c),
		OutputDir:      c.String("output-dir"),
		Force:          c.Bool("force"),
		NCCLMode:       c.String("nccl-mode"),
		Launcher:       c.String("launcher"),
		WorkDir:        c.String("workdir"),
		NoCheckScript:  c.Bool("no-check-script"),
		KeepFiles:      c.Bool("keep-files"),
		EnvFile:        c.String("env-file"),
		K8s:            k8sOptionsFromCLI(c),
	}
	if l, ok := c.Generic("env").(*envList); ok && l != nil {
		o.EnvFlags = l.vals
	}
	o.SequenceParallel = c.String("sequence-parallel")
	o.Pins = planner.Pins{Recompute: parallel.Recompute(c.String("recompute")), NoOffload: c.Bool("no-offload"),
		Offload: c.Bool("offload"), DistributedOptimizer: cmdutil.DistributedOptimizerPin(c)}
	o.PlanOverridesConfig = c.Bool("plan-overrides-config")
	o.SSH, o.Fanout = cmdutil.SSHOptionsFromCLI(c)
	if o.Fanout < 1 {
		return nil, cmdutil.InputErrorf("--fanout %d: want at least 1 (hosts contacted at once)", o.Fanout)
	}
	if c.IsSet("output-dir") && strings.TrimSpace(o.OutputDir) == "" {
		return nil, cmdutil.InputErrorf("--output-dir %q: want a directory name (an empty value, such as an unset variable, would otherwise start the job)", o.OutputDir)
	}
	if o.Force && o.OutputDir == "" {
		return nil, cmdutil.InputErrorf("--force replaces files in --output-dir: give --output-dir DIR too")
	}
	if c.IsSet("global-batch-size") {
		if err := cmdutil.CheckIntFlag("global-batch-size", o.GlobalBatch, 1, limits.MaxGlobalBatch); err != nil {
			return nil, err
		}
	}
	if err := cmdutil.CheckNumberFlag("memory-headroom", o.MemoryHeadroom, limits.MemoryHeadroom); err != nil {
		return nil, err
	}
	if err := checkRunID(o.RunID); err != nil {
		return nil, err
	}
	o.StopGrace = c.Duration("stop-grace")
	if o.StopGrace <= 0 {
		return nil, cmdutil.InputErrorf("--stop-grace %s: want a positive duration such as 10s (ranks need time to exit after SIGTERM)", o.StopGrace)
	}
	if t := o.Line.ShutdownTimeout; t > 0 {
		if c.IsSet("stop-grace") && o.StopGrace != t {
			return nil, cmdutil.InputErrorf("--stop-grace %s and --shutdown-timeout %d (or PET_SHUTDOWN_TIMEOUT, TORCH_ELASTIC_SHUTDOWN_TIMEOUT) disagree: both are the time ranks get between SIGTERM and SIGKILL; give one", o.StopGrace, int(t.Seconds()))
		}
		o.StopGrace = t
	}
	o.Preflight = c.Bool("preflight")
	o.PreflightTimeout = c.Duration("preflight-timeout")
	o.PreflightMinShare = c.Float64("preflight-min-share")
	if o.PreflightTimeout < time.Second {
		return nil, cmdutil.InputErrorf("--preflight-timeout %s: want at least 1s, such as 30s", o.PreflightTimeout)
	}
	if !(o.PreflightMinShare >= 0 && o.PreflightMinShare <= 1) { // NaN too
		return nil, cmdutil.InputErrorf("--preflight-min-share %g: want a share between 0 and 1", o.PreflightMinShare)
	}
	if o.RejoinInterval = c.Duration("rejoin-interval"); o.RejoinInterval < 0 {
		return nil, cmdutil.InputErrorf("--rejoin-interval %s: want a duration such as 10m, or 0 to take hosts in only at a restart a failure causes", o.RejoinInterval)
	}
	if o.ProgressTimeout = c.Duration("progress-timeout"); o.ProgressTimeout < 0 {
		return nil, cmdutil.InputErrorf("--progress-timeout %s: want a duration such as 30m (longer than the job's slowest step and checkpoint save), or 0 for none", o.ProgressTimeout)
	}
	o.HeartbeatTimeout = c.Duration("heartbeat-timeout")
	if o.HeartbeatTimeout < time.Second {
		return nil, cmdutil.InputErrorf("--heartbeat-timeout %s: want at least 1s, such as 30s (shorter stops healthy jobs on a busy network)", o.HeartbeatTimeout)
	}
	if o.QuietRanks, err = cmdutil.ParseRankList("quiet-ranks", c.String("quiet-ranks")); err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	return o, nil
}

// checkRunID refuses a run id that cannot name the job everywhere it goes:
// TORCHELASTIC_RUN_ID, the job's directories on every host (one path
// component each: bounded by limits.MaxRunIDBytes), comments in the
// generated scripts and sbatch's --job-name, where a line break or another
// control character would end the line.
func checkRunID(id string) error {
	const flag = "--run-id (or PET_RDZV_ID)"
	switch {
	case strings.TrimSpace(id) == "":
		return cmdutil.InputErrorf("%s %q: want a non-empty job name (it becomes TORCHELASTIC_RUN_ID)", flag, id)
	case len(id) > limits.MaxRunIDBytes:
		return cmdutil.InputErrorf("%s is %d bytes long: want at most %d (it names the job's directory on every host, and a file name has at most 255 bytes)", flag, len(id), limits.MaxRunIDBytes)
	case !utf8.ValidString(id):
		return cmdutil.InputErrorf("%s %q: not UTF-8 text; want a job name such as llama-70b-run3", flag, id)
	}
	if i := strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }); i >= 0 {
		return cmdutil.InputErrorf("%s %q: holds the control character %q at byte %d; want a job name without line breaks or control characters (it goes into the job's scripts)", flag, id, id[i], i)
	}
	return nil
}
