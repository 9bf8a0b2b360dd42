package conformance

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/dskit"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// dsEnv is the DeepSpeed kit's environment (its env.list) and interpreter.
func dsEnv(t *testing.T) (python, envList string, env []string) {
	kit, err := dskit.Find()
	if err != nil {
		t.Fatal(err)
	}
	return kit.Python, kit.EnvList, kit.Env
}

type dsDerived struct {
	ID     string `json:"id"`
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Train  int    `json:"train_batch_size"`
	Micro  int    `json:"train_micro_batch_size_per_gpu"`
	GAS    int    `json:"gradient_accumulation_steps"`
	Stage  int    `json:"zero_stage"`
	OffOpt string `json:"offload_optimizer"`
	OffPar string `json:"offload_param"`
	// Set names the values above the file itself sets (the rest DeepSpeed
	// derived or defaulted).
	Set []string `json:"set"`
}

func (d *dsDerived) String() string {
	return fmt.Sprintf("train %d = micro %d x accumulation %d x DP, ZeRO-%d, offload optimizer %s param %s", d.Train, d.Micro, d.GAS, d.Stage, d.OffOpt, d.OffPar)
}

// checkDSConfigs runs DeepSpeed's own DeepSpeedConfig on each {id, path, dp}.
func checkDSConfigs(t *testing.T, kitDir string, reqs []map[string]any) map[string]*dsDerived {
	python, _, env := dsEnv(t)
	var in bytes.Buffer
	for _, r := range reqs {
		b, _ := json.Marshal(r)
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command(python, filepath.Join(kitDir, "ds_config_check.py"))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("DeepSpeed config check: %v", err)
	}
	res := map[string]*dsDerived{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var d dsDerived
		if json.Unmarshal(sc.Bytes(), &d) == nil && d.ID != "" {
			res[d.ID] = &d
		}
	}
	return res
}

// argInt is the value of --name N among a script's arguments (def if absent).
func argInt(args []string, name string, def int) int {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
		if a == name && i+1 < len(args) {
			if n, err := strconv.Atoi(args[i+1]); err == nil {
				return n
			}
		}
	}
	return def
}

