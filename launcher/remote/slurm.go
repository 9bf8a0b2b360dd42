package remote

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/hostlist"
)

// Slurm reaches the nodes of a Slurm allocation through srun instead of
// SSH: many Slurm clusters forbid SSH between compute nodes, and there
// Slurm is what starts and stops processes on every node.
type Slurm struct {
	// JobID is the allocation (SLURM_JOB_ID); every step runs inside it.
	JobID string
	// Env is srun's environment (SLURM_CONF, PATH, ...); nil means
	// os.Environ(). SLURM_JOB_ID is set from JobID either way.
	Env []string
	// Srun is the srun program ("srun" on PATH when empty).
	Srun string
}

// SlurmFromEnv returns the allocation pipette-launch runs in and its nodes
// in SLURM_JOB_NODELIST order, or an error saying what is missing.
func SlurmFromEnv(getenv func(string) string) (Slurm, []string, error) {
	id := strings.TrimSpace(getenv("SLURM_JOB_ID"))
	if id == "" {
		return Slurm{}, nil, fmt.Errorf("not inside a Slurm allocation (SLURM_JOB_ID is unset): run under salloc or sbatch, or use --launcher ssh")
	}
	nl := strings.TrimSpace(getenv("SLURM_JOB_NODELIST"))
	if nl == "" {
		return Slurm{}, nil, fmt.Errorf("Slurm job %s: SLURM_JOB_NODELIST is unset", id)
	}
	nodes, err := hostlist.Expand(nl)
	if err != nil {
		return Slurm{}, nil, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
	}
	return Slurm{JobID: id}, nodes, nil
}

func (s Slurm) Environ() []string {
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if !strings.HasPrefix(e, "SLURM_JOB_ID=") && !strings.HasPrefix(e, "SLURM_JOBID=") {
			out = append(out, e)
		}
	}
	return append(out, "SLURM_JOB_ID="+s.JobID)
}

func (s Slurm) Program() string {
	if s.Srun != "" {
		return s.Srun
	}
	return "srun"
}

// stepArgs are srun's arguments for a step of one task on each of nodes.
// --overlap lets the step share the nodes with a running step (the job
// itself, or a probe inside a batch script's allocation); --kill-on-bad-exit
// ends the step when one task fails; --label prefixes each output line with
// the task's number, which demultiplexes the nodes' output.
func (s Slurm) StepArgs(nodes []string) []string {
	return []string{
		"--jobid=" + s.JobID, "--overlap", "--quiet", "--label", "--kill-on-bad-exit=1",
		"--nodes=" + strconv.Itoa(len(nodes)), "--ntasks=" + strconv.Itoa(len(nodes)), "--ntasks-per-node=1",
		"--nodelist=" + strings.Join(nodes, ","),
	}
}

// Runner runs commands on one node, each as its own one-task step.
func (s Slurm) Runner(node string) Runner { return slurmRunner{s: s, node: node} }

type slurmRunner struct {
	s    Slurm
	node string
}

func (r slurmRunner) Run(ctx context.Context, cmd string) (stdout, stderr []byte, err error) {
	args := []string{"--jobid=" + r.s.JobID, "--overlap", "--quiet", "--nodes=1", "--ntasks=1",
		"--nodelist=" + r.node, "/bin/sh", "-c", cmd}
	c := exec.CommandContext(ctx, r.s.Program(), args...)
	c.Env = r.s.Environ()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if err := c.Run(); err != nil {
		return o.Bytes(), e.Bytes(), fmt.Errorf("srun on %s: %w", r.node, err)
	}
	return o.Bytes(), e.Bytes(), nil
}
