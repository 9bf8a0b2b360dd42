package run

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
)

// Flags are torchrun's flags (dashed and underscored spellings, PET_*
// environment defaults as torchrun) plus pipette-launch's own. Parsing stops at the script: everything after it
// belongs to the script, as with torchrun.
func Flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "nproc-per-node", EnvVars: []string{"PET_NPROC_PER_NODE"}, Aliases: []string{"nproc_per_node"}, Usage: "ranks per host: N, or gpu/auto for every GPU (a cluster file's; on this machine alone, counted here with nvidia-smi, auto falling back to one rank per CPU); with --hosts/--hostfile default 1, as torchrun"},
		&cli.StringFlag{Name: "nnodes", EnvVars: []string{"PET_NNODES"}, Usage: "number of hosts to use: N or N:N (no elastic ranges)"},
		&cli.StringFlag{Name: "num_gpus", Aliases: []string{"num-gpus", "num_accelerators"}, Usage: "DeepSpeed's spelling of --nproc-per-node (a line with DeepSpeed's launcher flags gets --local_rank=N, as DeepSpeed's launcher passes it)"},
		&cli.StringFlag{Name: "num_nodes", Aliases: []string{"num-nodes"}, Usage: "DeepSpeed's spelling of --nnodes"},
		&cli.StringFlag{Name: "master-addr", EnvVars: []string{"PET_MASTER_ADDR"}, Aliases: []string{"master_addr"}, Usage: "address of rank 0 (default: rank 0's host from the plan)"},
		&cli.IntFlag{Name: "master-port", EnvVars: []string{"PET_MASTER_PORT"}, Aliases: []string{"master_port"}, Value: 29500, Usage: "port of rank 0's rendezvous"},
		&cli.IntFlag{Name: "max-restarts", EnvVars: []string{"PET_MAX_RESTARTS"}, Aliases: []string{"max_restarts"}, Usage: "restart the whole job up to N times when a rank fails"},
		&cli.BoolFlag{Name: "no-python", EnvVars: []string{"PET_NO_PYTHON"}, Aliases: []string{"no_python"}, Usage: "run the script as a program, not under python"},
		&cli.BoolFlag{Name: "module", EnvVars: []string{"PET_MODULE"}, Aliases: []string{"m"}, Usage: "the script is a python module (python -m)"},
		&cli.StringFlag{Name: "log-dir", EnvVars: []string{"PET_LOG_DIR"}, Aliases: []string{"log_dir"}, Usage: "one log file per rank: on this machine when launching, on each host in --output-dir scripts"},
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"PET_RDZV_ID"}, Aliases: []string{"run_id", "rdzv-id", "rdzv_id"}, Value: "pipette", Usage: "job name, also TORCHELASTIC_RUN_ID"},
		&cli.StringFlag{Name: "python", Usage: "interpreter that runs the script on every host (default: the python3 on your PATH when every host has the same path, else python3)"},
		&cli.GenericFlag{Name: "env", Value: &envList{}, Usage: "KEY=VALUE set for every rank (repeatable; beats forwarded variables, .deepspeed_env and --env-file)"},
		&cli.StringFlag{Name: "env-file", Usage: "file of KEY=VALUE lines set for every rank (.deepspeed_env's format; beats .deepspeed_env)"},
		&cli.StringFlag{Name: "cluster", Usage: "cluster file (YAML, from pipette-launch probe or written by hand) to plan on, or example for the embedded example cluster (dry runs only); default: the hosts of --hosts/--hostfile, of the Slurm allocation, DeepSpeed's /job/hostfile for DeepSpeed lines, else this machine as torchrun"},
		&cli.StringFlag{Name: "hosts", Usage: "hosts as a hostlist expression (node[01-04]); no planning: torchrun's rank order"},
		&cli.StringFlag{Name: "include", Aliases: []string{"i"}, Usage: "DeepSpeed's host filter: use only these hosts/slots of --hostfile/--hosts (host1@host2:0,2)"},
		&cli.StringFlag{Name: "exclude", Aliases: []string{"e"}, Usage: "DeepSpeed's host filter: leave out these hosts/slots (host1:3@host2)"},
		&cli.BoolFlag{Name: "no-local-rank", Aliases: []string{"no_local_rank", "use-env", "use_env"}, Usage: "do not pass --local_rank=N to the script (DeepSpeed's --no_local_rank, torch.distributed.launch's --use_env); LOCAL_RANK is set either way"},
		&cli.StringFlag{Name: "hostfile", Aliases: []string{"H"}, Usage: "DeepSpeed-style hostfile (HOST slots=N lines); no planning: torchrun's rank order"},
		&cli.StringFlag{Name: "as", Usage: "the launcher the line was written for: torchrun, deepspeed or torch.distributed.launch; the last two pass --local_rank=N right after the script, and DeepSpeed's uses every GPU (or /job/hostfile) when no hosts are named (default: the line's flags decide, else DeepSpeed's for a DeepSpeed script)"},
		&cli.StringFlag{Name: "framework", Usage: "megatron, deepspeed or torch (default: megatron for Megatron scripts/flags, deepspeed with --deepspeed, else torch)"},
		&cli.IntFlag{Name: "plan", Value: 1, Usage: "use the N-th ranked plan"},
		&cli.StringFlag{Name: "sequence-parallel", Value: "auto", Usage: "on, off or auto: auto lets the script's own --sequence-parallel decide (absent: off); on/off must agree with it"},
		&cli.StringFlag{Name: "model", Usage: "model preset name or model YAML, when the script's arguments do not give the shape"},
		&cli.IntFlag{Name: "global-batch-size", Usage: "global batch size to plan for (default: the script's --global-batch-size)"},
		cmdutil.MemoryHeadroomFlag(),
		cmdutil.UseAllGPUsFlag(),
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
		&cli.DurationFlag{Name: "probe-max-age", Value: probe.DefaultLaunchProbeMaxAge, Usage: "--dry-run/--output-dir show a cached launch probe younger than this (a launch always probes and caches)"},
		&cli.BoolFlag{Name: "standalone", EnvVars: []string{"PET_STANDALONE"}, Usage: "torchrun's single-host mode: this machine only, without SSH (ranks meet on 127.0.0.1)"},
		&cli.StringFlag{Name: "rdzv-endpoint", EnvVars: []string{"PET_RDZV_ENDPOINT"}, Aliases: []string{"rdzv_endpoint"}, Usage: "torchrun's HOST[:PORT]: taken as --master-addr/--master-port"},
		&cli.StringFlag{Name: "role", EnvVars: []string{"PET_ROLE"}, Value: "default", Usage: "ROLE_NAME of the workers"},
		&cli.StringFlag{Name: "local-ranks-filter", EnvVars: []string{"PET_LOCAL_RANKS_FILTER"}, Aliases: []string{"local_ranks_filter"}, Usage: "stream output only of these local ranks (0,3); the rest still go to --log-dir"},
		&cli.StringFlag{Name: "quiet-ranks", Usage: "global ranks whose output is not streamed (0,3); they still go to --log-dir"},
		&cli.DurationFlag{Name: "stop-grace", Value: launch.DefaultGrace, Usage: "after a failure or signal: time between SIGTERM and SIGKILL to every rank"},
		&cli.BoolFlag{Name: "preflight", Usage: "before the job, run a collective test through the job's exact environment: an all-reduce in every TP, CP and DP group and a send/recv on every pipeline link; stop naming the group, hosts and transport that fail (pipette-launch preflight runs only the test)"},
		&cli.DurationFlag{Name: "preflight-timeout", Value: 30 * time.Second, Usage: "preflight: limit for every connection and operation"},
		&cli.Float64Flag{Name: "preflight-min-share", Value: 0.5, Usage: "preflight with NCCL: fail a group whose bus bandwidth is under this share of the plan's figure (gloo on CPU is reported, not judged)"},
		&cli.DurationFlag{Name: "heartbeat-timeout", Value: launch.DefaultHeartbeatTimeout, Usage: "a host's agent stops its ranks when it hears nothing from pipette-launch this long (network cut), and a host not heard from this long is lost: the job stops everywhere"},
	}, append(append(append(cmdutil.SSHFlags(false), cmdutil.ReportFlags()...), cmdutil.IgnoredLauncherFlags()...), k8sFlags()...)...)
}

