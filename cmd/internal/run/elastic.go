package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/launcher/elastic"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// plannedCluster names the cluster type where Run's variable `cluster`
// hides the package.
type plannedCluster = cluster.Cluster

// elasticRun is what an elastic job's attempts share: the --nnodes range,
// the framework and NCCL mode, and how a choice is rendered.
type elasticRun struct {
	nodes  launchline.Nodes
	fw     parallel.Framework
	mode   fabric.Mode
	render func(ch *PlanChoice, c *plannedCluster, facts *launchFacts) (*job.Job, error)
	// k8s, when set, runs each attempt as a JobSet of its own
	// (run_k8s_elastic.go): hosts checked through the API, not probed.
	k8s *k8sAttempts
}

// legacy: a Megatron-LM job whose checkpoint keeps TP and PP.
func (er elasticRun) legacy(args []string) bool {
	return er.fw == parallel.FrameworkMegatron && megatron.LegacyCheckpoint(args)
}

// runElastic runs an elastic job (--nnodes MIN:MAX, DeepSpeed's
// --elastic_training) with launcher/elastic's loop: each attempt plans
// again on its hosts (planner.Choose on that subset, keeping the global
// batch; torchrun's order, the same ranks per host, for listed hosts),
// probes them (the health check: a host that fails it is left out) and
// renders; the job resumes through its own arguments.
func runElastic(ctx context.Context, opts *Options, er elasticRun) error {
	hosts, targets, err := elasticHosts(opts, er)
	if err != nil {
		return err
	}
	for _, w := range resumeWarnings(er.fw, opts.ScriptArgs) {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s\n", w)
	}
	for _, n := range opts.Notes {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: %s\n", n)
	}
	fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: elastic job: %d to %d of %d hosts, up to %d restarts\n", er.nodes.Min, min(er.nodes.Max, len(hosts)), len(hosts), opts.MaxRestarts)
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("launch directory: %w (give --workdir)", err)
	}
	var first *job.Job // the first attempt's: a legacy checkpoint keeps its TP and PP
	firstDP := 0       // its data-parallel size: a DeepSpeed ZeRO checkpoint keeps it
	savedDP := 0       // the last attempt's data-parallel size: its DeepSpeed checkpoint's
	var cur *Options   // the running attempt's options (its probe's pool)
	// What the running attempt's hosts' health checks ask: rank 0's
	// address (the route the job's traffic takes) and each host's needs.
	var master string
	var needs map[string]launchprobe.Needs
	var curCluster *plannedCluster
	closeCur := func() {
		if cur != nil && cur.pool != nil {
			cur.pool.Close()
		}
	}
	defer closeCur()
	ahead := aheadPlans{done: opts.aheadDone} // the plans after each single loss, made while the first attempt runs
	defer ahead.close()
	prepare := func(ctx context.Context, hs []string) (*elastic.Prepared, error) {
		var (
			o   *Options
			c   *plannedCluster
			ch  *PlanChoice
			err error
		)
		if lp := ahead.take(hs); lp != nil {
			o, c, ch = lp.o, lp.c, lp.ch
			fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: the plan after losing %s was made ahead, while the first attempt ran: no new search\n", lp.lost)
		} else if o, c, ch, err = planOn(opts, er, first, firstDP, hs); err != nil {
			return nil, err
		}
		if err := reloadsAt(ch, savedDP); err != nil {
			return nil, err
		}
		facts := &launchFacts{python: o.Python}
		if er.k8s != nil {
			err = er.k8s.checkHosts(ctx, hs)
		} else {
			facts, err = probeForLaunch(ctx, o, c, ch.Plan)
		}
		if err != nil {
			return nil, err
		}
		j, err := er.render(ch, c, facts)
		if err != nil {
			if o.pool != nil {
				o.pool.Close()
			}
			return nil, err
		}
		if er.k8s == nil {
			j.WorkDir = cmp.Or(j.WorkDir, wd) // torchrun's: where pipette-launch runs
		}
		for _, w := range append(facts.warnings, j.Warnings...) {
			fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s\n", w)
		}
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: %s\n", ch.Summary)
		if first == nil {
			first, firstDP = j, ch.Plan.DP
			if err := WriteRunPlan(o, ch.Plan); err != nil {
				return nil, err
			}
			ahead.start(opts, er, hosts, first, firstDP)
		}
		closeCur()
		cur, curCluster, savedDP, needs = o, c, ch.Plan.DP, healthNeeds(o, c, ch.Plan)
		if facts.rendezvous != nil {
			master = facts.rendezvous.Addr
		}
		return &elastic.Prepared{Job: j, Layout: ch.Summary + dsBatch(ch)}, nil
	}
	// The job's output, read for its iteration lines on the way (the
	// summary's first step and steps redone of each restart).
	steps := elastic.NewStepWatch(opts.IO.Out)
	run := func(ctx context.Context, j *job.Job, restart, attempt int) error {
		if opts.Launch != nil {
			return opts.Launch(ctx, j, cur)
		}
		if er.k8s != nil {
			return er.k8s.launch(ctx, j, curCluster, restart, attempt, steps)
		}
		lo := launchOptions(cur)
		lo.Out, lo.Restart, lo.Attempt, lo.NoRestarts = steps, restart, attempt, true
		return launch.Launch(ctx, *j, lo)
	}
	// A host's check: a new SSH connection (reaching the host is its first
	// step; the launch probe's pool would leave a session standing by for
	// a job) that runs the launch probe's health check there; on this
	// machine, the same check without SSH.
	check := func(ctx context.Context, host string) error {
		if er.k8s != nil {
			return er.k8s.check(ctx, host) // its node, through the API
		}
		if opts.slurm != nil {
			// Slurm's node: Slurm says whether it still runs this job.
			failed, err := launch.SlurmFailedNodes(ctx, *opts.slurm, []string{host})
			if err != nil {
				return err
			}
			if why := failed[host]; why != "" {
				return errors.New(why)
			}
			return nil
		}
		if cur != nil && cur.local {
			// This machine: the same check, run here.
			return launchprobe.CheckLocal(ctx, needs[host])
		}
		c, err := remote.Dial(ctx, targets[host], opts.SSH)
		if err != nil {
			return err
		}
		defer c.Close()
		return launchprobe.CheckHost(ctx, c, master, needs[host])
	}
	// The background probe of a host left out while the job runs below
	// MAX: the same check, where one can be made (not from outside a
	// Slurm job step, nor for this machine).
	probe := func(ctx context.Context, host string) error {
		if cur != nil && (cur.local || cur.slurm != nil) {
			return fmt.Errorf("%s: not probed while the job runs (this machine, or a node of the Slurm allocation): it rejoins at a restart a failure causes", host)
		}
		return check(ctx, host)
	}
	sum, err := elastic.Run(ctx, elastic.Options{Name: opts.RunID, Hosts: hosts, Min: er.nodes.Min, Max: er.nodes.Max,
		MaxRestarts: opts.MaxRestarts, Prepare: prepare, Launch: run, Check: check, Probe: probe, RejoinInterval: opts.RejoinInterval, ProgressTimeout: opts.ProgressTimeout,
		Steps: steps, Out: opts.IO.ErrOut})
	if err == nil {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: %s\n", sum)
	}
	return err
}

