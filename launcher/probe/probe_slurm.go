package probe

import (
	"context"
	"fmt"

	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// reachWrapper makes the probe's view of "the address other hosts reach
// this one on" the same as over SSH: SSH_CONNECTION's local address is the
// one that routes to the launching machine, and under srun that machine
// is SLURM_LAUNCH_NODE_IPADDR.
const reachWrapper = `ra=$(ip -o -4 route get "$SLURM_LAUNCH_NODE_IPADDR" 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
SSH_CONNECTION="$SLURM_LAUNCH_NODE_IPADDR 0 $ra 0"
export SSH_CONNECTION
`

// UnderSrun is the sh script an srun task runs cmd (one sh command line)
// with: SSH_CONNECTION set as an SSH login sets it (reachWrapper), so a
// probe script reads the address other hosts reach the node on through
// srun as over SSH (ReachAddress).
func UnderSrun(cmd string) string { return reachWrapper + "exec " + cmd }

// SlurmHosts probes every node in one srun step (one task per node)
// with the same probe script and parser as over SSH. Results follow nodes'
// order, each Target being the node's name; nodes that did not answer are
// nil and named in the returned *HostErrors.
func SlurmHosts(ctx context.Context, s remote.Slurm, nodes []string, progress *progress.Line) ([]*HostProbe, error) {
	progress.Update("probe: srun on %d nodes of Slurm job %s", len(nodes), s.JobID)
	byNode, stderr, runErr, err := s.RunEach(ctx, nodes, UnderSrun(ProbeCommand()))
	progress.Done()
	if err != nil {
		return nil, fmt.Errorf("srun probe: %w", err)
	}
	errs := &remote.HostErrors{}
	out := make([]*HostProbe, len(nodes))
	for i, n := range nodes {
		text, ok := byNode[n]
		if !ok {
			why := "no output from its task"
			if runErr != nil {
				why = fmt.Sprintf("%s (srun: %v%s)", why, runErr, remote.StderrSuffix(stderr))
			}
			errs.Add(n, fmt.Errorf("probe through srun: %s", why))
			continue
		}
		hp, err := ParseProbeOutput(text)
		if err != nil {
			errs.Add(n, fmt.Errorf("probe through srun: %w", err))
			continue
		}
		hp.Target = n
		out[i] = hp
	}
	return out, errs.ErrorOrNil()
}