// OptionsFromCLI fills Options from parsed flags; the first argument
// is the script, the rest its arguments.
func OptionsFromCLI(c *cli.Context, io *cmdutil.IOStreams, env []string) (*Options, error) {
	o := &Options{
		IO:             io,
		Env:            env,
		NProcPerNode:   c.String("nproc-per-node"),
		NNodes:         c.String("nnodes"),
		MasterAddr:     c.String("master-addr"),
		MasterPort:     c.Int("master-port"),
		MaxRestarts:    c.Int("max-restarts"),
		NoPython:       c.Bool("no-python"),
		Module:         c.Bool("module"),
		LogDir:         c.String("log-dir"),
		RunID:          c.String("run-id"),
		Python:         c.String("python"),
		ClusterFile:    c.String("cluster"),
		Hosts:          c.String("hosts"),
		Hostfile:       c.String("hostfile"),
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
		Role:           c.String("role"),
		EnvFile:        c.String("env-file"),
		Include:        c.String("include"),
		Exclude:        c.String("exclude"),
		NoLocalRank:    c.Bool("no-local-rank"),
		K8s:            k8sOptionsFromCLI(c),
	}
	if l, ok := c.Generic("env").(*envList); ok && l != nil {
		o.EnvFlags = l.vals
	}
	o.SequenceParallel = c.String("sequence-parallel")
	o.PlanOverridesConfig = c.Bool("plan-overrides-config")
	for _, f := range cmdutil.IgnoredLauncherFlags() {
		name := f.Names()[0]
		if c.IsSet(name) {
			o.Ignored = append(o.Ignored, "--"+name)
			o.IgnoredWhy = append(o.IgnoredWhy, strings.TrimPrefix(f.(cli.DocGenerationFlag).GetUsage(), "ignored: "))
		}
	}
	o.style = cmdutil.LauncherStyle(c)
	if as := c.String("as"); as != "" {
		// torch.distributed.launch and deepspeed --module lines have no
		// flag only their launcher has: the user names it.
		var err error
		if o.style, err = cmdutil.ParseLauncherStyle(as); err != nil {
			return nil, err
		}
	}
	o.DeepSpeedHostfile = cmp.Or(cmdutil.EnvLookup(env)(DeepSpeedHostfileEnv), cmdutil.DeepSpeedHostfile)
	for _, pair := range [][2]string{{"num_gpus", "nproc-per-node"}, {"num_nodes", "nnodes"}} {
		if !c.IsSet(pair[0]) {
			continue
		}
		if c.IsSet(pair[1]) {
			return nil, cmdutil.InputErrorf("--%s and --%s say the same (DeepSpeed's and torchrun's spelling): give one", pair[0], pair[1])
		}
		if pair[1] == "nnodes" {
			o.NNodes = c.String(pair[0])
		} else {
			o.NProcPerNode = c.String(pair[0])
		}
	}
	if err := checkNotKeyFile(o.Include); err != nil {
		return nil, err
	}
	if c.Bool("standalone") {
		if o.ClusterFile != "" || o.Hosts != "" || o.Hostfile != "" {
			return nil, cmdutil.InputErrorf("--standalone runs on this host only: it cannot be combined with --cluster, --hosts or --hostfile")
		}
		o.Hosts, o.MasterAddr = "localhost", cmp.Or(o.MasterAddr, "127.0.0.1")
		o.standalone = true
	}
	if ep := c.String("rdzv-endpoint"); ep != "" {
		if err := applyRdzvEndpoint(o, ep, c.IsSet("master-port")); err != nil {
			return nil, err
		}
	}
	var err error
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
	o.Preflight = c.Bool("preflight")
	o.PreflightTimeout = c.Duration("preflight-timeout")
	o.PreflightMinShare = c.Float64("preflight-min-share")
	if o.PreflightTimeout < time.Second {
		return nil, cmdutil.InputErrorf("--preflight-timeout %s: want at least 1s, such as 30s", o.PreflightTimeout)
	}
	if !(o.PreflightMinShare >= 0 && o.PreflightMinShare <= 1) { // NaN too
		return nil, cmdutil.InputErrorf("--preflight-min-share %g: want a share between 0 and 1", o.PreflightMinShare)
	}
	o.HeartbeatTimeout = c.Duration("heartbeat-timeout")
	if o.HeartbeatTimeout < time.Second {
		return nil, cmdutil.InputErrorf("--heartbeat-timeout %s: want at least 1s, such as 30s (shorter stops healthy jobs on a busy network)", o.HeartbeatTimeout)
	}
	if o.LocalRanksFilter, err = cmdutil.ParseRankList("local-ranks-filter", c.String("local-ranks-filter")); err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	if o.QuietRanks, err = cmdutil.ParseRankList("quiet-ranks", c.String("quiet-ranks")); err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	args := c.Args().Slice()
	if len(args) == 0 {
		return nil, cmdutil.InputErrorf("no training script given: usage: pipette-launch [flags] script.py [script args...]")
	}
	o.Script, o.ScriptArgs = args[0], args[1:]
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
func applyRdzvEndpoint(o *Options, ep string, portSet bool) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		host, port = ep, ""
	}
	if o.MasterAddr == "" {
		o.MasterAddr = host
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
			o.notes = append(o.notes, fmt.Sprintf("--rdzv-endpoint %s: MASTER_PORT %d, a port free on this machine now (torchrun's port 0 picks a free one)", ep, n))
		}
		o.MasterPort = n
	}
	return nil
}