// reloadsAt refuses a DeepSpeed restart at a data-parallel size its
// checkpoint, saved at savedDP (0: none yet), cannot be loaded at by
// DeepSpeed v0.14.4 (deepspeed.UserConfig.CheckReload: ZeRO and bf16
// checkpoints load only at the size that saved them, universal ones at
// any). The job stops saying why rather than restarting into DeepSpeed's
// ZeRORuntimeException.
func reloadsAt(ch *PlanChoice, savedDP int) error {
	if ch.DS == nil || savedDP == 0 {
		return nil
	}
	return ch.DS.CheckReload(savedDP, ch.Plan.DP)
}

// dsBatch is the batch DeepSpeed derives from the user's config at the
// plan's data-parallel size (with an elasticity section, its
// compute_elastic_config's), for an attempt's layout line; a planned job's
// summary with an elasticity section says it already.
func dsBatch(ch *PlanChoice) string {
	if ch.DS == nil {
		return ""
	}
	note := ch.DS.BatchNote(ch.Plan.DP)
	if strings.Contains(ch.Summary, note) {
		return ""
	}
	return note
}

// elasticHosts are every host the job may use, in the order it takes them
// (--nnodes' MAX caps each attempt, not this list), and how to reach each.
func elasticHosts(opts *Options, er elasticRun) ([]string, map[string]remote.HostTarget, error) {
	all := *opts
	all.NNodes = ""
	c, _, err := LoadCluster(&all, er.mode.TransportFor(er.fw))
	if err != nil {
		return nil, nil, err
	}
	var names []string
	targets := map[string]remote.HostTarget{}
	for _, h := range c.Hosts {
		names = append(names, h.Name)
		targets[h.Name] = remote.HostTarget{Name: h.Name, Addr: cmp.Or(h.Address, h.Name), User: h.User, Port: h.Port}
	}
	return names, targets, nil
}

