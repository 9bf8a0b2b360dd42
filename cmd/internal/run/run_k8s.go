package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/launcher/elastic"
	"github.com/pipette-launch/pipette-launch/launcher/kubernetes"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
	"github.com/urfave/cli/v2"
)

// K8sOptions are run's Kubernetes flags (--launcher k8s, docs/kubernetes.md).
type K8sOptions struct {
	// Flags are the rendering options given as flags; ConfigFile
	// (--k8s-config) gives the same as YAML, the flags winning.
	Flags        k8s.Options
	ConfigFile   string
	PodPatchFile string
	Labels       []string
	Kubectl      kubernetes.Kubectl
}

// k8sFlags are the flags --launcher k8s reads.
func k8sFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "k8s-image", Usage: "with --launcher k8s: the image every pod runs (holds the script and its Python)"},
		&cli.StringFlag{Name: "k8s-namespace", Usage: "with --launcher k8s: namespace (default: default)"},
		&cli.StringFlag{Name: "k8s-name", Usage: "with --launcher k8s: JobSet name (default: --run-id)"},
		&cli.StringFlag{Name: "k8s-format", Usage: "with --launcher k8s: jobset (default) or trainjob (Kubeflow Trainer v2; one island, --dry-run/--output-dir only)"},
		&cli.StringFlag{Name: "k8s-service-account", Usage: "with --launcher k8s: the pods' service account"},
		&cli.StringFlag{Name: "k8s-priority-class", Usage: "with --launcher k8s: the pods' priority class"},
		&cli.StringFlag{Name: "k8s-queue", Usage: "with --launcher k8s: Kueue local queue (label kueue.x-k8s.io/queue-name)"},
		&cli.StringFlag{Name: "k8s-scheduler", Usage: "with --launcher k8s: the pods' scheduler (e.g. volcano)"},
		&cli.StringSliceFlag{Name: "k8s-label", Usage: "with --launcher k8s: KEY=VALUE label on every object (repeatable)"},
		&cli.StringFlag{Name: "k8s-affinity", Usage: "with --launcher k8s: node-names (default: the cluster file's hosts are node names), gpu-product (nvidia.com/gpu.product) or none"},
		&cli.StringFlag{Name: "k8s-pod-patch", Usage: "with --launcher k8s: YAML `FILE` with pod spec fields merged over every pod (tolerations, volumes, ...)"},
		&cli.StringFlag{Name: "k8s-config", Usage: "with --launcher k8s: YAML `FILE` with the same settings (image, namespace, podPatch, ...); flags win"},
		&cli.StringFlag{Name: "kubeconfig", EnvVars: []string{"KUBECONFIG"}, Usage: "with --launcher k8s: kubeconfig kubectl uses"},
		&cli.StringFlag{Name: "kube-context", Usage: "with --launcher k8s: kubeconfig context"},
		&cli.StringFlag{Name: "kubectl", Value: "kubectl", Usage: "with --launcher k8s: the kubectl to run"},
	}
}

func k8sOptionsFromCLI(c *cli.Context) K8sOptions {
	return K8sOptions{
		Flags: k8s.Options{Image: c.String("k8s-image"), Namespace: c.String("k8s-namespace"), Name: c.String("k8s-name"),
			Format: k8s.Format(c.String("k8s-format")), ServiceAccount: c.String("k8s-service-account"),
			PriorityClass: c.String("k8s-priority-class"), Queue: c.String("k8s-queue"), SchedulerName: c.String("k8s-scheduler"),
			Affinity: k8s.Affinity(c.String("k8s-affinity"))},
		ConfigFile:   c.String("k8s-config"),
		PodPatchFile: c.String("k8s-pod-patch"),
		Labels:       c.StringSlice("k8s-label"),
		Kubectl:      kubernetes.Kubectl{Path: c.String("kubectl"), Kubeconfig: c.String("kubeconfig"), Context: c.String("kube-context")},
	}
}

// onKubernetes reports whether --launcher picks Kubernetes.
func onKubernetes(o *Options) bool {
	which, err := cmdutil.ChooseLauncher(o.Launcher, func(string) string { return "" })
	return err == nil && which == cmdutil.LauncherK8s
}

