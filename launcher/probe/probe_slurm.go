package probe

import (
	"context"
	"fmt"

	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
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

// SlurmHosts probes every node in one srun step (one task per node)
// with the same probe script and parser as over SSH. Results follow nodes'
// order, each Target being the node's name; nodes that did not answer are
// nil and named in the returned *HostErrors.
func SlurmHosts(ctx context.Context, s remote.Slurm, nodes []string, progress *progress.Line) ([]*HostProbe, error) {
	progress.Update("probe: srun on %d nodes of Slurm job %s", len(nodes), s.JobID)
	byNode, stderr, runErr, err := s.RunEach(ctx, nodes, reachWrapper+"exec "+ProbeCommand())
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

// ProbeLaunchSlurm is ProbeLaunch through srun: rank 0's node (nodes[rank0])
// first, for the address the job reaches it on (the one routing to the
// launching machine, as over SSH), then every other node in one step, for
// the interface routing there.
func ProbeLaunchSlurm(ctx context.Context, s remote.Slurm, nodes []string, rank0 int, python string) (*LaunchProbe, error) {
	if rank0 < 0 || rank0 >= len(nodes) {
		return nil, fmt.Errorf("launch probe: rank 0's node index %d out of range", rank0)
	}
	lp := &LaunchProbe{Hosts: make([]HostRoute, len(nodes))}
	stdout, stderr, err := s.Runner(nodes[rank0]).Run(ctx, "sh -c "+shellquote.Quote(reachWrapper+"exec "+launchProbeCommand("", python)))
	if err != nil {
		return nil, fmt.Errorf("launch probe on %s: %w%s", nodes[rank0], err, remote.StderrSuffix(stderr))
	}
	hr, master, err := ParseLaunchProbe(string(stdout), "")
	if err != nil {
		return nil, fmt.Errorf("launch probe on %s: %w", nodes[rank0], err)
	}
	if master == "" {
		return nil, fmt.Errorf("launch probe: %s: no IPv4 address other nodes could reach rank 0 on", nodes[rank0])
	}
	hr.Target, hr.Python = nodes[rank0], python
	lp.Hosts[rank0], lp.MasterAddr = hr, master
	var others []string
	for i, n := range nodes {
		if i != rank0 {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return lp, nil
	}
	byNode, stderr, runErr, err := s.RunEach(ctx, others, reachWrapper+"exec "+launchProbeCommand(master, python))
	if err != nil {
		return nil, fmt.Errorf("launch probe: %w", err)
	}
	errs := &remote.HostErrors{}
	for i, n := range nodes {
		if i == rank0 {
			continue
		}
		text, ok := byNode[n]
		if !ok {
			errs.Add(n, fmt.Errorf("launch probe through srun: no output (srun: %v%s)", runErr, remote.StderrSuffix(stderr)))
			continue
		}
		hr, _, err := ParseLaunchProbe(text, master)
		if err != nil {
			errs.Add(n, fmt.Errorf("launch probe through srun: %w", err))
			continue
		}
		hr.Target, hr.Python = n, python
		lp.Hosts[i] = hr
	}
	if err := errs.ErrorOrNil(); err != nil {
		return nil, err
	}
	return lp, nil
}
