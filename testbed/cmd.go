package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// requiredTools are the programs Up runs; a missing one makes a clear error.
var requiredTools = []struct{ name, pkg string }{
	{"ip", "iproute2"},
	{"tc", "iproute2"},
	{"sshd", "openssh-server"},
	{"unshare", "util-linux"},
	{"nsenter", "util-linux"},
	{"mount", "mount"},
}

// sshdPath is absolute because sshd refuses to re-exec itself otherwise.
var sshdPath = "/usr/sbin/sshd"

// CheckPrerequisites reports why Up cannot work here: not root, or a
// program missing (naming the Debian package to install).
func CheckPrerequisites() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("testbed needs root (network namespaces, mounts, sshd); running as uid %d", uid)
	}
	for _, t := range requiredTools {
		if _, err := exec.LookPath(t.name); err != nil {
			if t.name == "sshd" {
				if _, err2 := exec.LookPath(sshdPath); err2 == nil {
					continue
				}
			}
			return fmt.Errorf("testbed needs %s: install the Debian package %s", t.name, t.pkg)
		}
	}
	return nil
}

// run executes a command and folds its output into the error.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	return outputInput(ctx, "", name, args...)
}

// runInput runs a command with stdin and folds its output into the error.
func runInput(ctx context.Context, stdin, name string, args ...string) error {
	_, err := outputInput(ctx, stdin, name, args...)
	return err
}

func outputInput(ctx context.Context, stdin, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}
