package run

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// envList collects repeated --env KEY=VALUE flags as given: unlike a
// StringSliceFlag it does not split on commas (NCCL_IB_HCA=mlx5_0,mlx5_1).
type envList struct{ vals []string }

func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	e.vals = append(e.vals, v)
	return nil
}

// Get makes envList a flag.Getter (what urfave/cli's Context.Value
// needs): the values as given, one per --env.
func (e *envList) Get() any { return slices.Clone(e.vals) }

func (e *envList) String() string {
	if e == nil {
		return ""
	}
	return strings.Join(e.vals, " ")
}

// envSource is a set of explicit variables and where they came from.
type envSource struct {
	name string
	vars []job.EnvVar
}

// explicitEnv gathers the variables the user set for the ranks, lowest
// precedence first: DeepSpeed's .deepspeed_env (the launch directory's,
// else the home directory's; DS_ENV_FILE renames it, as DeepSpeed does),
// --env-file, then --env. Later sources win.
func explicitEnv(o *Options) ([]job.EnvVar, []envSource, error) {
	var sources []envSource
	if path := deepspeedEnvFile(o); path != "" {
		vars, err := readEnvFile(path)
		if err != nil {
			return nil, nil, err
		}
		sources = append(sources, envSource{path, vars})
	}
	if o.EnvFile != "" {
		vars, err := readEnvFile(o.EnvFile)
		if err != nil {
			return nil, nil, err
		}
		sources = append(sources, envSource{"--env-file " + o.EnvFile, vars})
	}
	var flags []job.EnvVar
	for _, kv := range o.EnvFlags {
		k, v, _ := strings.Cut(kv, "=")
		flags = append(flags, job.EnvVar{Name: k, Value: v})
	}
	if len(flags) > 0 {
		sources = append(sources, envSource{"--env", flags})
	}
	var all []job.EnvVar
	for _, s := range sources {
		if err := templates.CheckExplicitEnv(s.vars); err != nil {
			return nil, nil, cmdutil.InputErrorf("%s: %v", s.name, err)
		}
		all = append(all, s.vars...)
	}
	return all, sources, nil
}

// deepspeedEnvFile is the .deepspeed_env DeepSpeed's runner would read:
// DS_ENV_FILE (default .deepspeed_env) as a path from the launch
// directory, else in the home directory; "" when neither exists.
func deepspeedEnvFile(o *Options) string {
	getenv := cmdutil.EnvLookup(o.Env)
	name := getenv("DS_ENV_FILE")
	if name == "" {
		name = ".deepspeed_env"
	}
	candidates := []string{name}
	if home := getenv("HOME"); home != "" && !filepath.IsAbs(name) {
		candidates = append(candidates, filepath.Join(home, name))
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// readEnvFile reads KEY=VALUE lines, DeepSpeed's .deepspeed_env format:
// split at the first '=', both sides trimmed, the value taken literally
// (no quotes or expansion). Blank lines and # comments are skipped.
func readEnvFile(path string) ([]job.EnvVar, error) {
	data, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return nil, cmdutil.InputErrorf("env file: %v", err)
	}
	var vars []job.EnvVar
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, cmdutil.InputErrorf("env file %s:%d: %q is not KEY=VALUE", path, ln, line)
		}
		vars = append(vars, job.EnvVar{Name: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil, cmdutil.InputErrorf("env file %s: a line longer than 1 MiB: not a KEY=VALUE file", path)
	}
	if err := sc.Err(); err != nil {
		return nil, cmdutil.InputErrorf("env file %s: %v", path, err)
	}
	return vars, nil
}
