package conformance

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/conformance/corpus"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// TestConformance is make conformance: the real frameworks judge what
// pipette-launch renders. It needs the kits of ../shared/frameworks set up
// (make conformance does it) and runs only when PIPETTE_CONFORMANCE=1.
func TestConformance(t *testing.T) {
	if os.Getenv("PIPETTE_CONFORMANCE") != "1" {
		t.Skip("make conformance runs this (PIPETTE_CONFORMANCE=1, with the framework kits set up)")
	}
	h := newHarness(t)
	t.Run("megatron", h.megatron)
	t.Run("deepspeed-configs", h.deepSpeedConfigs)
	t.Run("deepspeed-jobs", h.deepSpeedJobs)
	t.Run("deepspeed-partition", h.deepSpeedPartition)
}

type harness struct {
	bin, frameworks, kitDir, corpusDir string
	gpuDir                             string
	sources                            []*corpus.Source
}

func newHarness(t *testing.T) *harness {
	h := &harness{corpusDir: "testdata/corpus"}
	var err error
	if h.corpusDir, err = filepath.Abs(h.corpusDir); err != nil {
		t.Fatal(err)
	}
	h.frameworks = os.Getenv("PIPETTE_FRAMEWORKS")
	if h.frameworks == "" {
		t.Fatal("PIPETTE_FRAMEWORKS is not set: the folder of the framework kits (make conformance sets it)")
	}
	if h.kitDir, err = filepath.Abs("kit"); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	h.bin = filepath.Join(tmp, "pipette-launch")
	if out, err := exec.Command("go", "build", "-o", h.bin, "../cmd/pipette-launch").CombinedOutput(); err != nil {
		t.Fatalf("building pipette-launch: %v\n%s", err, out)
	}
	h.gpuDir = filepath.Join(tmp, "gpus")
	if err := os.MkdirAll(h.gpuDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := corpus.FakeNvidiaSMI(h.gpuDir, 8); err != nil {
		t.Fatal(err)
	}
	if h.sources, err = corpus.Load(h.corpusDir); err != nil {
		t.Fatal(err)
	}
	return h
}

// dryRun renders a prepared corpus line with the built binary, in its
// launch directory, with the environment its script exported.
func (h *harness) dryRun(p *corpus.Prepared) (*job, error) {
	cmd := exec.Command(h.bin, append([]string{"--dry-run", "--json"}, p.Args...)...)
	cmd.Dir = p.Dir
	// DeepSpeed's default hostfile: where Prepare placed the line's, or a
	// path that does not exist; never this machine's /job/hostfile.
	hostfile := cmp.Or(p.Placed["/job/hostfile"], filepath.Join(p.Dir, "no-default-hostfile"))
	cmd.Env = append(os.Environ(), "PATH="+h.gpuDir+":"+os.Getenv("PATH"), "PIPETTE_DEEPSPEED_HOSTFILE="+hostfile)
	for k, v := range p.Line.Exported {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("dry run: %v: %s", err, lastLines(errOut.String(), 1))
	}
	var j job
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		return nil, fmt.Errorf("dry run's JSON: %v", err)
	}
	return &j, nil
}

