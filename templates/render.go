// Package templates renders a plan into what runs: per-rank argv and
// environment (torchrun-compatible), Megatron-LM and DeepSpeed arguments,
// ds_config.json, DeepSpeed hostfiles, per-host NCCL settings and per-host
// launch scripts (the launch contract and its host script are templates/job).
// Nothing here connects to hosts.
package templates

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/deepspeed"

	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"

	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Options are the user's side of a job: what to run and how.
type Options struct {
	// Name is the job name (also TORCHELASTIC_RUN_ID); default "pipette".
	Name string
	// Role is ROLE_NAME (torchrun's --role); default "default".
	Role string
	// Script is the training script (or module with Module, or program
	// with NoPython); Args are its arguments, kept as given.
	Script string
	Args   []string
	// Python is the interpreter (default python3); scripts run as
	// `python -u script`, like torchrun.
	Python   string
	NoPython bool
	Module   bool
	// MasterAddr overrides the address of rank 0's host; MasterPort
	// defaults to 29500.
	MasterAddr  string
	MasterPort  int
	MaxRestarts int
	NCCLMode    fabric.Mode
	// WorkDir is where files land and ranks start on each host (default
	// the directory the launch script is started in).
	WorkDir string
	// LogDir, when set, receives one stdout and one stderr file per rank.
	LogDir string
	// StopGrace is the seconds the host scripts give ranks between SIGTERM
	// and SIGKILL (job.Job.StopGrace; 0: torchrun's 30).
	StopGrace int
	// HostDevices[i], when set, is cluster host i's CUDA_VISIBLE_DEVICES for
	// hosts whose GPUs are not described (DeepSpeed's --include slots).
	HostDevices []string
	// NoLocalRank leaves out the --local_rank=N argument DeepSpeed's
	// launcher adds (DeepSpeed's --no_local_rank, torch.distributed.launch's
	// --use_env): LOCAL_RANK is in the environment either way.
	NoLocalRank bool
	// TorchrunStyle: the line is torchrun's (its flags say so), and
	// torchrun passes no --local_rank=N: LOCAL_RANK is in the environment.
	TorchrunStyle bool
	// LocalRankArg: the line is DeepSpeed's launcher's or
	// torch.distributed.launch's, which pass --local_rank=N right after any
	// script (torch 2's launch spells it --local-rank; every script written
	// for it accepts --local_rank, as torch's docs tell them to).
	LocalRankArg bool
	// DSInScript: the script hands DeepSpeed its config itself (HF
	// Trainer's --deepspeed FILE, deepspeed.initialize(config=...)), so no
	// --deepspeed/--deepspeed_config is added and no config is written:
	// DeepSpeed refuses a config given both ways.
	DSInScript bool
	// DSUser is the user's own DeepSpeed config. DSPassThrough (launches
	// without planning) passes it byte for byte, only "auto" batch values
	// filled; otherwise the keys the plan needs are added to it, and
	// DSOverride lets the plan's values replace the user's
	// (dsPlanned). When the bytes stay the user's, the script
	// keeps its own --deepspeed_config path and no ds_config.json is written.
	DSUser                    *deepspeed.UserConfig
	DSPassThrough, DSOverride bool
	// NoScripts leaves every Hosts[i].Script empty, for a caller that
	// reads only the ranks: the dry run's look at the restart after each
	// host lost renders the job once per host, and the host scripts
	// (text/template) were half of its time.
	NoScripts bool
	// Unplanned: the job runs in torchrun's order on listed hosts (or this
	// machine) with the sizes the script's own arguments give, so the
	// script's Megatron and Megatron-DeepSpeed flags stand as written:
	// nothing the original launcher would not pass is added.
	Unplanned bool
	// FilesDir is the job's private directory for the files it generates
	// (Job.FilesDir); default DefaultFilesDir(NAME).
	FilesDir string
	// dsConfigPath is the config the ranks read (set by Render).
	dsConfigPath string
	// Rendezvous is what the launch probe found (nil for a dry run):
	// MASTER_ADDR and each host's interface towards it.
	Rendezvous *Rendezvous
	// NodeRankPinned: the user gave torchrun's --node-rank, so a master
	// address naming another host of the job is an error, not a warning.
	NodeRankPinned bool
	// Env is the environment pipette-launch runs in, KEY=VALUE: variables
	// with DeepSpeed's export prefixes (and CUDA_, TORCH_, HF_, WANDB_,
	// OMP_) are forwarded to every rank (env.go). ExplicitEnv (--env, env
	// files) beats them. Neither replaces a rank's identity; pipette-launch's
	// per-host fabric settings yield only to ExplicitEnv, with a warning.
	Env         []string
	ExplicitEnv []job.EnvVar
}

