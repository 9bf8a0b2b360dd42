package run

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/conformance/corpus"
)

// corpusDir is the conformance corpus: public launch lines, unchanged, with
// the converted line a user types (conformance/corpus reads it).
const corpusDir = "../../../conformance/testdata/corpus"

// corpusExpectedFailures are the corpus lines that fail today, each with
// why. A listed line that passes fails the test until it is removed from
// here, so the list stays honest.
var corpusExpectedFailures = map[string]string{
	// DeepSpeed v0.14.4 refuses the tutorial's config as shown too: its
	// DeepSpeedConfig asserts "Either train_batch_size or
	// train_micro_batch_size_per_gpu needs to be provided" (checked with
	// the kit); pipette-launch refuses it before launch by the same rule.
	"deepspeed-doc-zeropp-4x16": "DeepSpeed refuses its config (neither train_batch_size nor train_micro_batch_size_per_gpu)",
}

// TestCorpusDryRun dry-runs every converted corpus line through the CLI and
// checks it against what the original launcher (torchrun, DeepSpeed's
// launcher, torch.distributed.launch) gives: every script argument reaches
// every rank unchanged and in order, nothing is added but what that launcher
// adds (--local_rank=N for DeepSpeed and torch.distributed.launch), and the
// world size, hosts and ranks are the same. This machine stands for an
// 8-GPU host (a stand-in nvidia-smi), as the lines that name no GPU count
// expect.
func TestCorpusDryRun(t *testing.T) {
	sources, corpusAbs := loadCorpus(t)
	fakeGPUs(t, 8)
	total, passed := 0, 0
	var unexpected, fixed []string
	for _, s := range sources {
		for i := range s.Lines {
			l := &s.Lines[i]
			total++
			err := dryRunCorpusLine(t, corpusAbs, s, l)
			why, expected := corpusExpectedFailures[l.Name]
			switch {
			case err == nil && expected:
				fixed = append(fixed, fmt.Sprintf("%s (listed as failing for: %s)", l.Name, why))
				passed++
			case err == nil:
				passed++
			case expected:
				t.Logf("expected failure %s [%s]: %v", l.Name, why, err)
			default:
				unexpected = append(unexpected, fmt.Sprintf("%s (%s): %v", l.Name, s.File, err))
			}
		}
	}
	fmt.Printf("corpus: %d/%d lines\n", passed, total)
	t.Logf("corpus: %d/%d lines (%d expected failures)", passed, total, len(corpusExpectedFailures))
	for _, u := range unexpected {
		t.Errorf("corpus line fails: %s", u)
	}
	for _, f := range fixed {
		t.Errorf("corpus line now passes: %s: remove it from corpusExpectedFailures", f)
	}
	for name := range corpusExpectedFailures {
		if !corpusHasLine(sources, name) {
			t.Errorf("corpusExpectedFailures names %q, which is no corpus line", name)
		}
	}
}

// loadCorpus reads the corpus and returns it with its absolute directory.
func loadCorpus(t *testing.T) ([]*corpus.Source, string) {
	t.Helper()
	sources, err := corpus.Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	return sources, abs
}

