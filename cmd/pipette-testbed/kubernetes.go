package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pipette-launch/pipette-launch/testbed/kube"
	"github.com/urfave/cli/v2"
)

// kubernetesFlag is up's --kubernetes MODE.
func kubernetesFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "kubernetes", Usage: usage}
}

// buildCommand builds what a test-bed needs ahead of time (CI's cache step).
func buildCommand(out, errOut io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "build",
		Usage: "build the Kubernetes stack's binaries from the Go module proxy into the cache (once per version set)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "kubernetes", Usage: "build the Kubernetes stack (the only thing build builds)", Required: true},
		},
		OnUsageError: usageOnly,
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usagef("build: unexpected arguments %q", c.Args().Slice())
			}
			if len(kube.Missing()) == 0 {
				fmt.Fprintf(out, "kubernetes stack already built in %s\n", kube.BinDir())
				return nil
			}
			start := time.Now()
			fmt.Fprintf(errOut, "building the kubernetes stack into %s (about 13 minutes cold on 2 cores)\n", kube.BinDir())
			if err := kube.Build(c.Context, errOut); err != nil {
				return err
			}
			fmt.Fprintf(out, "kubernetes stack built in %s in %s\n", kube.BinDir(), time.Since(start).Round(time.Second))
			return nil
		},
	}
}

// runKubernetesUp builds the stack if needed and starts it in mode.
func runKubernetesUp(ctx context.Context, modeName string, out, errOut io.Writer) error {
	mode, err := kube.ParseMode(modeName)
	if err != nil {
		return usagef("--kubernetes: %v", err)
	}
	if err := kube.Build(ctx, errOut); err != nil {
		return err
	}
	start := time.Now()
	s, err := kube.Up(ctx, kube.Options{Mode: mode, Log: errOut})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kubernetes (%s) up in %s: state in %s\nexport KUBECONFIG=%s PATH=%s:$PATH\nstop it with: pipette-testbed down --kubernetes\n",
		mode, time.Since(start).Round(100*time.Millisecond), s.Dir, s.Kubeconfig, s.Bin)
	return nil
}

// runKubernetesDown stops the stack `up --kubernetes` started and any a
// killed test left (each test's stack has its own state dir).
func runKubernetesDown(ctx context.Context, out io.Writer) error {
	stopped, err := kube.DownAll(ctx, out)
	for _, d := range stopped {
		fmt.Fprintf(out, "kubernetes stack in %s stopped\n", d)
	}
	if err != nil {
		return err
	}
	if len(stopped) == 0 {
		fmt.Fprintln(out, "no kubernetes stack to stop")
	}
	return nil
}
