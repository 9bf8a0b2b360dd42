package run

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
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
		&cli.BoolFlag{Name: "dry-run", Usage: "print every host's command lines, environment and files; start nothing"},
		&cli.BoolFlag{Name: "json", Usage: "with --dry-run: print the job and its plan as one JSON object (errors: one JSON object on stderr)"},
		&cli.StringFlag{Name: "output-dir", Usage: "write one launch script per host and the job's files here; start nothing"},
		&cli.StringFlag{Name: "nccl-mode", Value: "auto", Usage: "auto (Megatron: one NCCL network per group type across RDMA islands, else sockets), sockets or per-group (Holmes' Megatron fork): NCCL transport across islands"},
		&cli.StringFlag{Name: "launcher", Value: cmdutil.LauncherAuto, Usage: "start ranks over `ssh`, or as one srun step inside the Slurm allocation (`slurm`); auto: slurm when SLURM_JOB_ID is set; a job whose only host is this machine (or --standalone) runs here without SSH unless ssh or slurm is given"},
		&cli.StringFlag{Name: "workdir", Usage: "directory on each host where ranks start and files land (default: the launch directory)"},
		&cli.BoolFlag{Name: "keep-files", Usage: "keep the job's own files directory (/tmp/pipette-launch-<job-id>: generated ds_config.json, hostfile, NCCL configs) on every host after the job; by default it is removed when the job ends, however it ends (logs go to --log-dir, never there)"},
		&cli.BoolFlag{Name: "no-check-script", Usage: "do not require the script to exist on this machine (it exists only on the hosts)"},
		&cli.BoolFlag{Name: "plan-overrides-config", Usage: "let the plan change your DeepSpeed config's batch sizes, ZeRO stage and offload (printed as a diff) instead of keeping them"},
		&cli.BoolFlag{Name: "reprobe", Usage: "with --dry-run/--output-dir: run the quick launch probe now (one SSH command per host: rank 0's address, each host's interface, python) instead of reading its cache"},
		&cli.DurationFlag{Name: "probe-max-age", Value: probe.DefaultLaunchProbeMaxAge, Usage: "--dry-run/--output-dir show a cached launch probe younger than this (a launch always probes and caches)"},
		&cli.StringFlag{Name: "quiet-ranks", Usage: "global ranks whose output is not streamed (0,3); they still go to --log-dir"},
		&cli.DurationFlag{Name: "stop-grace", Value: launch.DefaultGrace, Usage: "after a failure or signal: time between SIGTERM and SIGKILL to every rank"},
		&cli.BoolFlag{Name: "preflight", Usage: "before the job, run a collective test through the job's exact environment: an all-reduce in every TP, CP and DP group and a send/recv on every pipeline link; stop naming the group, hosts and transport that fail (pipette-launch preflight runs only the test)"},
		&cli.DurationFlag{Name: "preflight-timeout", Value: 30 * time.Second, Usage: "preflight: limit for every connection and operation"},
		&cli.Float64Flag{Name: "preflight-min-share", Value: 0.5, Usage: "preflight with NCCL: fail a group whose bus bandwidth is under this share of the plan's figure (gloo on CPU is reported, not judged)"},
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
		DryRun:         c.Bool("dry-run"),
		Reprobe:        c.Bool("reprobe"),
		ProbeMaxAge:    c.Duration("probe-max-age"),
		JSON:           c.Bool("json"),
		Report:         cmdutil.ReportOptionsFrom(c),
		OutputDir:      c.String("output-dir"),
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
	o.PlanOverridesConfig = c.Bool("plan-overrides-config")
	o.SSH, o.Fanout = cmdutil.SSHOptionsFromCLI(c)
	if o.Fanout < 1 {
		return nil, cmdutil.InputErrorf("--fanout %d: want at least 1 (hosts contacted at once)", o.Fanout)
	}
	if strings.TrimSpace(o.RunID) == "" {
		return nil, cmdutil.InputErrorf("--run-id %q: want a non-empty job name (it becomes TORCHELASTIC_RUN_ID)", o.RunID)
	}
	o.StopGrace = c.Duration("stop-grace")
	if o.StopGrace <= 0 {
		return nil, cmdutil.InputErrorf("--stop-grace %s: want a positive duration such as 10s (ranks need time to exit after SIGTERM)", o.StopGrace)
	}
	o.Preflight = c.Bool("preflight")
	o.PreflightTimeout = c.Duration("preflight-timeout")
	o.PreflightMinShare = c.Float64("preflight-min-share")
	if o.PreflightTimeout < time.Second {
		return nil, cmdutil.InputErrorf("--preflight-timeout %s: want at least 1s, such as 30s", o.PreflightTimeout)
	}
	if o.PreflightMinShare < 0 || o.PreflightMinShare > 1 {
		return nil, cmdutil.InputErrorf("--preflight-min-share %g: want a share between 0 and 1", o.PreflightMinShare)
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