// deepSpeedConfigs: every DeepSpeed config a corpus line passes is read by
// DeepSpeed's own config class at the line's data-parallel size; every
// config the launcher generates or fills for it (in the dry run's files) is
// read too and must derive the same batch sizes, ZeRO stage and offload.
// Each line is also planned on cluster files (dsplanned_test.go): the
// config its ranks read must derive what the plan reports.
func (h *harness) deepSpeedConfigs(t *testing.T) {
	var reqs []map[string]any
	type pair struct{ name, user, gen string }
	var pairs []pair
	var planned []*plannedConfig
	for _, s := range h.sources {
		for i := range s.Lines {
			l := &s.Lines[i]
			if l.Expect.DSConfig == "" {
				continue
			}
			root := t.TempDir()
			p, err := s.Prepare(h.corpusDir, l, root)
			if err != nil {
				t.Fatal(err)
			}
			dp := l.Expect.WorldSize / (argInt(p.ScriptArgs, "--tensor-model-parallel-size", 1) * argInt(p.ScriptArgs, "--pipeline-model-parallel-size", 1) * argInt(p.ScriptArgs, "--ds-sequence-parallel-size", 1))
			user := filepath.Join(p.Dir, p.Line.Expect.DSConfig)
			if filepath.IsAbs(p.Line.Expect.DSConfig) {
				user = p.Line.Expect.DSConfig
			}
			reqs = append(reqs, map[string]any{"id": "user:" + l.Name, "path": user, "dp": dp})
			pr := pair{name: l.Name, user: "user:" + l.Name}
			if j, err := h.dryRun(p); err == nil {
				for k, f := range j.Files {
					if strings.HasSuffix(f.Path, ".json") && strings.Contains(f.Content, "zero_optimization") {
						gen := filepath.Join(root, fmt.Sprintf("generated-%d.json", k))
						if err := os.WriteFile(gen, []byte(f.Content), 0o644); err != nil {
							t.Fatal(err)
						}
						reqs = append(reqs, map[string]any{"id": "gen:" + l.Name, "path": gen, "dp": dp})
						pr.gen = "gen:" + l.Name
					}
				}
			}
			pairs = append(pairs, pr)
			for _, which := range planClusters {
				pc, req := h.planLine(t, s, l, which)
				planned = append(planned, pc)
				if req != nil {
					reqs = append(reqs, req)
				}
			}
		}
	}
	res := checkDSConfigs(t, h.kitDir, reqs)
	accepted, same, gens := 0, 0, 0
	for _, p := range pairs {
		u := res[p.user]
		switch {
		case u == nil:
			t.Errorf("%s: no result from DeepSpeed's config class", p.name)
			continue
		case u.OK:
			accepted++
			t.Logf("%s: DeepSpeed accepts the user's config: %s", p.name, u)
		default:
			t.Logf("%s: DeepSpeed refuses the user's config as written (HF Trainer fills \"auto\" first): %s", p.name, u.Error)
		}
		if p.gen == "" {
			continue
		}
		gens++
		var verdict error
		g := res[p.gen]
		switch {
		case g == nil:
			verdict = fmt.Errorf("no result from DeepSpeed's config class for the generated config")
		case !g.OK:
			verdict = fmt.Errorf("DeepSpeed refuses the config pipette-launch generated: %s", g.Error)
		case u.OK && (g.Train != u.Train || g.Micro != u.Micro || g.GAS != u.GAS || g.Stage != u.Stage || g.OffOpt != u.OffOpt || g.OffPar != u.OffPar):
			verdict = fmt.Errorf("the generated config derives %s, the user's %s", g, u)
		}
		why, expected := dsConfigExpectedFailures[p.name]
		switch {
		case verdict == nil && expected:
			same++
			t.Errorf("%s: its generated config passes now: remove it from dsConfigExpectedFailures (%s)", p.name, why)
		case verdict == nil:
			same++
		case expected:
			t.Logf("expected failure %s [%s]: %v", p.name, why, verdict)
		default:
			t.Errorf("%s: %v", p.name, verdict)
		}
	}
	var names []string
	for _, p := range pairs {
		if p.gen != "" {
			names = append(names, p.name)
		}
	}
	checkListed(t, dsConfigExpectedFailures, names, "dsConfigExpectedFailures")
	planOK, rendered, renderedOK := reportPlanned(t, planned, res)
	fmt.Printf("deepspeed configs: %d/%d user configs accepted by DeepSpeed; %d/%d generated configs accepted and equal (torchrun order %d/%d, planned %d/%d); planned: %d/%d lines x %s: DeepSpeed derives what the plan reports\n",
		accepted, len(pairs), same+renderedOK, gens+rendered, same, gens, renderedOK, rendered, planOK, len(planned), strings.Join(planClusters, "/"))
}

