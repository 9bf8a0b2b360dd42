package probe

import (
	"context"
	"fmt"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/kubernetes"
	"github.com/urfave/cli/v2"
)

// K8sOptions are probe's flags for --launcher k8s.
type K8sOptions struct {
	Kubectl     kubernetes.Kubectl
	Selector    string
	GPUResource string
}

func k8sFlags(o *K8sOptions) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", EnvVars: []string{"KUBECONFIG"}, Usage: "with --launcher k8s: kubeconfig kubectl uses", Destination: &o.Kubectl.Kubeconfig},
		&cli.StringFlag{Name: "kube-context", Usage: "with --launcher k8s: kubeconfig context", Destination: &o.Kubectl.Context},
		&cli.StringFlag{Name: "kubectl", Value: "kubectl", Usage: "with --launcher k8s: the kubectl to run", Destination: &o.Kubectl.Path},
		&cli.StringFlag{Name: "k8s-selector", Usage: "with --launcher k8s: only nodes with these labels (kubectl -l syntax)", Destination: &o.Selector},
		&cli.StringFlag{Name: "k8s-gpu-resource", Value: "nvidia.com/gpu", Usage: "with --launcher k8s: the GPUs' extended resource", Destination: &o.GPUResource},
	}
}

// runKubernetes reads the cluster's GPU nodes (no process runs on them)
// into a cluster file whose hosts are node names, and says what it could
// not know.
func runKubernetes(ctx context.Context, opts *Options) error {
	if opts.Measure || opts.Hosts != "" || opts.Hostfile != "" {
		return probeInputErrorf("--launcher k8s reads the cluster's nodes: --measure, --hosts and --hostfile are for ssh and slurm (use --k8s-selector)")
	}
	f, notes, err := kubernetes.ProbeNodes(ctx, opts.K8s.Kubectl, opts.K8s.Selector, opts.K8s.GPUResource)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(opts.IO.ErrOut, "note: not known from the Kubernetes API: %s\n", n)
	}
	data, err := clusterFileText(f)
	if err != nil {
		return err
	}
	if err := writeClusterFile(opts, data); err != nil {
		return err
	}
	printProbeSummary(opts, f)
	return nil
}

func onKubernetes(launcher string) bool {
	which, err := cmdutil.ChooseLauncher(launcher, func(string) string { return "" })
	return err == nil && which == cmdutil.LauncherK8s
}