// ParseNNodes accepts torchrun's N or MIN:MAX with MIN == MAX.
func ParseNNodes(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	lo, hi, ranged := strings.Cut(s, ":")
	n, err := strconv.Atoi(lo)
	if err != nil || n < 1 || n > limits.MaxHosts {
		return 0, cmdutil.InputErrorf("--nnodes %q: want a number of hosts from 1 to %d", s, limits.MaxHosts)
	}
	if ranged {
		m, err := strconv.Atoi(hi)
		if err != nil || m != n {
			return 0, cmdutil.InputErrorf("--nnodes %q: elastic ranges are not supported; give one number", s)
		}
	}
	return n, nil
}

// parseNProc returns ranks per host; all is true for gpu/auto (every GPU).
func parseNProc(s string) (n int, all bool, err error) {
	switch s {
	case "":
		return 0, false, nil
	case "gpu", "auto":
		return 0, true, nil
	case "cpu":
		return 0, false, cmdutil.InputErrorf("--nproc-per-node cpu: pipette-launch places GPU ranks; give a number")
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 1 || n > limits.MaxGPUsPerHost {
		return 0, false, cmdutil.InputErrorf("--nproc-per-node %q: want a number from 1 to %d (ranks per host), gpu or auto", s, limits.MaxGPUsPerHost)
	}
	return n, false, nil
}