type job struct {
	Summary string `json:"summary"`
	// Plan is the plan's configuration (the dry run prints search.Plan,
	// whose parallel.Config fields are at its top level).
	Plan  *parallel.Config `json:"plan"`
	Hosts []struct {
		Name  string `json:"name"`
		Ranks []struct {
			Rank int      `json:"rank"`
			Argv []string `json:"argv"`
			Env  []struct{ Name, Value string }
		} `json:"ranks"`
	} `json:"hosts"`
	Files []struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"files"`
}

// rank0 is rank 0's arguments after the script and its environment.
func (j *job) rank0(script string) ([]string, map[string]string, error) {
	for _, h := range j.Hosts {
		for _, r := range h.Ranks {
			if r.Rank != 0 {
				continue
			}
			i := slices.Index(r.Argv, script)
			if i < 0 {
				return nil, nil, fmt.Errorf("script %s not in rank 0's argv", script)
			}
			env := map[string]string{}
			for _, kv := range r.Env {
				env[kv.Name] = kv.Value
			}
			return r.Argv[i+1:], env, nil
		}
	}
	return nil, nil, fmt.Errorf("no rank 0")
}

// megatron: rank 0 of every Megatron corpus line passes Megatron-LM's own
// parse_args + validate_args (and the configs pretrain builds), or Megatron
// refuses it with the same words as it refuses torchrun's rank 0 of the
// original line (the line itself is wrong for its world size).
func (h *harness) megatron(t *testing.T) {
	type item struct {
		name    string
		dryErr  error
		refused string // Expect.Refused
	}
	var items []*item
	var reqs []map[string]any
	for _, s := range h.sources {
		for i := range s.Lines {
			l := &s.Lines[i]
			if !l.Expect.Megatron {
				continue
			}
			it := &item{name: l.Name, refused: l.Expect.Refused}
			items = append(items, it)
			cap := [2]int{8, 0}
			if l.Expect.GPUCapability > 0 {
				cap = [2]int{int(l.Expect.GPUCapability), int(l.Expect.GPUCapability*10) % 10}
			}
			p, err := s.Prepare(h.corpusDir, l, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			script := filepath.Base(l.Expect.Script)
			base := map[string]any{"script": script, "megatron": "/opt/megatron-lm", "gpu_capability": cap, "configs": true, "parallel_state": true}
			// torchrun's rank 0 of the original line: the reference.
			ref := map[string]string{"WORLD_SIZE": strconv.Itoa(l.Expect.WorldSize), "RANK": "0", "LOCAL_RANK": "0",
				"LOCAL_WORLD_SIZE": strconv.Itoa(l.Expect.WorldSize / l.Expect.Nodes), "GROUP_RANK": "0",
				"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
			for k, v := range l.Exported {
				ref[k] = v
			}
			reqs = append(reqs, merge(base, map[string]any{"id": "ref:" + l.Name, "argv": p.ScriptArgs, "env": ref}))
			j, err := h.dryRun(p)
			if err == nil {
				var argv []string
				var env map[string]string
				if argv, env, err = j.rank0(p.Line.Expect.Script); err == nil {
					reqs = append(reqs, merge(base, map[string]any{"id": "pl:" + l.Name, "argv": argv, "env": env}))
				}
			}
			it.dryErr = err
		}
	}
	res, err := h.runMegatron(reqs)
	if err != nil {
		t.Fatal(err)
	}
	passed := 0
	for _, it := range items {
		ref, pl := res["ref:"+it.name], res["pl:"+it.name]
		var verdict error
		switch {
		case it.refused != "":
			// The line is wrong for its world size: Megatron must refuse
			// torchrun's rank 0 of it, and pipette-launch before launch.
			switch {
			case ref == nil || ref.OK:
				verdict = fmt.Errorf("the corpus says Megatron refuses this line, but Megatron on torchrun's rank 0: %s", ref.summary())
			case it.dryErr == nil || !strings.Contains(it.dryErr.Error(), it.refused):
				verdict = fmt.Errorf("Megatron refuses it (%s), so the dry run must fail with %q; it gave: %v", ref.summary(), it.refused, it.dryErr)
			default:
				t.Logf("%s: refused before launch (%v); Megatron refuses the original line too: %s", it.name, it.dryErr, ref.summary())
			}
		case it.dryErr != nil:
			verdict = it.dryErr
		case pl == nil:
			verdict = fmt.Errorf("no Megatron result")
		case pl.OK:
			t.Logf("%s: Megatron OK (%s)", it.name, pl.Stage)
		case ref != nil && !ref.OK && ref.Error == pl.Error:
			t.Logf("%s: Megatron refuses the original line under torchrun as well: %s", it.name, pl.Error)
		default:
			verdict = fmt.Errorf("Megatron %s: %s (torchrun's rank 0: %s)", pl.Stage, pl.Error, ref.summary())
		}
		why, expected := megatronExpectedFailures[it.name]
		switch {
		case verdict == nil && expected:
			passed++
			t.Errorf("%s passes now: remove it from megatronExpectedFailures (%s)", it.name, why)
		case verdict == nil:
			passed++
		case expected:
			t.Logf("expected failure %s [%s]: %v (Megatron on torchrun's rank 0 of the original line: %s)", it.name, why, verdict, ref.summary())
		default:
			t.Errorf("%s: %v", it.name, verdict)
		}
	}
	var names []string
	for _, it := range items {
		names = append(names, it.name)
	}
	checkListed(t, megatronExpectedFailures, names, "megatronExpectedFailures")
	fmt.Printf("megatron: %d/%d lines\n", passed, len(items))
}

func merge(a, b map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

type megatronResult struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Stage string `json:"stage"`
	Error string `json:"error"`
}

func (r *megatronResult) summary() string {
	if r == nil {
		return "no result"
	}
	if r.OK {
		return "OK"
	}
	return r.Stage + ": " + r.Error
}

// runMegatron runs every request in one chroot into the Megatron kit's
// root (the kit's inner.py, forked per request by kit/megatron_batch.py).
func (h *harness) runMegatron(reqs []map[string]any) (map[string]*megatronResult, error) {
	env := kitEnvDir("PIPETTE_MEGATRON_ENV", "megatron")
	root := filepath.Join(env, "rootfs")
	kit := filepath.Join(root, "opt", "pipette-megatron")
	if err := os.MkdirAll(kit, 0o755); err != nil {
		return nil, err
	}
	for src, dst := range map[string]string{
		filepath.Join(h.frameworks, "megatron", "inner.py"): "inner.py",
		filepath.Join(h.frameworks, "megatron", "stubs.py"): "stubs.py",
		filepath.Join(h.kitDir, "megatron_batch.py"):        "megatron_batch.py",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("Megatron kit: %w (set PIPETTE_FRAMEWORKS)", err)
		}
		if err := os.WriteFile(filepath.Join(kit, dst), b, 0o644); err != nil {
			return nil, fmt.Errorf("Megatron kit root %s: %w (run the kit's setup.sh, or set PIPETTE_MEGATRON_ENV)", root, err)
		}
	}
	var in bytes.Buffer
	for _, r := range reqs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--mount-proc="+filepath.Join(root, "proc"),
		"chroot", root, "/usr/bin/python3", "/opt/pipette-megatron/megatron_batch.py")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	cmd.Stdin = &in
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("Megatron checks: %v: %s", err, lastLines(errOut.String(), 1))
	}
	res := map[string]*megatronResult{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r megatronResult
		if err := json.Unmarshal(sc.Bytes(), &r); err == nil && r.ID != "" {
			res[r.ID] = &r
		}
	}
	fmt.Printf("megatron: %d checks in one process, %.0f s\n", len(res), time.Since(start).Seconds())
	return res, nil
}

// kitEnvDir is a kit's env dir as its setup.sh chooses it: $VAR, else
// ${XDG_CACHE_HOME:-~/.cache}/pipette-frameworks/KIT.
func kitEnvDir(envVar, kit string) string {
	if d := os.Getenv(envVar); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "pipette-frameworks", kit)
}
