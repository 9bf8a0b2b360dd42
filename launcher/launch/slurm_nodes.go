package launch

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/hostlist"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// SlurmFailedNodes are the nodes of nodes Slurm no longer runs this job on, and
// why: those it reports not responding (a state ending in "*"), down,
// drained or failing (sinfo), and those gone from the job's node list
// (scontrol: an allocation made with --no-kill drops a failed node and
// goes on). Inside an allocation that is how a lost node shows: srun has
// no heartbeat of ours. An error when Slurm cannot be asked.
func SlurmFailedNodes(ctx context.Context, s remote.Slurm, nodes []string) (map[string]string, error) {
	run := func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, name, args...)
		c.Env = s.Environ()
		out, err := c.Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return string(out), nil
	}
	failed := map[string]string{}
	out, err := run("sinfo", "-h", "-N", "-o", "%N %T", "-n", strings.Join(nodes, ","))
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || !slices.Contains(nodes, f[0]) {
			continue
		}
		state := strings.ToLower(f[1])
		switch {
		case strings.HasSuffix(state, "*"):
			failed[f[0]] = "Slurm reports it not responding (" + state + ")"
		case strings.HasPrefix(state, "down"), strings.HasPrefix(state, "drain"), strings.HasPrefix(state, "fail"):
			failed[f[0]] = "Slurm reports it " + state
		}
	}
	out, err = run("scontrol", "-o", "show", "job", s.JobID)
	if err != nil {
		return nil, err
	}
	for _, f := range strings.Fields(out) {
		if nl, ok := strings.CutPrefix(f, "NodeList="); ok && nl != "(null)" {
			in, err := hostlist.Expand(nl)
			if err != nil {
				return nil, fmt.Errorf("scontrol: NodeList %q: %w", nl, err)
			}
			for _, n := range nodes {
				if !slices.Contains(in, n) && failed[n] == "" {
					failed[n] = "Slurm removed it from job " + s.JobID + " (a failed node)"
				}
			}
			break
		}
	}
	return failed, nil
}