// treeState is every path under dir with its mode and content's hash.
func treeState(t *testing.T, dir string) map[string]string {
	st := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		st[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// treeDiff names what a launch created, changed or removed.
func treeDiff(before, after map[string]string) string {
	var d []string
	for p, v := range after {
		if w, ok := before[p]; !ok {
			d = append(d, "created "+p)
		} else if w != v {
			d = append(d, "changed "+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			d = append(d, "removed "+p)
		}
	}
	sort.Strings(d)
	if len(d) > 4 {
		d = append(d[:4], fmt.Sprintf("and %d more", len(d)-4))
	}
	return strings.Join(d, ", ")
}

type dsJob struct {
	name   string
	config string   // the user's ds.json
	flags  []string // pipette-launch's flags
	script string   // kit script: example_train.py (frameworks) or ds_styles.py (kit/)
	args   []string // the script's arguments
	// want: what the engine must have used.
	train, micro, gas, stage int
	offload                  string
	// ranks that report (default 2); dir is the launch directory (default a
	// fresh one; the test-bed's hosts need one under /var/tmp).
	ranks int
	dir   string
	// scriptDir, when set, holds the script instead of the kit: the
	// test-bed's hosts each have their own /tmp, and the kit may sit
	// under /tmp (a CI clone with ../shared beside it).
	scriptDir string
	// dsError, when set, is the error DeepSpeed itself stops the job with
	// on the CPU (ZeRO-3 with gloo): the job passes when every rank stops
	// with it, the launch having done its part.
	dsError string
}

// deepSpeedJobs launches real DeepSpeed training through pipette-launch:
// each rank prints what DeepSpeed's engine used (DS_ENGINE json), compared
// with the user's config; the launch directory must be left as it was.
func (h *harness) deepSpeedJobs(t *testing.T) {
	python, envList, _ := dsEnv(t)
	opt := `"optimizer": {"type": "Adam", "params": {"lr": 0.001}}`
	jobs := []dsJob{
		{name: "standalone-zero0", config: `{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, ` + opt + `}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "example_train.py", args: []string{"--deepspeed_config", "ds.json"},
			train: 4, micro: 2, gas: 1, stage: 0, offload: "none"},
		{name: "zero1", config: `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, ` + opt + `, "zero_optimization": {"stage": 1}}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "example_train.py", args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			train: 8, micro: 2, gas: 2, stage: 1, offload: "none"},
		{name: "zero2-cpu-offload", config: `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, ` + opt + `, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "example_train.py", args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			train: 8, micro: 2, gas: 2, stage: 2, offload: "cpu"},
		{name: "zero3", config: `{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, ` + opt + `, "zero_optimization": {"stage": 3}}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "example_train.py", args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			dsError: "ProcessGroupGloo does not support reduce_scatter"},
		{name: "auto-values", config: `{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": "auto", ` + opt + `, "zero_optimization": {"stage": 1}}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "example_train.py", args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			train: 4, micro: 2, gas: 1, stage: 1, offload: "none"},
		{name: "hf-style-deepspeed-file", config: `{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", ` + opt + `, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "ds_styles.py", args: []string{"--style", "hf", "--deepspeed", "ds.json", "--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "2"},
			train: 8, micro: 2, gas: 2, stage: 2, offload: "cpu"},
		{name: "script-passes-config", config: `{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, ` + opt + `, "zero_optimization": {"stage": 2}}`,
			flags: []string{"--standalone", "--nproc-per-node", "2"}, script: "ds_styles.py", args: []string{"--style", "config", "--ds-file", "ds.json", "--deepspeed"},
			train: 4, micro: 2, gas: 1, stage: 2, offload: "none"},
		{name: "hosts-localhost-two-ranks", config: `{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1, ` + opt + `, "zero_optimization": {"stage": 1}}`,
			flags: []string{"--hosts", "localhost", "--nproc-per-node", "2"}, script: "example_train.py", args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			train: 4, micro: 1, gas: 2, stage: 1, offload: "none"},
	}
	jobs = append(jobs, h.testbedJobs(t, opt)...)
	passed := 0
	for k, j := range jobs {
		err := h.runDSJob(t, j, python, envList, 29611+k)
		why, expected := deepSpeedJobExpectedFailures[j.name]
		switch {
		case err == nil && expected:
			passed++
			t.Errorf("job %s passes now: remove it from deepSpeedJobExpectedFailures (%s)", j.name, why)
		case err == nil:
			passed++
			t.Logf("job %s: the engine used the user's config", j.name)
		case expected:
			t.Logf("expected failure, job %s [%s]: %v", j.name, why, err)
		default:
			t.Errorf("job %s: %v", j.name, err)
		}
	}
	var names []string
	for _, j := range jobs {
		names = append(names, j.name)
	}
	checkListed(t, deepSpeedJobExpectedFailures, names, "deepSpeedJobExpectedFailures")
	fmt.Printf("deepspeed jobs: %d/%d passed (%d DeepSpeed jobs)\n", passed, len(jobs), len(jobs))
}

func (h *harness) runDSJob(t *testing.T, j dsJob, python, envList string, port int) error {
	dir := j.dir
	if dir == "" {
		dir = t.TempDir()
	}
	if j.ranks == 0 {
		j.ranks = 2
	}
	if err := os.WriteFile(filepath.Join(dir, "ds.json"), []byte(j.config), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(h.frameworks, "deepspeed", j.script)
	if j.script == "ds_styles.py" {
		script = filepath.Join(h.kitDir, j.script)
	}
	if j.scriptDir != "" {
		script = filepath.Join(j.scriptDir, j.script)
	}
	before := treeState(t, dir)
	args := append(append(append([]string(nil), j.flags...), "--python", python, "--master-port", strconv.Itoa(port), "--env-file", envList, script), j.args...)
	args = append(args, "--steps", "2")
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("job %s: %.0f s", j.name, time.Since(start).Seconds())
	var problems []string
	if diff := treeDiff(before, treeState(t, dir)); diff != "" {
		problems = append(problems, "the launch directory changed: "+diff)
	}
	switch {
	case j.dsError != "":
		if runErr == nil || strings.Count(out.String(), j.dsError) < j.ranks {
			problems = append(problems, fmt.Sprintf("want every rank stopped by DeepSpeed's %q; exit %v: %s", j.dsError, runErr, lastLines(out.String(), 3)))
		}
	case runErr != nil:
		problems = append(problems, fmt.Sprintf("pipette-launch: %v: %s", runErr, lastLines(out.String(), 3)))
	default:
		problems = append(problems, checkReports(j, out.String())...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// checkReports compares every rank's DS_ENGINE report with the user's
// config.
func checkReports(j dsJob, out string) []string {
	var reports []map[string]any
	for _, l := range strings.Split(out, "\n") {
		if _, js, ok := strings.Cut(l, "DS_ENGINE "); ok {
			var r map[string]any
			if json.Unmarshal([]byte(js), &r) == nil {
				reports = append(reports, r)
			}
		}
	}
	if len(reports) != j.ranks {
		return []string{fmt.Sprintf("%d ranks reported DS_ENGINE, want %d", len(reports), j.ranks)}
	}
	want := fmt.Sprintf("train %d micro %d gas %d ZeRO-%d offload %s", j.train, j.micro, j.gas, j.stage, j.offload)
	for _, r := range reports {
		got := fmt.Sprintf("train %v micro %v gas %v ZeRO-%v offload %v", r["train_batch_size"], r["train_micro_batch_size_per_gpu"], r["gradient_accumulation_steps"], r["zero_stage"], r["offload_optimizer_device"])
		if got != want {
			return []string{fmt.Sprintf("rank %v: the engine used %s; the user's config says %s", r["rank"], got, want)}
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// testbedJobs are the jobs on the 4-host test-bed (network namespaces with
// their own sshd, 2 ranks per host): DeepSpeed's hostfile, and a plan made
// on a cluster file naming the same hosts. PIPETTE_TESTBED_LOCK, when set,
// names a lock file held while the test-bed is up (helpers sharing one
// machine serialize test-bed use on it).
func (h *harness) testbedJobs(t *testing.T, opt string) []dsJob {
	if lock := os.Getenv("PIPETTE_TESTBED_LOCK"); lock != "" {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
	var spec testbed.Spec
	for i := 1; i <= 4; i++ {
		spec.Hosts = append(spec.Hosts, testbed.HostSpec{Name: fmt.Sprintf("node%d", i)})
	}
	tb := testbed.New(t, spec)
	ssh := []string{"--ssh-config", tb.SSHConfigFile, "--known-hosts", tb.KnownHostsFile, "--identity", tb.KeyFile}
	launchDir := func() string {
		d, err := os.MkdirTemp("/var/tmp", "pipette-conformance-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	// The hosts read the script where the job names it: a copy outside
	// /tmp, which each test-bed host has to itself.
	scriptDir := launchDir()
	src, err := os.ReadFile(filepath.Join(h.frameworks, "deepspeed", "example_train.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scriptDir, "example_train.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(cluster, []byte(`clusters:
  - name: bed
    hosts: node[1-4]
    gpus_per_host: 2
    gpu:
      model: A100-80GB-SXM
    nics:
      - type: ethernet
        count: 1
        rate_gbit_per_s: 10
    host_memory_gib: 64
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, ` + opt + `, "zero_optimization": {"stage": 1}}`
	return []dsJob{
		{name: "testbed-hostfile-4x2", config: cfg, dir: launchDir(), ranks: 8,
			flags:  append([]string{"--hostfile", tb.HostsFile, "--nproc-per-node", "2"}, ssh...),
			script: "example_train.py", scriptDir: scriptDir, args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			train: 16, micro: 2, gas: 1, stage: 1, offload: "none"},
		{name: "testbed-planned-cluster-file", config: cfg, dir: launchDir(), ranks: 8,
			flags:  append([]string{"--cluster", cluster}, ssh...),
			script: "example_train.py", scriptDir: scriptDir, args: []string{"--deepspeed", "--deepspeed_config", "ds.json"},
			train: 16, micro: 2, gas: 1, stage: 1, offload: "none"},
	}
}
