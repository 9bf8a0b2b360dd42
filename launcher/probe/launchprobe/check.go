package launchprobe

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// Runner runs one command on a host (a *remote.Conn).
type Runner interface {
	Run(ctx context.Context, cmd string) (stdout, stderr []byte, err error)
}

// Needs is what a host's health check asks of it beside the interface the
// job's traffic takes: the RDMA ports and interfaces its island's NICs
// name in the cluster file, and the GPUs it runs on (0: none checked).
type Needs struct {
	Links []string
	GPUs  int
}

// CheckHost is one host's health check on its own, as after a rank failed
// there: the launch probe's command over conn (a new SSH connection, whose
// connecting is the check's first step: a host not reached fails before
// this), read as before a start and judged by HostRoute.Health: the
// interface that routes to masterAddr (rank 0's address) and the links
// needs names must be up, and its GPUs visible. nil: healthy.
func CheckHost(ctx context.Context, conn Runner, masterAddr string, needs Needs) error {
	stdout, stderr, err := conn.Run(ctx, command(masterAddr, ""))
	if err != nil {
		return fmt.Errorf("launch probe: %w%s", err, remote.StderrSuffix(stderr))
	}
	hr, _, err := ParseOutput(string(stdout), masterAddr)
	if err != nil {
		return fmt.Errorf("launch probe: %w", err)
	}
	return hr.Health(append([]string{hr.Ifname}, needs.Links...), needs.GPUs)
}

// CheckLocal is CheckHost on this machine, for a job that runs here alone
// (no SSH): the launch probe's command with /bin/sh, rank 0's address
// loopback, as Local describes this machine before a start.
func CheckLocal(ctx context.Context, needs Needs) error {
	return CheckHost(ctx, localShell{}, "127.0.0.1", needs)
}

// localShell runs a command on this machine with /bin/sh -c, as sshd runs
// it on a host.
type localShell struct{}

func (localShell) Run(ctx context.Context, cmd string) ([]byte, []byte, error) {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	return out.Bytes(), errOut.Bytes(), err
}