// prepareCorpusLine lays out the launch directory of the corpus line
// named name and makes it the working directory for the rest of the test.
func prepareCorpusLine(t *testing.T, name string) *corpus.Prepared {
	t.Helper()
	sources, abs := loadCorpus(t)
	for _, s := range sources {
		for i := range s.Lines {
			if s.Lines[i].Name != name {
				continue
			}
			p, err := s.Prepare(abs, &s.Lines[i], t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Chdir(p.Dir)
			for k, v := range p.Line.Exported {
				t.Setenv(k, v)
			}
			return p
		}
	}
	t.Fatalf("no corpus line %s", name)
	return nil
}

func corpusHasLine(sources []*corpus.Source, name string) bool {
	for _, s := range sources {
		for _, l := range s.Lines {
			if l.Name == name {
				return true
			}
		}
	}
	return false
}

// fakeGPUs puts an nvidia-smi first on PATH that lists n GPUs, as on the
// machine the corpus lines were written for.
func fakeGPUs(t *testing.T, n int) {
	dir := t.TempDir()
	if err := corpus.FakeNvidiaSMI(dir, n); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// dryRunCorpusLine runs one converted line with --dry-run --json in its
// launch directory and compares every rank with the original launcher's.
func dryRunCorpusLine(t *testing.T, corpusAbs string, s *corpus.Source, l *corpus.Line) (err error) {
	p, err := s.Prepare(corpusAbs, l, t.TempDir())
	if err != nil {
		return err
	}
	prev, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := os.Chdir(p.Dir); err != nil {
		return err
	}
	defer func() {
		if cerr := os.Chdir(prev); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for k, v := range l.Exported {
		if old, ok := os.LookupEnv(k); ok {
			defer os.Setenv(k, old)
		} else {
			defer os.Unsetenv(k)
		}
		os.Setenv(k, v)
	}
	// DeepSpeed's default hostfile is read where Prepare placed the line's
	// (none: nowhere), never at /job/hostfile on this machine.
	hostfile := func(o *Options) { o.DeepSpeedHostfile = p.Placed[launchline.DeepSpeedHostfile] }
	code, stdout, stderr := cmdtest.Run(testApp(hostfile), append([]string{"--dry-run", "--json"}, p.Args...)...)
	if want := p.Line.Expect.Refused; want != "" {
		// Megatron refuses the line at its world size (make conformance
		// checks it does): refusing before launch is the right answer.
		if code != 2 || !strings.Contains(stderr, want) {
			return fmt.Errorf("Megatron refuses this line, so pipette-launch must exit 2 with %q; exit %d: %s", want, code, firstLines(stderr, 3))
		}
		return nil
	}
	if code != 0 {
		return fmt.Errorf("exit %d: %s", code, firstLines(stderr, 3))
	}
	var job dryRunJSON
	if err := json.Unmarshal([]byte(stdout), &job); err != nil {
		return fmt.Errorf("dry run's JSON: %v", err)
	}
	if err := checkCorpusJob(&p.Line, &job, p.ScriptArgs); err != nil {
		return err
	}
	return checkThisMachine(p, &job)
}

// checkThisMachine: a one-node line that names no hosts runs on this
// machine, as torchrun and DeepSpeed's launcher (without a hostfile) run it,
// never on the embedded example cluster.
func checkThisMachine(p *corpus.Prepared, job *dryRunJSON) error {
	if p.Line.Expect.Nodes != 1 {
		return nil
	}
	for _, a := range p.Args[:len(p.Args)-len(p.ScriptArgs)-1] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if slices.Contains([]string{"hosts", "hostfile", "H", "cluster", "include", "exclude"}, name) {
			return nil
		}
	}
	local := []string{"localhost", "127.0.0.1"}
	if h, err := os.Hostname(); err == nil {
		local = append(local, h)
	}
	for _, h := range job.Hosts {
		if !slices.Contains(local, h.Name) && !slices.Contains(local, h.Address) {
			return fmt.Errorf("the line names no hosts, so it runs on this machine; the job runs on host %s (address %s)", h.Name, h.Address)
		}
	}
	return nil
}

// checkCorpusJob compares the rendered ranks with the original launcher's.
func checkCorpusJob(l *corpus.Line, job *dryRunJSON, scriptArgs []string) error {
	if len(job.Hosts) != l.Expect.Nodes {
		return fmt.Errorf("%d hosts, %s gives %d", len(job.Hosts), l.Expect.Launcher, l.Expect.Nodes)
	}
	seen := map[int]bool{}
	var problems []string
	for _, h := range job.Hosts {
		for _, r := range h.Ranks {
			seen[r.Rank] = true
			if p := checkCorpusRank(l, r.Rank, r.LocalRank, r.Argv, r.Env, scriptArgs); p != "" {
				problems = append(problems, fmt.Sprintf("rank %d on %s: %s", r.Rank, h.Name, p))
			}
		}
	}
	if len(seen) != l.Expect.WorldSize {
		return fmt.Errorf("%d ranks, %s gives %d", len(seen), l.Expect.Launcher, l.Expect.WorldSize)
	}
	for r := range l.Expect.WorldSize {
		if !seen[r] {
			return fmt.Errorf("no rank %d among %d ranks", r, len(seen))
		}
	}
	if len(problems) > 0 {
		more := ""
		if len(problems) > 2 {
			more = fmt.Sprintf(" (and %d more ranks)", len(problems)-2)
			problems = problems[:2]
		}
		return fmt.Errorf("%s%s", strings.Join(problems, "; "), more)
	}
	return nil
}

// checkCorpusRank checks one rank's argv and environment.
func checkCorpusRank(l *corpus.Line, rank, local int, argv []string, env []struct{ Name, Value string }, scriptArgs []string) string {
	e := map[string]string{}
	for _, kv := range env {
		e[kv.Name] = kv.Value
	}
	for k, want := range map[string]string{"WORLD_SIZE": strconv.Itoa(l.Expect.WorldSize), "RANK": strconv.Itoa(rank), "LOCAL_RANK": strconv.Itoa(local)} {
		if e[k] != want {
			return fmt.Sprintf("%s=%q, want %q", k, e[k], want)
		}
	}
	i := slices.Index(argv, l.Expect.Script)
	if i < 0 {
		return fmt.Sprintf("script %q is not in argv %q", l.Expect.Script, argv)
	}
	switch {
	case l.Expect.NoPython && i != 0:
		return fmt.Sprintf("--no-python: argv starts %q, want the program first", argv[:i+1])
	case l.Expect.Module && (i < 1 || argv[i-1] != "-m"):
		return fmt.Sprintf("module: argv %q does not run python -m %s", argv[:i+1], l.Expect.Script)
	}
	rest := argv[i+1:]
	if l.Expect.LocalRankArg {
		want := fmt.Sprintf("--local_rank=%d", local)
		alt := fmt.Sprintf("--local-rank=%d", local)
		if len(rest) == 0 || (rest[0] != want && !(l.Expect.Launcher == "torch.distributed.launch" && rest[0] == alt)) {
			return fmt.Sprintf("%s passes %s right after the script; argv after the script: %q", l.Expect.Launcher, want, head(rest, 3))
		}
		rest = rest[1:]
	}
	if !slices.Equal(rest, scriptArgs) {
		return fmt.Sprintf("script arguments differ from the line's: %s", argsDiff(scriptArgs, rest))
	}
	return ""
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// argsDiff names the first difference between the line's script arguments
// and what a rank got.
func argsDiff(want, got []string) string {
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Sprintf("at %d: got %q, want %q", i, head(got[i:], 3), head(want[i:], 3))
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("added at the end: %q", got[len(want):])
	}
	return fmt.Sprintf("missing at the end: %q", want[len(got):])
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(head(lines, n), " | ")
}
