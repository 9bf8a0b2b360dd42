// Package corpus reads the conformance corpus: launch lines copied unchanged
// from public repositories (torchrun, DeepSpeed's launcher,
// torch.distributed.launch/run), each with the stored copy of the script it
// comes from, and the line converted as a user would type it for
// pipette-launch.
//
// A line is converted by running the stored script itself (for a line of a
// document, the line alone) under bash in an
// empty sandbox, with the launcher commands replaced by shell functions that
// record their arguments: the shell expands the variables exactly as the
// script defines them, and the recorded arguments, after the launcher's
// name, are the converted line. Files the script writes (a generated
// ds_config.json) are captured from the sandbox the same way.
package corpus

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Source is one corpus file: one script of one public repository at one
// commit, and the launch lines taken from it.
type Source struct {
	Repository string `yaml:"repository"`
	Commit     string `yaml:"commit"`
	Path       string `yaml:"path"`
	// Note says anything a reader needs about the source (licence, why
	// these arguments).
	Note  string `yaml:"note,omitempty"`
	Lines []Line `yaml:"lines"`

	// File is the corpus file this was read from.
	File string `yaml:"-"`
}

// Line is one launch line of a Source.
type Line struct {
	// Name is unique across the corpus; expected-failure lists use it.
	Name string `yaml:"name"`
	// Family groups lines for reports (megatron-gpt3, deepspeed-chat, ...).
	Family string `yaml:"family"`
	// Original is the launch line exactly as the script has it (continuation
	// lines included); the test checks that the stored script contains it.
	Original string `yaml:"original"`
	// Run says how the script is run to expand its variables.
	Run Run `yaml:"run"`
	// UserFlags are flags the user adds after the launcher's name, where the
	// original launcher learns the same from where it runs: the host list of
	// a multi-node torchrun line (torchrun runs once per node). Never part of
	// Original.
	UserFlags []string `yaml:"user_flags,omitempty"`
	// Files are files of the launch directory the line reads (paths relative
	// to Run.Cwd): "generated" takes the file the script wrote in the
	// sandbox, "repo:PATH" the repository's file stored under src/,
	// "text:CONTENT" a file of the user's machine the line expects (the
	// hostfile DeepSpeed reads).
	Files map[string]string `yaml:"files,omitempty"`
	// Expect is what the original launcher would do.
	Expect Expect `yaml:"expect"`
	// Converted is the line as the user types it, from Run (regenerated and
	// checked by the corpus test; -update rewrites it).
	Converted []string `yaml:"converted"`
	// Exported is the environment the script exported for the launcher
	// (CUDA_DEVICE_MAX_CONNECTIONS=1, ...), which the ranks inherit.
	Exported map[string]string `yaml:"exported,omitempty"`
	// Generated holds the content of the Files marked "generated" (same
	// regeneration as Converted).
	Generated map[string]string `yaml:"generated,omitempty"`
}

// Run is how the stored script is run to expand a line.
type Run struct {
	// Cwd is the directory, relative to the repository's root, the script is
	// run from (as its comments or README say); "" is the root.
	Cwd string `yaml:"cwd,omitempty"`
	// Args are the script's positional parameters; Env its environment
	// (nothing else of the caller's environment is passed, but PATH and HOME).
	Args []string          `yaml:"args,omitempty"`
	Env  map[string]string `yaml:"env,omitempty"`
	// Call picks the launcher call when the script makes several (0: first).
	Call int `yaml:"call,omitempty"`
	// Touch are files (relative to Cwd) created empty before the run, for
	// scripts that check that something exists.
	Touch []string `yaml:"touch,omitempty"`
	// Commands stand in for commands of the machine the script expects
	// (nvidia-smi on an 8-GPU host, hostname, ds_ssh): name -> bash script
	// body, put first on PATH.
	Commands map[string]string `yaml:"commands,omitempty"`
}

