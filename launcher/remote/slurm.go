package remote

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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

// nodeMarker starts the line each task of RunEach prints first: its Slurm
// node name, which maps srun's task labels to nodes whatever order Slurm
// numbered them in.
const nodeMarker = "::pipette-node::"

// RunEach runs script with /bin/sh on every node in one srun step, one
// task per node, and returns each node's output by node name. stderr is
// the step's (all tasks'), runErr srun's own failure; a node missing from
// byNode did not answer. err is output that cannot be told apart by node.
func (s Slurm) RunEach(ctx context.Context, nodes []string, script string) (byNode map[string]string, stderr []byte, runErr, err error) {
	args := append(s.StepArgs(nodes), "/bin/sh", "-c", `printf '%s %s %s\n' '`+nodeMarker+`' "$SLURMD_NODENAME" "$SLURM_STEP_ID"`+"\n"+script)
	c := exec.CommandContext(ctx, s.Program(), args...)
	c.Env = s.Environ()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	runErr = c.Run()
	byNode, step, err := splitByNode(o.String())
	s.WaitStepGone(step, 30*time.Second)
	return byNode, e.Bytes(), runErr, err
}

// WaitStepGone waits (up to limit) until Slurm no longer lists step of the
// allocation. srun ends when its tasks have, while each node's slurmstepd
// may still be tidying up; the next step, or whoever runs after
// pipette-launch returns, should find the nodes free. An empty step (it
// never started) returns at once.
func (s Slurm) WaitStepGone(step string, limit time.Duration) {
	if step == "" {
		return
	}
	id := s.JobID + "." + step
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c := exec.CommandContext(ctx, "squeue", "-h", "-s", "-j", s.JobID, "-o", "%i")
		c.Env = s.Environ()
		out, err := c.Output()
		cancel()
		if err != nil || !slices.Contains(strings.Fields(string(out)), id) {
			return // gone, or the job itself is gone (squeue fails then)
		}
	}
}

// splitByNode sorts srun --label output ("  3: text") into each task's
// text, and names each task by the node marker line it printed first; that
// line also names the step.
func splitByNode(out string) (byNode map[string]string, step string, err error) {
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
		if rest, ok := strings.CutPrefix(text, nodeMarker+" "); ok && node[task] == "" {
			if f := strings.Fields(rest); len(f) > 0 {
				node[task], step = f[0], strings.Join(f[1:], "") // the step ID
			}
			continue
		}
		tasks[task] = append(tasks[task], text)
	}
	ids := make([]int, 0, len(node))
	for id := range node {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	byNode = map[string]string{}
	for _, id := range ids {
		if _, dup := byNode[node[id]]; dup {
			return nil, step, fmt.Errorf("two tasks ran on node %s: the step must have one task per node", node[id])
		}
		byNode[node[id]] = strings.Join(tasks[id], "\n")
	}
	return byNode, step, nil
}