// resumeWarnings warn an elastic Megatron-LM or DeepSpeed job that names
// no checkpoint to resume from: pipette-launch adds no checkpointing of its
// own, so each restart would begin at step 0.
func resumeWarnings(fw parallel.Framework, args []string) []string {
	switch fw {
	case parallel.FrameworkMegatron:
		if !megatron.Resumes(args) {
			return []string{"elastic job without --load or --save: a restart begins at step 0 (Megatron-LM resumes from --load, where --save wrote)"}
		}
	case parallel.FrameworkDeepSpeed:
		for _, a := range args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			name = strings.ToLower(name)
			if strings.HasPrefix(a, "-") && (strings.Contains(name, "load") || strings.Contains(name, "save") || strings.Contains(name, "checkpoint") || strings.Contains(name, "resume") || strings.Contains(name, "ckpt") || name == "output_dir") {
				return nil
			}
		}
		return []string{"elastic job whose arguments name no checkpoint (no load, save, checkpoint, resume or output_dir flag): a restart begins at step 0 unless the script resumes by itself"}
	}
	return nil
}

// lossView is one loss an elastic job's dry run looks ahead to: a host of
// the first attempt lost alone, and the plan the job would restart with on
// the hosts left (the next listed host joins when MAX left one out), or
// why it would stop instead.
type lossView struct {
	Lost                      string   `json:"lost"`
	RestartsOn                []string `json:"restarts_on,omitempty"`
	Summary                   string   `json:"summary,omitempty"`
	PredictedIterationSeconds float64  `json:"predicted_iteration_seconds,omitempty"`
	// Changes are rank 0's world size and script flags that change.
	Changes []string `json:"changes,omitempty"`
	Stops   string   `json:"stops,omitempty"`
}

// lossViews looks ahead from the first attempt (first, whose plan has
// data-parallel size firstDP) to each single loss, planning each as the
// restart would (planLoss; a DeepSpeed checkpoint's reload rule included).
func lossViews(opts *Options, er elasticRun, first *job.Job, firstDP int) ([]lossView, error) {
	all, _, err := elasticHosts(opts, er)
	if err != nil {
		return nil, err
	}
	var out []lossView
	for _, h := range first.Hosts {
		lp := planLoss(opts, er, all, first, firstDP, h.Name)
		if lp.o != nil && lp.err == nil {
			lp.err = reloadsAt(lp.ch, firstDP)
		}
		v := lossView{Lost: h.Name}
		switch {
		case lp.o == nil:
			v.Stops = fmt.Sprintf("%d hosts left, fewer than MIN %d: the job stops", len(lp.left), er.nodes.Min)
		case lp.err != nil:
			v.Stops = fmt.Sprintf("no plan on %s: %v", strings.Join(lp.left, " "), lp.err)
		default:
			j, err := er.render(lp.ch, lp.c, &launchFacts{python: opts.Python})
			if err != nil {
				v.Stops = err.Error()
				break
			}
			v.RestartsOn, v.Summary, v.Changes = lp.left, lp.ch.Summary+dsBatch(lp.ch), rankZeroChanges(first, j)
			if lp.ch.Plan != nil {
				v.PredictedIterationSeconds = lp.ch.Plan.Predicted.IterationSeconds
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// describeLosses is --dry-run's look ahead for an elastic job (lossViews)
// as comment lines after the job.
func describeLosses(opts *Options, er elasticRun, first *job.Job, firstDP int) error {
	views, err := lossViews(opts, er, first, firstDP)
	if err != nil {
		return err
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "\n# elastic (--nnodes %s, --max-restarts %d): the plan after losing one host\n", opts.NNodes, opts.MaxRestarts)
	for _, v := range views {
		if v.Stops != "" {
			fmt.Fprintf(w, "# %s lost: %s\n", v.Lost, v.Stops)
			continue
		}
		fmt.Fprintf(w, "# %s lost: restarts on %s: %s\n", v.Lost, strings.Join(v.RestartsOn, " "), v.Summary)
		if len(v.Changes) > 0 {
			fmt.Fprintf(w, "#   changes: %s\n", strings.Join(v.Changes, ", "))
		}
	}
	return nil
}

// rankZeroChanges lists what differs between two jobs' rank 0: the world
// size and the script's flags whose values change (or appear, or go).
func rankZeroChanges(a, b *job.Job) []string {
	ra, rb := rankZero(a), rankZero(b)
	if ra == nil || rb == nil {
		return nil
	}
	var out []string
	env := func(r *job.RankJob, name string) string {
		for _, e := range r.Env {
			if e.Name == name {
				return e.Value
			}
		}
		return ""
	}
	if x, y := env(ra, "WORLD_SIZE"), env(rb, "WORLD_SIZE"); x != y {
		out = append(out, "WORLD_SIZE "+x+" -> "+y)
	}
	return append(out, megatron.Changes(ra.Argv, rb.Argv)...)
}

func rankZero(j *job.Job) *job.RankJob {
	for i := range j.Hosts {
		for k := range j.Hosts[i].Ranks {
			if j.Hosts[i].Ranks[k].Rank == 0 {
				return &j.Hosts[i].Ranks[k]
			}
		}
	}
	return nil
}
