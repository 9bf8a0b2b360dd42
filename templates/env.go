package templates

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// forwardedPrefixes are the launching shell's variables every rank gets:
// DeepSpeed's launcher exports (runner.py EXPORT_ENVS: NCCL, PYTHON, MV2,
// UCX, MLFLOW, matched as prefixes) plus CUDA_, TORCH_, HF_, WANDB_ and
// OMP_, which training scripts read the same way.
var forwardedPrefixes = []string{"NCCL", "PYTHON", "MV2", "UCX", "MLFLOW", "CUDA_", "TORCH_", "HF_", "WANDB_", "OMP_"}

// launcherOwned are the variables that say who a rank is; pipette-launch
// computes them per rank and nothing the user forwards or sets replaces
// them (a launching shell's CUDA_VISIBLE_DEVICES would put every host's
// ranks on the login node's GPU list).
var launcherOwned = map[string]bool{
	"RANK": true, "LOCAL_RANK": true, "WORLD_SIZE": true, "LOCAL_WORLD_SIZE": true,
	"GROUP_RANK": true, "GROUP_WORLD_SIZE": true, "ROLE_RANK": true, "ROLE_NAME": true, "ROLE_WORLD_SIZE": true,
	"MASTER_ADDR": true, "MASTER_PORT": true, "TORCHELASTIC_RUN_ID": true,
	"TORCHELASTIC_RESTART_COUNT": true, "TORCHELASTIC_MAX_RESTARTS": true,
	"CUDA_VISIBLE_DEVICES": true, "CUDA_DEVICE_ORDER": true, "LOCAL_SIZE": true, "CROSS_RANK": true, "CROSS_SIZE": true,
}

// CheckExplicitEnv rejects --env/env-file variables that would change who a
// rank is: those come from the launch's own flags (--master-addr,
// --nproc-per-node, ...).
func CheckExplicitEnv(vars []job.EnvVar) error {
	for _, v := range vars {
		if !job.ValidEnvName(v.Name) {
			return fmt.Errorf("%q is not a variable name (want letters, digits and _, not starting with a digit)", v.Name)
		}
		// The GPU list is the user's to give where the hosts' GPUs are
		// unknown (--hosts); the plan's placement keeps it otherwise.
		if launcherOwned[v.Name] && v.Name != "CUDA_VISIBLE_DEVICES" && v.Name != "CUDA_DEVICE_ORDER" {
			return fmt.Errorf("%s is set per rank by pipette-launch (torchrun's rank environment); use the launch flags instead of setting it", v.Name)
		}
	}
	return nil
}

func forwardedName(name string) bool {
	for _, p := range forwardedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Secret reports whether a variable's value must not be printed: its name
// contains TOKEN, KEY, SECRET or PASSWORD (any case).
func Secret(name string) bool {
	u := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "KEY", "SECRET", "PASSWORD"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// ShownValue is a variable's value as pipette-launch prints it: masked
// for secrets (the ranks still get the real value).
func ShownValue(name, value string) string {
	if Secret(name) {
		return "****"
	}
	return value
}

// userEnv is the user's side of every rank's environment: the forwarded
// shell variables and the explicit ones (--env, env files), explicit
// winning.
type userEnv struct {
	forwarded map[string]string
	explicit  map[string]string
	// skipped are forwardable shell variables that pipette-launch owns.
	skipped []string
}

func newUserEnv(shell map[string]string, explicit []job.EnvVar) userEnv {
	u := userEnv{forwarded: map[string]string{}, explicit: map[string]string{}}
	for k, v := range shell {
		if !forwardedName(k) {
			continue
		}
		if launcherOwned[k] {
			u.skipped = append(u.skipped, k)
			continue
		}
		u.forwarded[k] = v
	}
	for _, e := range explicit {
		u.explicit[e.Name] = e.Value
	}
	sort.Strings(u.skipped)
	return u
}

// apply lays the user's variables over a rank's computed env. perHost
// names pipette-launch's own per-host fabric settings: a forwarded value
// does not replace them and an explicit one does, each with a warning
// naming the variable. Other computed values yield to the user's (torchrun
// lets the parent decide OMP_NUM_THREADS and the like); rank identity
// never does.
func (u userEnv) apply(env []job.EnvVar, perHost map[string]bool) ([]job.EnvVar, []string) {
	var warnings []string
	set := map[string]string{}
	for k, v := range u.forwarded {
		set[k] = v
	}
	for k, v := range u.explicit {
		set[k] = v
	}
	computed := map[string]string{}
	for _, e := range env {
		computed[e.Name] = e.Value
	}
	out := env[:0:0]
	for _, e := range env {
		v, user := set[e.Name]
		_, explicit := u.explicit[e.Name]
		switch {
		case !user || v == e.Value:
			out = append(out, e)
		case launcherOwned[e.Name]:
			if explicit {
				warnings = append(warnings, fmt.Sprintf("%s from --env is not used: the plan places every rank on its own GPU", e.Name))
			}
			out = append(out, e)
		case perHost[e.Name] && !explicit:
			warnings = append(warnings, fmt.Sprintf("%s=%s from your environment is not used: pipette-launch sets %s per host (--dry-run shows it); give --env %s=%s to force yours",
				e.Name, ShownValue(e.Name, v), e.Name, e.Name, ShownValue(e.Name, v)))
			out = append(out, e)
		case perHost[e.Name]:
			warnings = append(warnings, fmt.Sprintf("%s=%s (--env or env file) replaces pipette-launch's per-host value on every rank", e.Name, ShownValue(e.Name, v)))
			out = append(out, job.EnvVar{Name: e.Name, Value: v})
		default:
			out = append(out, job.EnvVar{Name: e.Name, Value: v})
		}
	}
	names := make([]string, 0, len(set))
	for k := range set {
		if _, ok := computed[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, job.EnvVar{Name: k, Value: set[k]})
	}
	return out, warnings
}