// Render turns a placed plan into a Job: per-rank environment and argv,
// per-host launch scripts, and the files the framework needs.
func Render(p *search.Plan, c *cluster.Cluster, o Options) (*job.Job, error) {
	if err := checkPlacement(p, c); err != nil {
		return nil, err
	}
	o = withDefaults(o)
	userEnv := envMap(o.Env)
	fp, err := decideFabric(c, p, o.NCCLMode, o, userEnv)
	if err != nil {
		return nil, err
	}
	master, masterWarnings, err := masterAddress(c, p, o)
	if err != nil {
		return nil, err
	}
	o.MasterAddr = master
	j := &job.Job{Name: o.Name, WorkDir: o.WorkDir, FilesDir: o.FilesDir, LogDir: o.LogDir, StopGrace: o.StopGrace, Warnings: append(fp.warnings, masterWarnings...)}
	megatronArgs := p.Framework == parallel.FrameworkMegatron ||
		(p.Framework == parallel.FrameworkDeepSpeed && megatron.LooksLike(o.Script, o.Args))
	numLayers, err := megatronLayers(o, megatronArgs)
	if err != nil {
		return nil, err
	}
	dsFile, err := deepSpeedConfigFile(j, p, &o)
	if err != nil {
		return nil, err
	}
	args, err := frameworkArgs(p, o, megatronArgs, numLayers)
	if err != nil {
		return nil, err
	}
	if split := deepSpeedSplit(p); split != "" {
		j.Warnings = append(j.Warnings, "the plan splits the layers "+split+" over its pipeline stages: DeepSpeed's PipelineModule has no partition_method for that, so "+
			path.Join(j.FilesDir, SiteDir, "sitecustomize.py")+" (first on PYTHONPATH) makes it take "+PipelineLayersEnv+" when deepspeed.runtime.pipe.module is imported")
	}
	byHost := ranksByHost(p)
	base := baseEnv(c, p, o, userEnv, len(byHost), megatronArgs)
	user := newUserEnv(userEnv, o.ExplicitEnv)
	if len(user.skipped) > 0 {
		j.Warnings = append(j.Warnings, strings.Join(user.skipped, ", ")+" from your environment is not forwarded: it describes this machine (pipette-launch sets it per rank where the hosts' GPUs are known; --env sets it)")
	}
	for nodeRank, hb := range byHost {
		hj, warnings, err := renderHost(c, p, o, fp, hb, nodeRank, len(byHost), base, args, user, numLayers)
		if err != nil {
			return nil, err
		}
		for _, w := range warnings {
			if !slices.Contains(j.Warnings, w) {
				j.Warnings = append(j.Warnings, w)
			}
		}
		j.Hosts = append(j.Hosts, hj)
	}
	if fp.comm != nil {
		j.Files = append(j.Files, commConfigFiles(c, fp.comm)...)
		j.Warnings = append(j.Warnings, "the job spans islands without a shared RDMA fabric: each Megatron group type gets its own NCCL network ("+
			fp.comm.Summary(c)+"; "+strings.Join(commConfigPaths(c, fp.comm, j.FilesDir), ", ")+"), and the world group uses sockets ("+path.Join(j.FilesDir, SiteDir, "sitecustomize.py")+")")
	}
	if usesSite(p, fp) {
		j.Files = append(j.Files, siteFiles(deepSpeedSplit(p) != "")...)
	}
	if p.Framework == parallel.FrameworkDeepSpeed {
		if dsFile != nil {
			j.Files = append(j.Files, *dsFile)
		}
		j.Files = append(j.Files, job.File{Path: HostfileName, Mode: 0o644, Content: Hostfile(j.Hosts)})
	}
	if o.NoScripts {
		return j, nil
	}
	for i := range j.Hosts {
		s, err := job.HostScript(j, i)
		if err != nil {
			return nil, err
		}
		j.Hosts[i].Script = s
	}
	return j, nil
}

