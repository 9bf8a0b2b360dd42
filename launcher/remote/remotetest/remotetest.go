// Package remotetest holds what the launcher's tests use to reach hosts:
// a test-bed's (package testbed) SSH options, with host keys verified, and
// its hosts as targets; and a Runner for this machine. Tests only.
package remotetest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// SSH reaches tb's hosts: its ssh_config, known_hosts and key, with short
// timeouts (the hosts are network namespaces on this machine).
func SSH(tb *testbed.Testbed) remote.SSHOptions {
	return remote.SSHOptions{
		SSHConfigFile:  tb.SSHConfigFile,
		KnownHostsFile: tb.KnownHostsFile,
		IdentityFiles:  []string{tb.KeyFile},
		ConnectTimeout: 5 * time.Second,
		KeepAlive:      2 * time.Second,
	}
}

// Targets are tb's hosts, by name, in the test-bed's order.
func Targets(tb *testbed.Testbed) []remote.HostTarget {
	var ts []remote.HostTarget
	for _, h := range tb.Hosts {
		ts = append(ts, remote.HostTarget{Name: h.Name})
	}
	return ts
}

// Shell runs commands with this machine's /bin/sh, as sshd would run them
// on a host; Env adds variables (PATH, SSH_CONNECTION). It is a
// remote.Runner.
type Shell struct{ Env []string }

// Run runs cmd to its end.
func (l Shell) Run(ctx context.Context, cmd string) ([]byte, []byte, error) {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.Env = append(os.Environ(), l.Env...)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	return []byte(stdout.String()), []byte(stderr.String()), err
}