// runKubernetes renders the job as manifests, then prints them
// (--dry-run), writes them (--output-dir) or applies and supervises them;
// an elastic line (--nnodes MIN:MAX) runs its attempts as JobSets
// (runElastic, each a JobSet of its own: k8sAttempts). er is how the job
// is re-planned and rendered.
func runKubernetes(ctx context.Context, opts *Options, c *cluster.Cluster, j *job.Job, summary string, er elasticRun) error {
	if opts.JSON {
		return cmdutil.InputErrorf("--json is not for --launcher k8s: --dry-run prints the manifests")
	}
	launching := !opts.DryRun && opts.OutputDir == ""
	nodes, err := launchline.ParseNNodes(opts.NNodes)
	if err != nil {
		return err
	}
	// Restarts, elastic or on a fixed set of hosts (MIN = MAX: a host
	// lost stops the job, as torchrun's fixed --nnodes), run as attempts
	// of the elastic loop, each a JobSet of its own.
	attempts := launching && (nodes.Elastic() || opts.MaxRestarts > 0)
	if attempts && !nodes.Elastic() {
		nodes = launchline.Nodes{Min: len(j.Hosts), Max: len(j.Hosts)}
	}
	if err := k8sRefusals(opts); err != nil {
		return err
	}
	ko, err := k8s.Sources{File: opts.K8s.ConfigFile, PodPatchFile: opts.K8s.PodPatchFile, Flags: opts.K8s.Flags,
		Labels: opts.K8s.Labels, DefaultName: opts.RunID}.Resolve()
	if err != nil {
		return cmdutil.InputErrorf("%v", err)
	}
	tag := kubernetes.Nonce()
	first := ko
	if launching {
		first.Control = &job.Control{Tag: tag, Grace: job.GraceSeconds(opts.StopGrace)}
	}
	if attempts {
		first.Name = attemptName(ko.Name, 0) // what the first attempt runs as: bad input fails here
	}
	m, err := k8s.Render(j, k8s.IslandsOf(c), first)
	if err != nil {
		return cmdutil.InputErrorf("--launcher k8s: %v", err)
	}
	if attempts {
		er.nodes = nodes
		er.k8s = &k8sAttempts{ko: ko, kubectl: opts.K8s.Kubectl, grace: job.GraceSeconds(opts.StopGrace), errOut: opts.IO.ErrOut}
		return runElastic(ctx, opts, er)
	}
	for _, w := range m.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s\n", w)
	}
	switch {
	case opts.DryRun:
		y, err := m.YAML()
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "# %s\n# %s %s/%s: %d pods, MASTER_ADDR=%s\n", summary, m.Kind, m.Namespace, m.Name, len(m.Pods), m.MasterAddr)
		_, err = opts.IO.Out.Write(y)
		return err
	case opts.OutputDir != "":
		return writeManifests(opts, m)
	}
	fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: %s\n", summary)
	ko8s := kubernetes.Options{Kubectl: opts.K8s.Kubectl, Out: opts.IO.Out}
	if opts.ProgressTimeout > 0 {
		_, err = watchedForHang(ctx, opts, j, func(ctx context.Context, steps *elastic.StepWatch) error {
			steps.Begin(j)
			ko8s.Out = steps
			return kubernetes.Launch(ctx, m, tag, ko8s)
		})
	} else {
		err = kubernetes.Launch(ctx, m, tag, ko8s)
	}
	var f *launch.JobFailure
	if errors.As(err, &f) {
		return err
	}
	if err != nil {
		return fmt.Errorf("--launcher k8s: %w", err)
	}
	return nil
}

// k8sRefusals refuse what --launcher k8s does not do, rather than ignore
// it: a preflight job, log files here and rank filters (kubectl logs keeps
// each pod's output).
func k8sRefusals(opts *Options) error {
	why := "kubectl logs keeps each pod's output"
	for _, r := range []struct {
		flag string
		set  bool
		why  string
	}{
		{"--preflight", opts.Preflight || opts.PreflightOnly, "run pipette-launch preflight over SSH first"},
		{"--log-dir", opts.LogDir != "", why},
		{"--quiet-ranks/--local-ranks-filter", len(opts.QuietRanks)+len(opts.LocalRanksFilter) > 0, why},
	} {
		if r.set {
			return cmdutil.InputErrorf("%s is not supported with --launcher k8s (%s)", r.flag, r.why)
		}
	}
	return nil
}

// writeManifests writes one file per object (never the Secret).
func writeManifests(opts *Options, m *k8s.Manifests) error {
	if err := ownOutputDir(opts.OutputDir, nil); err != nil {
		return err
	}
	names, err := m.WriteDir(opts.OutputDir, opts.Force)
	if err := outputDirError(err); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s to %s (apply with kubectl apply --server-side -f %s)\n", strings.Join(names, ", "), opts.OutputDir, opts.OutputDir)
	if m.Secret != nil {
		fmt.Fprintf(opts.IO.Out, "not written: Secret %s with %s (create it yourself; run --launcher k8s creates it)\n", k8s.SecretName(m.Name), strings.Join(m.SecretKeys, ", "))
	}
	return nil
}