// Expect is what the original launcher gives the job.
type Expect struct {
	// Launcher is torchrun, deepspeed or torch.distributed.launch.
	Launcher string `yaml:"launcher"`
	// Script is the training script (or module, or program with
	// --no-python) as the converted line names it.
	Script string `yaml:"script"`
	// WorldSize and Nodes: ranks in all, and hosts.
	WorldSize int `yaml:"world_size"`
	Nodes     int `yaml:"nodes"`
	// LocalRankArg: the launcher passes --local_rank=N right after the
	// script (DeepSpeed without --no_local_rank, torch.distributed.launch
	// without --use_env).
	LocalRankArg bool `yaml:"local_rank_arg"`
	// Module: the script runs as python -m; NoPython: as a program.
	Module   bool `yaml:"module,omitempty"`
	NoPython bool `yaml:"no_python,omitempty"`
	// Megatron: rank 0's argv and environment go to Megatron-LM's
	// parse_args + validate_args in make conformance; GPUCapability is the
	// GPU the line is written for (8.0 A100, 9.0 H100), Megatron reads it.
	Megatron      bool    `yaml:"megatron,omitempty"`
	GPUCapability float64 `yaml:"gpu_capability,omitempty"`
	// DSConfig is the DeepSpeed config file the line passes (relative to
	// Run.Cwd), checked by DeepSpeed's own config class in make conformance.
	DSConfig string `yaml:"ds_config,omitempty"`
	// Refused is set for a line the framework itself refuses at the world
	// size it is launched with: the original launcher would start every rank
	// and Megatron would stop them all at start-up. make conformance checks
	// that Megatron refuses torchrun's rank 0 of the original line;
	// pipette-launch refuses it before starting anything, with an error
	// containing this text.
	Refused string `yaml:"refused,omitempty"`
}

// SourcePath is where the stored copy of a Source's script is, relative to
// the corpus directory.
func (s *Source) SourcePath() string {
	return filepath.Join("src", s.Repository, s.Path)
}

