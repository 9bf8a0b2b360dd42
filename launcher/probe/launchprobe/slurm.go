package launchprobe

import (
	"context"
	"fmt"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// SlurmHosts is Hosts through srun: rank 0's node (nodes[rank0])
// first, for the address the job reaches it on (the one routing to the
// launching machine, as over SSH), then every other node in one step, for
// the interface routing there.
func SlurmHosts(ctx context.Context, s remote.Slurm, nodes []string, rank0 int, python string) (*Result, error) {
	if rank0 < 0 || rank0 >= len(nodes) {
		return nil, fmt.Errorf("launch probe: rank 0's node index %d out of range", rank0)
	}
	lp := &Result{Hosts: make([]HostRoute, len(nodes))}
	stdout, stderr, err := s.Runner(nodes[rank0]).Run(ctx, "sh -c "+shellquote.Quote(probe.UnderSrun(command("", python))))
	if err != nil {
		return nil, fmt.Errorf("launch probe on %s: %w%s", nodes[rank0], err, remote.StderrSuffix(stderr))
	}
	hr, master, err := ParseOutput(string(stdout), "")
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
	byNode, stderr, runErr, err := s.RunEach(ctx, others, probe.UnderSrun(command(master, python)))
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
		hr, _, err := ParseOutput(text, master)
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
