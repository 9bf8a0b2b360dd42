package probe

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// nodeMarker starts the line each task prints first: its Slurm node name,
// which maps srun's task labels to nodes whatever order Slurm numbered
// them in.
const nodeMarker = "::pipette-node::"

// slurmProbeWrapper makes the probe's view of "the address other hosts
// reach this one on" the same as over SSH: SSH_CONNECTION's local address
// is the one that routes to the launching machine, and under srun that
// machine is SLURM_LAUNCH_NODE_IPADDR.
const slurmProbeWrapper = `printf '%s %s\n' '` + nodeMarker + `' "$SLURMD_NODENAME"
ra=$(ip -o -4 route get "$SLURM_LAUNCH_NODE_IPADDR" 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
SSH_CONNECTION="$SLURM_LAUNCH_NODE_IPADDR 0 $ra 0"
export SSH_CONNECTION
`

// ProbeHostsSlurm probes every node in one srun step (one task per node)
// with the same probe script and parser as over SSH. Results follow nodes'
// order, each Target being the node's name; nodes that did not answer are
// nil and named in the returned *HostErrors.
func ProbeHostsSlurm(ctx context.Context, s remote.Slurm, nodes []string, progress *Progress) ([]*HostProbe, error) {
	progress.Update("probe: srun on %d nodes of Slurm job %s", len(nodes), s.JobID)
	args := append(s.StepArgs(nodes), "/bin/sh", "-c", slurmProbeWrapper+"exec "+ProbeCommand())
	c := exec.CommandContext(ctx, s.Program(), args...)
	c.Env = s.Environ()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	runErr := c.Run()
	progress.Done()
	byNode, err := splitByNode(o.String())
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
				why = fmt.Sprintf("%s (srun: %v%s)", why, runErr, remote.StderrSuffix(e.Bytes()))
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

// splitByNode sorts srun --label output ("  3: text") into each task's
// text, and names each task by the node marker line it printed first.
func splitByNode(out string) (map[string]string, error) {
	tasks := map[int][]string{}
	node := map[int]string{}
	for _, line := range strings.Split(out, "\n") {
		label, text, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		task, err := strconv.Atoi(strings.TrimSpace(label))
		if err != nil {
			continue
		}
		if name, ok := strings.CutPrefix(text, nodeMarker+" "); ok && node[task] == "" {
			node[task] = strings.TrimSpace(name)
			continue
		}
		tasks[task] = append(tasks[task], text)
	}
	ids := make([]int, 0, len(node))
	for id := range node {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	byNode := map[string]string{}
	for _, id := range ids {
		if _, dup := byNode[node[id]]; dup {
			return nil, fmt.Errorf("two tasks ran on node %s: the step must have one task per node", node[id])
		}
		byNode[node[id]] = strings.Join(tasks[id], "\n")
	}
	return byNode, nil
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
	stdout, stderr, err := s.Runner(nodes[rank0]).Run(ctx, "sh -c "+shellquote.Quote(slurmProbeWrapper+"exec "+launchProbeCommand("", python)))
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
	args := append(s.StepArgs(others), "/bin/sh", "-c", slurmProbeWrapper+"exec "+launchProbeCommand(master, python))
	c := exec.CommandContext(ctx, s.Program(), args...)
	c.Env = s.Environ()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	runErr := c.Run()
	byNode, err := splitByNode(o.String())
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
			errs.Add(n, fmt.Errorf("launch probe through srun: no output (srun: %v%s)", runErr, remote.StderrSuffix(e.Bytes())))
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