var hex40 = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Load reads every *.yaml of dir, sorted by name, and checks each entry's
// form (not its conversion: see Expand).
func Load(dir string) ([]*Source, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Source
	seen := map[string]string{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		s := &Source{File: name}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(s); err != nil {
			return nil, fmt.Errorf("corpus file %s: %w", name, err)
		}
		if err := s.check(dir); err != nil {
			return nil, fmt.Errorf("corpus file %s: %w", name, err)
		}
		for _, l := range s.Lines {
			if prev, ok := seen[l.Name]; ok {
				return nil, fmt.Errorf("corpus file %s: line name %q is also used in %s", name, l.Name, prev)
			}
			seen[l.Name] = name
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("corpus directory %s holds no *.yaml file", dir)
	}
	return out, nil
}

func (s *Source) check(dir string) error {
	if !strings.Contains(s.Repository, "/") || s.Path == "" || !hex40.MatchString(s.Commit) {
		return fmt.Errorf("want repository owner/name, path and a 40-hex commit; have %q %q %q", s.Repository, s.Path, s.Commit)
	}
	script, err := os.ReadFile(filepath.Join(dir, s.SourcePath()))
	if err != nil {
		return fmt.Errorf("stored copy of the script: %w", err)
	}
	if len(s.Lines) == 0 {
		return fmt.Errorf("no lines")
	}
	for _, l := range s.Lines {
		if l.Name == "" || l.Expect.Script == "" || l.Expect.WorldSize < 1 || l.Expect.Nodes < 1 {
			return fmt.Errorf("line %q: want name, expect.script, expect.world_size and expect.nodes", l.Name)
		}
		if !slices.Contains([]string{"torchrun", "deepspeed", "torch.distributed.launch"}, l.Expect.Launcher) {
			return fmt.Errorf("line %q: expect.launcher %q: want torchrun, deepspeed or torch.distributed.launch", l.Name, l.Expect.Launcher)
		}
		if strings.TrimSpace(l.Original) == "" || !bytes.Contains(script, []byte(l.Original)) {
			return fmt.Errorf("line %q: original is not, character for character, in the stored script %s", l.Name, s.SourcePath())
		}
	}
	return nil
}

// Argv is the converted line split where the script starts: the launcher's
// flags (user flags first) and the script's own arguments.
func (l *Line) Argv() (launcherFlags []string, scriptArgs []string, err error) {
	if len(l.Converted) == 0 || l.Converted[0] != "pipette-launch" {
		return nil, nil, fmt.Errorf("line %s: converted line does not start with pipette-launch", l.Name)
	}
	i := slices.Index(l.Converted[1:], l.Expect.Script)
	if i < 0 {
		return nil, nil, fmt.Errorf("line %s: script %q is not in the converted line", l.Name, l.Expect.Script)
	}
	i++
	return append(slices.Clone(l.UserFlags), l.Converted[1:i]...), slices.Clone(l.Converted[i+1:]), nil
}

// CommandLine is what pipette-launch is given: launcher flags, script,
// script arguments (without the program name).
func (l *Line) CommandLine() ([]string, error) {
	flags, args, err := l.Argv()
	if err != nil {
		return nil, err
	}
	return append(append(flags, l.Expect.Script), args...), nil
}

// launcherShims replace the launcher commands with functions that record
// their arguments (NUL-separated, one record per call ended by \x1e) into
// $__CAPTURE, and leave every other command alone.
const launcherShims = `
__cap() { { printf '%s\0' "$@"; printf '\035'; env -0; printf '\036'; } >> "$__CAPTURE"; }
torchrun() { __cap torchrun "$@"; }
deepspeed() { __cap deepspeed "$@"; }
__py() {
  if [ "$1" = -m ] && { [ "$2" = torch.distributed.run ] || [ "$2" = torch.distributed.launch ]; }; then
    local m=$2; shift 2; __cap "$m" "$@"
  else
    __cap python "$@"
  fi
}
python() { __py "$@"; }
python3() { __py "$@"; }
export -f __cap torchrun deepspeed __py python python3
`

// Expand runs the stored script (under corpusDir/src) in a sandbox and
// returns the converted line (launcher name replaced by pipette-launch,
// see launcherName) of
// the chosen call, and the files the line names as "generated".
func (s *Source) Expand(corpusDir string, l *Line) (*Expansion, error) {
	sandbox, err := os.MkdirTemp("", "corpus-expand-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sandbox)
	// The repository's stored files (the script, and what it sources or
	// copies) at their places.
	repo := filepath.Join(sandbox, "repo")
	scriptPath := filepath.Join(repo, s.Path)
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(corpusDir, "src", s.Repository))); err != nil {
		return nil, fmt.Errorf("line %s: copying the stored repository files: %w", l.Name, err)
	}
	cwd := filepath.Join(repo, l.Run.Cwd)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return nil, err
	}
	for _, t := range l.Run.Touch {
		p := filepath.Join(cwd, t)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return nil, err
		}
	}
	bin := filepath.Join(sandbox, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	for name, body := range l.Run.Commands {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			return nil, err
		}
	}
	capture := filepath.Join(sandbox, "capture")
	rel, err := filepath.Rel(cwd, scriptPath)
	if err != nil {
		return nil, err
	}
	// The script runs as `bash script args`, as its users run it; the shims
	// come first through BASH_ENV, which non-interactive bash sources.
	shims := filepath.Join(sandbox, "shims.sh")
	if err := os.WriteFile(shims, []byte(launcherShims), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", append([]string{rel}, l.Run.Args...)...)
	if !strings.HasSuffix(s.Path, ".sh") {
		// A line of a document (README, tutorial): bash runs the line
		// alone, with the variables its text asks for in Run.Env.
		cmd = exec.Command("bash", append([]string{"-c", l.Original, rel}, l.Run.Args...)...)
	}
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox, "BASH_ENV=" + shims, "__CAPTURE=" + capture, "PWD=" + cwd}
	for k, v := range l.Run.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, runErr := cmd.CombinedOutput()
	raw, err := os.ReadFile(capture)
	if err != nil {
		return nil, fmt.Errorf("line %s: the script made no launcher call (%v): %s", l.Name, runErr, lastLines(out, 5))
	}
	var calls [][]string
	var envs []map[string]string
	for _, rec := range strings.Split(string(raw), "\x1e") {
		if rec == "" {
			continue
		}
		argsPart, envPart, _ := strings.Cut(rec, "\x1d")
		f := strings.Split(strings.TrimSuffix(argsPart, "\x00"), "\x00")
		if f[0] == "python" { // other python calls of the script
			continue
		}
		calls = append(calls, f)
		envs = append(envs, exportedEnv(envPart))
	}
	if l.Run.Call >= len(calls) {
		return nil, fmt.Errorf("line %s: run.call %d, but the script made %d launcher calls (%v): %s", l.Name, l.Run.Call, len(calls), runErr, lastLines(out, 5))
	}
	call := calls[l.Run.Call]
	want := map[string]string{"torchrun": "torchrun", "torch.distributed.run": "torchrun", "deepspeed": "deepspeed", "torch.distributed.launch": "torch.distributed.launch"}[call[0]]
	if want != l.Expect.Launcher {
		return nil, fmt.Errorf("line %s: call %d is %s, expect.launcher says %s", l.Name, l.Run.Call, call[0], l.Expect.Launcher)
	}
	// The sandbox's own path, where a script names $PWD or $(pwd), reads
	// as the fixed SandboxRoot so that a conversion is the same everywhere.
	x := &Expansion{Converted: append([]string{"pipette-launch"}, launcherName[want]...), Exported: envs[l.Run.Call]}
	for _, a := range call[1:] {
		x.Converted = append(x.Converted, strings.ReplaceAll(a, repo, SandboxRoot))
	}
	for k, v := range x.Exported {
		x.Exported[k] = strings.ReplaceAll(v, repo, SandboxRoot)
	}
	gen := map[string]string{}
	for name, from := range l.Files {
		if from != "generated" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(cwd, name))
		if err != nil {
			return nil, fmt.Errorf("line %s: file %s marked generated: the script did not write it: %w", l.Name, name, err)
		}
		gen[name] = string(b)
	}
	if len(gen) > 0 {
		x.Generated = gen
	}
	return x, nil
}

