package cmdutil

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/urfave/cli/v2"
)

// SSHFlags are the connection flags `probe` and `run` share. Host keys are
// always checked unless --insecure-skip-host-key-check is given. shortI
// gives --identity ssh's short -i; `run` leaves it to DeepSpeed's launcher
// (-i is its --include there, docs/launcher-flags.md).
func SSHFlags(shortI bool) []cli.Flag {
	var identityAliases []string
	if shortI {
		identityAliases = []string{"i"}
	}
	return []cli.Flag{
		&cli.StringFlag{Name: "ssh-config", Usage: "ssh_config file (default ~/.ssh/config; none to read none)"},
		&cli.StringFlag{Name: "known-hosts", Usage: "known_hosts file (default ~/.ssh/known_hosts)"},
		&cli.BoolFlag{Name: "insecure-skip-host-key-check", Usage: "do not verify host keys (unsafe: only for throw-away test hosts)"},
		&cli.StringSliceFlag{Name: "identity", Aliases: identityAliases, Usage: "SSH private key file (repeatable)"},
		&cli.StringFlag{Name: "user", Usage: "SSH user for hosts that name none"},
		&cli.IntFlag{Name: "ssh-port", Aliases: []string{"ssh_port"}, Usage: "SSH port for hosts that name none (DeepSpeed's --ssh_port)"},
		&cli.IntFlag{Name: "fanout", Value: remote.DefaultFanout, Usage: "hosts contacted at once"},
	}
}

// SSHOptionsFromCLI reads the flags SSHFlags defines.
func SSHOptionsFromCLI(c *cli.Context) (remote.SSHOptions, int) {
	return remote.SSHOptions{
		SSHConfigFile:         c.String("ssh-config"),
		KnownHostsFile:        c.String("known-hosts"),
		InsecureIgnoreHostKey: c.Bool("insecure-skip-host-key-check"),
		IdentityFiles:         c.StringSlice("identity"),
		User:                  c.String("user"),
		Port:                  c.Int("ssh-port"),
	}, c.Int("fanout")
}

// ParseRankList reads torchrun's --local-ranks-filter form: "0,2,3".
func ParseRankList(flag, s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--%s %q: want comma-separated rank numbers such as 0,3", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}
