package launchline

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// DeepSpeedHostfile is DeepSpeed's launcher's default --hostfile
// (deepspeed/launcher/constants.py DLTS_HOSTFILE).
const DeepSpeedHostfile = "/job/hostfile"

// IgnoredLauncherFlags are torchrun's and DeepSpeed's launcher flags that
// are accepted so their command lines keep working, but do nothing here;
// each one's Usage is "ignored: <why>", printed as a warning when it is
// given (and listed in docs/launcher-flags.md).
func IgnoredLauncherFlags() []cli.Flag {
	str := func(name string, env string, aliases []string, why string) cli.Flag {
		f := &cli.StringFlag{Name: name, Aliases: aliases, Hidden: true, Usage: "ignored: " + why}
		if env != "" {
			f.EnvVars = []string{env}
		}
		return f
	}
	boolean := func(name string, env string, aliases []string, why string) cli.Flag {
		f := &cli.BoolFlag{Name: name, Aliases: aliases, Hidden: true, Usage: "ignored: " + why}
		if env != "" {
			f.EnvVars = []string{env}
		}
		return f
	}
	return []cli.Flag{
		// torchrun
		str("node-rank", "PET_NODE_RANK", []string{"node_rank"}, "pipette-launch starts every host itself and gives each its node rank from the plan (above 0 it is refused: that node's copy of a per-node line would start the whole job again)"),
		str("rdzv-backend", "PET_RDZV_BACKEND", []string{"rdzv_backend"}, "the rendezvous is static (MASTER_ADDR/MASTER_PORT of rank 0's host), there is no rendezvous backend to choose"),
		str("rdzv-conf", "PET_RDZV_CONF", []string{"rdzv_conf"}, "the rendezvous is static, there is no rendezvous backend to configure"),
		str("monitor-interval", "PET_MONITOR_INTERVAL", []string{"monitor_interval"}, "each host's agent watches its ranks itself; use --heartbeat-timeout for lost hosts"),
		str("start-method", "PET_START_METHOD", []string{"start_method"}, "ranks are processes the host's agent starts, not multiprocessing children"),
		str("redirects", "PET_REDIRECTS", []string{"r"}, "every rank's output is streamed with its rank prefix; --log-dir writes one file per rank"),
		str("tee", "PET_TEE", []string{"t"}, "every rank's stdout and stderr are already streamed here with a rank prefix (use --log-dir for one file per rank, --quiet-ranks/--local-ranks-filter to narrow the stream)"),
		str("local-addr", "PET_LOCAL_ADDR", []string{"local_addr"}, "each host's address comes from the cluster, the host list and the launch probe, not from a flag given on one node"),
		str("numa-binding", "PET_NUMA_BINDING", []string{"numa_binding"}, "ranks are not bound to NUMA nodes; wrap the script with numactl (--no-python) to bind them"),
		boolean("run-path", "PET_RUN_PATH", []string{"run_path"}, "every rank runs the script as its own python process (python -u script), which runpy.run_path would only imitate"),
		boolean("virtual-local-rank", "PET_VIRTUAL_LOCAL_RANK", []string{"virtual_local_rank"}, "every rank keeps its own LOCAL_RANK and sees its host's GPUs, as without the flag"),
		str("event-log-handler", "PET_EVENT_LOG_HANDLER", []string{"event_log_handler"}, "no torchelastic event handler is loaded: pipette-launch reports each start, failure and restart itself"),
		str("logs-specs", "", []string{"logs_specs"}, "no torchrun.logs_specs plugin is loaded: every rank's output is streamed with its rank prefix, and --log-dir writes one file per rank"),
		// DeepSpeed's launcher (deepspeed/launcher/runner.py)
		boolean("bind_cores_to_rank", "", []string{"bind-cores-to-rank"}, "ranks are not pinned to CPU cores; wrap the script with numactl (--no-python) to pin them"),
		str("bind_core_list", "", []string{"bind-core-list"}, "ranks are not pinned to CPU cores (see --bind_cores_to_rank)"),
		boolean("force_multi", "", []string{"force-multi"}, "pipette-launch starts every listed host itself, one host or many; a remote single host is reached over SSH already"),
		str("autotuning", "", nil, "DeepSpeed's autotuner is not run: the job runs once with your config as given (pipette-launch plan ranks parallel layouts)"),
		boolean("no_ssh_check", "", []string{"no-ssh-check"}, "the launch probe reaches every host before the job; an unreachable host is reported there"),
		boolean("save_pid", "", []string{"save-pid"}, "pipette-launch stays in the foreground and stops every rank on SIGINT/SIGTERM; its own pid is the job's"),
		str("enable_each_rank_log", "", []string{"enable-each-rank-log"}, "use --log-dir: one log file per rank"),
		str("launcher_args", "", []string{"launcher-args"}, "there is no pdsh/MPI launcher to pass arguments to: pipette-launch starts the ranks itself (--launcher ssh or slurm)"),
		boolean("no_ssh", "", []string{"no-ssh"}, "pipette-launch starts every host itself from one copy of the line, over SSH or as a Slurm step (a --node_rank above 0 is refused)"),
		str("comment", "", nil, "there is no srun of DeepSpeed's Slurm launcher to pass it to: pipette-launch runs inside the allocation (pipette-launch sbatch --sbatch-arg=--comment=TEXT sets it on the job)"),
	}
}