// DefaultFilesDir is a job's directory for the files it generates: an
// absolute private directory of its own per job name (the name carries a
// random part), the same path on every host since the ranks' argv names
// it, and outside the launch directory, which a launch never changes.
func DefaultFilesDir(name string) string {
	return "/tmp/pipette-launch-" + text.SafeName(name)
}

// megatronLayers reads --num-layers from Megatron arguments and refuses
// arguments the placement cannot serve.
func megatronLayers(o Options, megatronArgs bool) (int, error) {
	if !megatronArgs {
		return 0, nil
	}
	layers, err := megatron.NumLayers(o.Args)
	if err != nil {
		return 0, fmt.Errorf("script arguments: %w", err)
	}
	if megatron.Parse(o.Args).Has("--use-tp-pp-dp-mapping") {
		// The placement puts Megatron's default groups on the intended
		// links; another order would scatter them.
		return 0, errors.New("--use-tp-pp-dp-mapping changes Megatron's rank order, but the plan places ranks for the default order tp-cp-ep-dp-pp: drop the flag")
	}
	return layers, nil
}

// baseEnv is the environment every rank of the job shares.
func baseEnv(c *cluster.Cluster, p *search.Plan, o Options, userEnv map[string]string, nodes int, megatronArgs bool) []job.EnvVar {
	masterAddr := o.MasterAddr
	if masterAddr == "" {
		h := c.Hosts[p.Placement[rank0(p)].HostIndex]
		masterAddr = cmp.Or(h.Address, h.Name)
	}
	world := strconv.Itoa(len(p.Placement))
	base := []job.EnvVar{
		{Name: "MASTER_ADDR", Value: masterAddr},
		{Name: "MASTER_PORT", Value: strconv.Itoa(o.MasterPort)},
		{Name: "WORLD_SIZE", Value: world},
		{Name: "ROLE_NAME", Value: o.Role},
		{Name: "ROLE_WORLD_SIZE", Value: world},
		{Name: "GROUP_WORLD_SIZE", Value: strconv.Itoa(nodes)},
		{Name: "TORCHELASTIC_RUN_ID", Value: o.Name},
		{Name: "TORCHELASTIC_RESTART_COUNT", Value: "0"},
		{Name: "TORCHELASTIC_MAX_RESTARTS", Value: strconv.Itoa(o.MaxRestarts)},
		{Name: "TORCH_NCCL_ASYNC_ERROR_HANDLING", Value: cmp.Or(userEnv["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1")},
	}
	if megatronArgs && (p.TP > 1 || p.CP > 1) {
		base = append(base, job.EnvVar{Name: "CUDA_DEVICE_MAX_CONNECTIONS", Value: "1"})
	}
	if split := deepSpeedSplit(p); split != "" {
		base = append(base, job.EnvVar{Name: PipelineLayersEnv, Value: split})
	}
	return base
}

// PipelineLayersEnv carries a DeepSpeed plan's uneven layer split to the
// ranks: decoder layers per pipeline stage, first to last ("5,5,5,9").
// DeepSpeed v0.14.4's PipelineModule has no partition_method with explicit
// boundaries and Megatron-DeepSpeed hard-codes "type:transformer", so the
// job's sitecustomize.py applies it with site/pipette_ds_partition.py.
const PipelineLayersEnv = "PIPETTE_PIPELINE_LAYERS"

// usesSite says whether the ranks get SiteDir first on PYTHONPATH: for the
// world group's NCCL network, or for a DeepSpeed plan's uneven split.
func usesSite(p *search.Plan, fp fabricPlan) bool {
	return fp.comm != nil || deepSpeedSplit(p) != ""
}

// deepSpeedSplit is a DeepSpeed pipeline plan's layer split when it is
// uneven (an even one is what DeepSpeed's own "type:transformer" gives),
// else "".
func deepSpeedSplit(p *search.Plan) string {
	if p.Framework != parallel.FrameworkDeepSpeed || p.PP < 2 || len(p.StageLayers) != p.PP || allEqual(p.StageLayers) {
		return ""
	}
	s := make([]string, len(p.StageLayers))
	for i, n := range p.StageLayers {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func withDefaults(o Options) Options {
	if o.Name == "" {
		o.Name = "pipette"
	}
	if o.Role == "" {
		o.Role = "default"
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.MasterPort == 0 {
		o.MasterPort = 29500
	}
	if o.NCCLMode == "" {
		o.NCCLMode = fabric.ModeAuto
	}
	if o.FilesDir == "" {
		o.FilesDir = DefaultFilesDir(o.Name)
	}
	return o
}

// hostRanks is one host's ranks in local-rank order.
type hostRanks struct {
	host  int
	ranks []search.RankPlacement
}

// ranksByHost groups the placement by host; node ranks follow the lowest
// global rank on each host so rank 0's host is node 0 (MASTER_ADDR).
func ranksByHost(p *search.Plan) []hostRanks {
	idx := map[int]int{}
	var out []hostRanks
	ordered := make([]search.RankPlacement, len(p.Placement))
	for _, r := range p.Placement {
		ordered[r.Rank] = r
	}
	for _, r := range ordered {
		i, ok := idx[r.HostIndex]
		if !ok {
			i = len(out)
			idx[r.HostIndex] = i
			out = append(out, hostRanks{host: r.HostIndex})
		}
		out[i].ranks = append(out[i].ranks, r)
	}
	for _, h := range out {
		rs := h.ranks
		for a := 1; a < len(rs); a++ {
			for b := a; b > 0 && rs[b].LocalRank < rs[b-1].LocalRank; b-- {
				rs[b], rs[b-1] = rs[b-1], rs[b]
			}
		}
	}
	return out
}

func rank0(p *search.Plan) int {
	for i, r := range p.Placement {
		if r.Rank == 0 {
			return i
		}
	}
	return 0
}

// checkPlacement rejects placements the environment cannot express: every
// rank exactly once, local ranks 0..n-1 per host, a GPU used once.
func checkPlacement(p *search.Plan, c *cluster.Cluster) error {
	n := len(p.Placement)
	if n == 0 {
		return errors.New("plan has no placement")
	}
	if w := p.WorldSize(); w != n {
		return fmt.Errorf("plan places %d ranks but TP*PP*DP*CP = %d", n, w)
	}
	seen := make([]bool, n)
	local := map[int]map[int]bool{}
	gpus := map[[2]int]bool{}
	for _, r := range p.Placement {
		if r.Rank < 0 || r.Rank >= n || seen[r.Rank] {
			return fmt.Errorf("placement: rank %d missing, repeated or out of range", r.Rank)
		}
		seen[r.Rank] = true
		if r.HostIndex < 0 || r.HostIndex >= len(c.Hosts) {
			return fmt.Errorf("placement: rank %d on host index %d, cluster has %d hosts", r.Rank, r.HostIndex, len(c.Hosts))
		}
		h := c.Hosts[r.HostIndex]
		if r.GPU < 0 || (h.GPUs > 0 && r.GPU >= h.GPUs) {
			return fmt.Errorf("placement: rank %d on GPU %d of %s, which has %d", r.Rank, r.GPU, h.Name, h.GPUs)
		}
		if gpus[[2]int{r.HostIndex, r.GPU}] {
			return fmt.Errorf("placement: GPU %d of %s holds two ranks", r.GPU, h.Name)
		}
		gpus[[2]int{r.HostIndex, r.GPU}] = true
		if local[r.HostIndex] == nil {
			local[r.HostIndex] = map[int]bool{}
		}
		local[r.HostIndex][r.LocalRank] = true
	}
	for hi, lr := range local {
		for i := range len(lr) {
			if !lr[i] {
				return fmt.Errorf("placement: local ranks on %s are not 0..%d", c.Hosts[hi].Name, len(lr)-1)
			}
		}
	}
	return nil
}

// frameworkArgs returns the script arguments every rank gets (before any
// per-host additions).
func frameworkArgs(p *search.Plan, o Options, megatronArgs bool, numLayers int) ([]string, error) {
	switch p.Framework {
	case parallel.FrameworkMegatron:
		if o.Unplanned {
			return o.Args, megatron.CheckArgs(o.Args, len(p.Placement))
		}
		planned, err := MegatronPlanArgs(p.Config, numLayers)
		if err != nil {
			return nil, err
		}
		merged, err := MergeMegatronArgs(o.Args, planned)
		if err != nil {
			return nil, err
		}
		return merged, megatron.CheckArgs(merged, len(p.Placement))
	case parallel.FrameworkDeepSpeed:
		if o.DSInScript {
			return o.Args, nil
		}
		// Without planning the script's own DeepSpeed flags stand: only the
		// config it lacks is added.
		mds := megatronArgs && !o.Unplanned
		user, err := withDeepSpeedArgs(o.Args, deepspeedArgs(p.Config, mds, o.dsConfigPath), mds)
		if err != nil {
			return nil, err
		}
		if megatronArgs && o.Unplanned {
			return user, megatron.CheckDeepSpeedArgs(user, len(p.Placement))
		}
		if !megatronArgs {
			if p.TP > 1 || p.PP > 1 || p.CP > 1 {
				return nil, fmt.Errorf("the plan uses TP %d PP %d CP %d, which a plain DeepSpeed script (%s) cannot apply; pass Megatron-DeepSpeed arguments or plan with --framework deepspeed for data parallelism only", p.TP, p.PP, max(p.CP, 1), o.Script)
			}
			return user, nil
		}
		planned, err := megatronDeepSpeedPlanArgs(p.Config)
		if err != nil {
			return nil, err
		}
		merged, err := MergeMegatronArgs(user, planned)
		if err != nil {
			return nil, err
		}
		return merged, megatron.CheckDeepSpeedArgs(merged, len(p.Placement))
	case parallel.FrameworkTorch, "":
		return o.Args, nil
	}
	return nil, fmt.Errorf("unknown framework %q", p.Framework)
}

// megatronDeepSpeedPlanArgs are the Megatron flags Megatron-DeepSpeed
// understands: it has no distributed optimizer, interleaving, layout or
// Megatron CPU offload (ZeRO and ds_config.json take those roles).
func megatronDeepSpeedPlanArgs(cfg parallel.Config) ([]string, error) {
	if max(cfg.VPP, 1) > 1 {
		return nil, errors.New("DeepSpeed has no interleaved pipeline schedule: the plan's virtual stages cannot be rendered")
	}
	if cfg.CP > 1 && !cfg.Ulysses {
		return nil, errors.New("context parallelism is not rendered for Megatron-DeepSpeed")
	}
	c := cfg
	c.DistributedOptimizer, c.Offload, c.StageLayers = false, parallel.Offload{}, nil
	// DeepSpeed's MoE layer takes its expert parallelism from
	// --moe-expert-parallel-size (its ETP follows
	// --enable-expert-tensor-parallelism, which the plan keeps as the
	// script has it); Megatron-Core's flags do not exist there.
	c.EP, c.ETP = 0, 0
	// The layer split is not a Megatron flag here (Megatron-DeepSpeed has
	// none; PipelineModule partitions): an uneven one travels in
	// PipelineLayersEnv, so no layer count (0) is checked against PP.
	a, err := MegatronPlanArgs(c, 0)
	if err != nil {
		return nil, err
	}
	// Megatron-DeepSpeed predates these flags; argparse would reject them.
	a = megatron.Parse(a).Without(map[string]bool{"--overlap-grad-reduce": true, "--context-parallel-size": true})
	if cfg.Ulysses {
		a = append(a, megatron.UlyssesFlag, strconv.Itoa(max(cfg.CP, 1)))
	}
	if cfg.EP > 0 {
		ep, _ := cfg.ExpertParallel()
		a = append(a, megatron.DSExpertParallelFlag, strconv.Itoa(ep))
	}
	return a, nil
}

// renderHost builds one host's ranks.
func renderHost(c *cluster.Cluster, p *search.Plan, o Options, fp fabricPlan, hb hostRanks,
	nodeRank, nodes int, base []job.EnvVar, args []string, user userEnv, numLayers int) (job.HostJob, []string, error) {
	h := c.Hosts[hb.host]
	hj := job.HostJob{Name: h.Name, Address: h.Address, User: h.User, Port: h.Port, NodeRank: nodeRank}
	if hj.Address == "" {
		hj.Address = h.Name
	}
	nccl, warnings, err := hostNCCLEnv(c, hb.host, fp)
	if err != nil {
		return hj, nil, err
	}
	nccl = withRendezvousIfname(nccl, o.Rendezvous, hb.host)
	perHost := map[string]bool{}
	for _, e := range nccl {
		perHost[e.Name] = true
	}
	hostArgs := args
	if fp.comm != nil {
		hostArgs = append(slices.Clone(args), "--nccl-communicator-config-path", path.Join(o.FilesDir, CommConfigPath(c.Islands[h.Island].Spec.Name)))
		nccl = append(nccl, job.EnvVar{Name: "PIPETTE_NCCL_WORLD_NET", Value: NetSocket})
		perHost["PIPETTE_NCCL_WORLD_NET"] = true
	}
	if fp.perGroup {
		ha, err := holmesArgs(c, p, hb.host, numLayers)
		if err != nil {
			return hj, nil, err
		}
		hostArgs = append(append([]string(nil), args...), ha...)
	}
	visible := make([]string, len(hb.ranks))
	for i, r := range hb.ranks {
		visible[i] = strconv.Itoa(r.GPU)
	}
	local := len(hb.ranks)
	for _, r := range hb.ranks {
		env := append([]job.EnvVar(nil), base...)
		env = append(env, nccl...)
		env = append(env,
			job.EnvVar{Name: "RANK", Value: strconv.Itoa(r.Rank)},
			job.EnvVar{Name: "LOCAL_RANK", Value: strconv.Itoa(r.LocalRank)},
			job.EnvVar{Name: "LOCAL_WORLD_SIZE", Value: strconv.Itoa(local)},
			job.EnvVar{Name: "GROUP_RANK", Value: strconv.Itoa(nodeRank)},
			job.EnvVar{Name: "ROLE_RANK", Value: strconv.Itoa(r.Rank)},
		)
		if gpusKnown(h) {
			// Every rank sees its host's GPUs in local-rank order, so device
			// LOCAL_RANK (Megatron's set_device) is the GPU the plan chose,
			// while peers stay visible for CUDA IPC. nvidia-smi's indices
			// follow PCI bus order; CUDA's default (fastest first) can differ.
			env = append(env, job.EnvVar{Name: "CUDA_VISIBLE_DEVICES", Value: strings.Join(visible, ",")},
				job.EnvVar{Name: "CUDA_DEVICE_ORDER", Value: "PCI_BUS_ID"})
		} else if hb.host < len(o.HostDevices) && o.HostDevices[hb.host] != "" {
			env = append(env, job.EnvVar{Name: "CUDA_VISIBLE_DEVICES", Value: o.HostDevices[hb.host]})
		}
		if p.Framework == parallel.FrameworkDeepSpeed {
			env = append(env, job.EnvVar{Name: "LOCAL_SIZE", Value: strconv.Itoa(local)},
				job.EnvVar{Name: "CROSS_RANK", Value: strconv.Itoa(nodeRank)}, job.EnvVar{Name: "CROSS_SIZE", Value: strconv.Itoa(nodes)})
		}
		if local > 1 {
			env = append(env, job.EnvVar{Name: "OMP_NUM_THREADS", Value: "1"})
		}
		var uw []string
		env, uw = user.apply(env, perHost)
		if usesSite(p, fp) {
			env = withSiteDir(env, path.Join(o.FilesDir, SiteDir))
		}
		for _, w := range uw {
			if !slices.Contains(warnings, w) {
				warnings = append(warnings, w)
			}
		}
		sortEnv(env)
		hj.Ranks = append(hj.Ranks, job.RankJob{Rank: r.Rank, LocalRank: r.LocalRank, Env: env, Argv: rankArgv(o, p.Framework, r.LocalRank, hostArgs)})
	}
	return hj, warnings, nil
}

// gpusKnown reports whether the host's GPUs were described (probed or
// written in a cluster file). Hosts given only by name (--hosts) keep
// whatever CUDA_VISIBLE_DEVICES they have, as with torchrun.
func gpusKnown(h cluster.Host) bool { return h.GPU.Model != "" }

// rankArgv is the program line of one rank, as torchrun (or DeepSpeed's
// launch.py, which puts --local_rank right after the script) builds it.
func rankArgv(o Options, f parallel.Framework, localRank int, args []string) []string {
	var argv []string
	switch {
	case o.NoPython:
		argv = []string{o.Script}
	case o.Module:
		argv = []string{o.Python, "-u", "-m", o.Script}
	default:
		argv = []string{o.Python, "-u", o.Script}
	}
	if ((f == parallel.FrameworkDeepSpeed && !o.TorchrunStyle) || o.LocalRankArg) && !o.NoLocalRank {
		argv = append(argv, "--local_rank="+strconv.Itoa(localRank))
	}
	return append(argv, args...)
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && job.ValidEnvName(k) {
			m[k] = v
		}
	}
	return m
}

// deepSpeedConfigFile decides the config the ranks read: the user's own
// file when its bytes stand (nil File), else ds_config.json (the plan's,
// or the user's with the plan's needs added). It sets o.dsConfigPath and
// adds what changed to the job's warnings.
func deepSpeedConfigFile(j *job.Job, p *search.Plan, o *Options) (*job.File, error) {
	if p.Framework != parallel.FrameworkDeepSpeed {
		return nil, nil
	}
	o.dsConfigPath = j.FilePath(job.File{Path: DSConfigFile})
	u := o.DSUser
	if o.DSInScript {
		// The script's own config reaches DeepSpeed as the script passes it.
		if u != nil {
			o.dsConfigPath = u.Path
		}
		return nil, nil
	}
	if u == nil {
		data, err := MarshalDSConfig(DeepSpeedConfig(p.Config, megatron.Parse(o.Args).Has("--fp16") || p.Precision == gpu.PrecisionFP16))
		if err != nil {
			return nil, err
		}
		if err := CheckDSConfig(data, p.DP, p.PP); err != nil {
			return nil, fmt.Errorf("rendered %w", err)
		}
		return &job.File{Path: DSConfigFile, Mode: 0o644, Content: data}, nil
	}
	var data []byte
	if o.DSPassThrough {
		data = dsFillAuto(u, p.Config)
	} else {
		var added, changed []deepspeed.Change
		data, added, changed = dsPlanned(u, p.Config, o.DSOverride)
		if len(added) > 0 {
			var kv []string
			for _, c := range added {
				kv = append(kv, c.Key+"="+jsonText(c.Plan))
			}
			j.Warnings = append(j.Warnings, fmt.Sprintf("%s %s leaves unset what the plan needs; ds_config.json adds %s", u.Flag, u.Path, strings.Join(kv, ", ")))
		}
		if len(changed) > 0 {
			j.Warnings = append(j.Warnings, "the plan overrides your DeepSpeed config:\n"+strings.TrimSuffix(DSConfigDiff(u.Path, changed), "\n"))
		}
	}
	if set := u.Settings(); !enabled(set, "bf16") && !enabled(set, "fp16") && !enabled(set, "bfloat16") {
		j.Warnings = append(j.Warnings, fmt.Sprintf("%s %s enables neither bf16 nor fp16, so DeepSpeed trains in fp32; the plan's memory and time assume 16-bit mixed precision", u.Flag, u.Path))
	}
	if left := dsLeftAuto(u); len(left) > 0 {
		j.Warnings = append(j.Warnings, fmt.Sprintf("%s %s keeps \"auto\" in %s: HuggingFace's Trainer fills them, plain DeepSpeed rejects them", u.Flag, u.Path, strings.Join(left, ", ")))
	}
	if err := checkDSSettings(data, p.PP); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.Flag, u.Path, err)
	}
	if bytes.Equal(data, u.Data) {
		o.dsConfigPath = u.Path
		return nil, nil
	}
	return &job.File{Path: DSConfigFile, Mode: 0o644, Content: data}, nil
}

// withSiteDir puts the world-group shim's directory (in the job's files
// directory) first on the rank's PYTHONPATH, ahead of any PYTHONPATH the
// user forwards or sets with --env.
func withSiteDir(env []job.EnvVar, dir string) []job.EnvVar {
	for i, e := range env {
		if e.Name == "PYTHONPATH" {
			if e.Value != dir && !strings.HasPrefix(e.Value, dir+":") {
				env[i].Value = dir + ":" + e.Value
			}
			return env
		}
	}
	return append(env, job.EnvVar{Name: "PYTHONPATH", Value: dir})
}