// launcherName is what replaces each launcher's name in a converted line,
// as docs/launcher-flags.md tells users: torchrun's is pipette-launch's
// default; DeepSpeed's launcher and torch.distributed.launch are named
// with --as (what they add to the script's arguments differs, and a
// line's flags need not tell: deepspeed --module x, --nproc_per_node).
var launcherName = map[string][]string{
	"deepspeed":                {"--as", "deepspeed"},
	"torch.distributed.launch": {"--as", "torch.distributed.launch"},
}

// SandboxRoot stands for the repository's root where a converted line
// names it by absolute path; Setup's caller replaces it with the launch
// directory's root.
const SandboxRoot = "/workspace/repo"

// Expansion is what running a line's script gives.
type Expansion struct {
	Converted []string
	Exported  map[string]string
	Generated map[string]string
}

// shellOwn are variables of the sandbox or of bash itself, not the script's.
var shellOwn = map[string]bool{"PATH": true, "HOME": true, "BASH_ENV": true, "__CAPTURE": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// exportedEnv reads env -0's output: what the script (or its caller,
// Run.Env) exported for the launcher.
func exportedEnv(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || shellOwn[k] || strings.HasPrefix(k, "BASH_FUNC_") {
			continue
		}
		m[k] = v
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Setup writes the launch directory of a line under root: the
// repository's layout down to Run.Cwd, an empty stand-in for the script
// (pipette-launch checks that it exists; its content is never read by a
// dry run), and the files the line reads. It returns the directory to
// launch from.
func (s *Source) Setup(corpusDir string, l *Line, root string) (string, error) {
	cwd := filepath.Join(root, l.Run.Cwd)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return "", err
	}
	write := func(rel string, b []byte) error {
		p := filepath.Join(cwd, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	}
	if !l.Expect.Module {
		if err := write(l.Expect.Script, nil); err != nil {
			return "", err
		}
	}
	for name, from := range l.Files {
		var b []byte
		switch {
		case from == "generated":
			c, ok := l.Generated[name]
			if !ok {
				return "", fmt.Errorf("line %s: generated file %s is not recorded (run the corpus test with -update)", l.Name, name)
			}
			b = []byte(c)
		case strings.HasPrefix(from, "text:"):
			b = []byte(strings.TrimPrefix(from, "text:"))
		case strings.HasPrefix(from, "repo:"):
			var err error
			b, err = os.ReadFile(filepath.Join(corpusDir, "src", s.Repository, strings.TrimPrefix(from, "repo:")))
			if err != nil {
				return "", fmt.Errorf("line %s: file %s: %w", l.Name, name, err)
			}
		default:
			return "", fmt.Errorf("line %s: file %s: source %q: want generated, repo:PATH or text:CONTENT", l.Name, name, from)
		}
		if err := write(name, b); err != nil {
			return "", err
		}
	}
	return cwd, nil
}

// Prepared is a line made ready to run in a launch directory.
type Prepared struct {
	// Dir is the directory to launch from; Args what pipette-launch is
	// given there (launcher flags, script, script arguments), ScriptArgs
	// the script's own; Line the line with SandboxRoot replaced by the
	// launch directory's root.
	Dir        string
	Args       []string
	ScriptArgs []string
	Line       Line
	// Placed maps each file the line reads at an absolute path on the
	// user's machine (DeepSpeed's default hostfile /job/hostfile) to where
	// Prepare wrote it: under root, never at that path itself. The caller
	// points pipette-launch there (run.Options.DeepSpeedHostfile).
	Placed map[string]string
}

// Prepare lays out a line's launch directory under root (see Setup),
// writes the files it reads at absolute paths under root/absolute/ (see
// Prepared.Placed; an argument naming one names the placed file), and
// replaces SandboxRoot with root.
func (s *Source) Prepare(corpusDir string, l *Line, root string) (*Prepared, error) {
	lc := *l
	lc.Files = map[string]string{}
	abs := map[string]string{}
	for name, from := range l.Files {
		if filepath.IsAbs(name) {
			abs[name] = from
		} else {
			lc.Files[name] = from
		}
	}
	lc.Expect.Script = strings.ReplaceAll(l.Expect.Script, SandboxRoot, root)
	if lc.Expect.DSConfig != "" {
		lc.Expect.DSConfig = strings.ReplaceAll(l.Expect.DSConfig, SandboxRoot, root)
	}
	placed, err := placeAbsoluteFiles(abs, filepath.Join(root, "absolute"))
	if err != nil {
		return nil, fmt.Errorf("line %s: %w", l.Name, err)
	}
	lc.Converted = nil
	for _, a := range l.Converted {
		a = strings.ReplaceAll(a, SandboxRoot, root)
		// A line that names such a file (--hostfile /job/hostfile) reads
		// it where it was placed.
		for name, p := range placed {
			if a == name || strings.HasSuffix(a, "="+name) {
				a = strings.TrimSuffix(a, name) + p
			}
		}
		lc.Converted = append(lc.Converted, a)
	}
	if script := filepath.Clean(lc.Expect.Script); filepath.IsAbs(script) && strings.HasPrefix(script, root) {
		if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(script, nil, 0o644); err != nil {
			return nil, err
		}
	}
	dir, err := s.Setup(corpusDir, &lc, root)
	if err != nil {
		return nil, err
	}
	flags, args, err := lc.Argv()
	if err != nil {
		return nil, err
	}
	return &Prepared{Dir: dir, Args: append(append(flags, lc.Expect.Script), args...), ScriptArgs: args, Line: lc, Placed: placed}, nil
}

// placeAbsoluteFiles writes text:CONTENT files meant for absolute paths
// under under/ (/job/hostfile -> under/job/hostfile) and returns where
// each went.
func placeAbsoluteFiles(files map[string]string, under string) (map[string]string, error) {
	placed := map[string]string{}
	for name, from := range files {
		content, ok := strings.CutPrefix(from, "text:")
		if !ok {
			return nil, fmt.Errorf("file %s: an absolute path needs text:CONTENT", name)
		}
		p := filepath.Join(under, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
		placed[name] = p
	}
	return placed, nil
}

// FakeNvidiaSMI writes into dir an nvidia-smi that lists n GPUs (-L), as
// on the 8-GPU machine the corpus lines were written for; callers put dir
// first on PATH.
func FakeNvidiaSMI(dir string, n int) error {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for i := range n {
		fmt.Fprintf(&b, "echo 'GPU %d: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-00000000000%d)'\n", i, i)
	}
	return os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(b.String()), 0o755)
}