// IgnoredFlagsHelp is --help's list of the ignored launcher flags, one
// sentence each saying why (docs/launcher-flags.md has the same list).
func IgnoredFlagsHelp() string {
	var b strings.Builder
	b.WriteString("torchrun's and DeepSpeed's launcher flags that are accepted and ignored (a warning says so):")
	for _, f := range IgnoredLauncherFlags() {
		why := strings.TrimPrefix(f.(cli.DocGenerationFlag).GetUsage(), "ignored: ")
		fmt.Fprintf(&b, "\n  --%s: %s.", f.Names()[0], why)
	}
	return b.String()
}

// torchrunOnlyFlags and deepSpeedOnlyFlags tell which launcher a line was
// written for: DeepSpeed's launcher passes --local_rank=N to the script and
// uses every GPU of a machine without a hostfile; torchrun does neither.
var (
	torchrunOnlyFlags  = []string{"nproc-per-node", "nnodes", "standalone", "rdzv-endpoint", "rdzv-backend", "rdzv-conf", "run-id", "node-rank", "role", "tee", "redirects", "max-restarts", "monitor-interval", "start-method", "local-ranks-filter", "log-dir", "local-addr", "numa-binding", "run-path", "virtual-local-rank", "event-log-handler", "logs-specs", "signals-to-handle", "shutdown-timeout"}
	deepSpeedOnlyFlags = []string{"num_gpus", "num_nodes", "include", "exclude", "bind_cores_to_rank", "bind_core_list", "force_multi", "autotuning", "elastic_training", "min_elastic_nodes", "max_elastic_nodes", "no_ssh_check", "save_pid", "enable_each_rank_log", "launcher_args", "no_ssh", "comment"}
)

// LauncherStyle is the launcher a line's flags were written for:
// "deepspeed" when it uses a flag only DeepSpeed's launcher has,
// "torchrun" when it uses one only torchrun has, else "" (the framework
// decides: a DeepSpeed script is taken as started by DeepSpeed's launcher).
func LauncherStyle(c *cli.Context) string {
	for _, n := range deepSpeedOnlyFlags {
		if c.IsSet(n) {
			return StyleDeepSpeed
		}
	}
	for _, n := range torchrunOnlyFlags {
		if c.IsSet(n) {
			return StyleTorchrun
		}
	}
	return ""
}

const (
	StyleTorchrun    = "torchrun"
	StyleDeepSpeed   = "deepspeed"
	StyleTorchLaunch = "torch.distributed.launch"
)

// ParseLauncherStyle reads --as: the launcher a line was written for,
// named as the user typed it (deepspeed, torchrun,
// torch.distributed.launch, or python -m's torch.distributed.run).
func ParseLauncherStyle(s string) (string, error) {
	switch s {
	case StyleTorchrun, "torch.distributed.run":
		return StyleTorchrun, nil
	case StyleDeepSpeed, StyleTorchLaunch:
		return s, nil
	}
	return "", cmdutil.InputErrorf("--as %q: want torchrun, deepspeed or torch.distributed.launch (the launcher the line was written for)", s)
}
