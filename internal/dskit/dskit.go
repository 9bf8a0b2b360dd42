// Package dskit finds the DeepSpeed v0.14.4 kit of ../shared/frameworks
// (deepspeed/setup.sh's env dir) for code that runs real DeepSpeed: the
// interpreter and the environment a job needs (its env.list).
package dskit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvDir is the kit's env dir as setup.sh chooses it:
// $PIPETTE_DEEPSPEED_ENV, else ${XDG_CACHE_HOME:-~/.cache}/pipette-frameworks/deepspeed.
func EnvDir() string {
	if d := os.Getenv("PIPETTE_DEEPSPEED_ENV"); d != "" {
		return d
	}
	// os.UserCacheDir is $XDG_CACHE_HOME, else $HOME/.cache: where
	// conformance/setup-kits.sh puts the kit.
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = ".cache"
	}
	return filepath.Join(cache, "pipette-frameworks", "deepspeed")
}

// Kit is a set-up kit: its interpreter, its env.list and the KEY=VALUE
// lines in it.
type Kit struct {
	Python, EnvList string
	Env             []string
}

// Find reads the kit's env.list; the error says how to set the kit up.
func Find() (*Kit, error) {
	k := &Kit{EnvList: filepath.Join(EnvDir(), "env.list"), Python: os.Getenv("PIPETTE_DEEPSPEED_PYTHON")}
	b, err := os.ReadFile(k.EnvList)
	if err != nil {
		return nil, fmt.Errorf("DeepSpeed kit: %w (run ../shared/frameworks/deepspeed/setup.sh, or set PIPETTE_DEEPSPEED_ENV)", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "=") && !strings.HasPrefix(l, "#") {
			k.Env = append(k.Env, l)
		}
	}
	if k.Python == "" {
		k.Python = "/usr/bin/python3" // setup.sh's default: Debian's, with python3-torch
	}
	return k, nil
}
