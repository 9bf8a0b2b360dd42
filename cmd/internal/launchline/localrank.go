package launchline

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// declaresLocalRank matches an argparse declaration of --local_rank (or
// --local-rank): what a script written for torch.distributed.launch
// reads its local rank from.
var declaresLocalRank = regexp.MustCompile(`add_argument\(\s*["']--local[_-]rank["']`)

// LocalRankFromScript picks torch.distributed.launch's style for a line
// converted from `python -m torch.distributed.launch` without --as: when
// the script (read here, relative to workDir) declares --local_rank with
// argparse and never reads LOCAL_RANK, it gets --local_rank=N as that
// launcher gave it, and a note says so. A line whose launcher is named
// (--as), or that is DeepSpeed's (by its flags, or a DeepSpeed script
// with none: deepSpeedScript; its launcher passes --local_rank anyway), or passes --use_env/--no_local_rank, or
// runs a module or a program, is left as it is.
func (l *Line) LocalRankFromScript(workDir string, deepSpeedScript bool) {
	if l.AsGiven || l.Style == StyleDeepSpeed || (l.Style == "" && deepSpeedScript) || l.NoLocalRank || l.Module || l.NoPython {
		return
	}
	path := l.Script
	if workDir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(workDir, path)
	}
	src, err := os.ReadFile(path)
	if err != nil || !declaresLocalRank.Match(src) || strings.Contains(string(src), "LOCAL_RANK") {
		return
	}
	l.Style = StyleTorchLaunch
	l.Notes = append(l.Notes, l.Script+" declares --local_rank with argparse and never reads LOCAL_RANK: each rank gets --local_rank=N, as torch.distributed.launch gave it (--as torchrun to leave it out)")
}
