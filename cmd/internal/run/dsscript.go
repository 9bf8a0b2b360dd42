package run

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
)

// dsInScript reports whether the script hands DeepSpeed its config itself,
// so that the launcher must add no --deepspeed_config (DeepSpeed asserts
// when a config comes both from the arguments and from
// deepspeed.initialize, or from --deepspeed_config and --deepscale_config):
// HF Trainer's --deepspeed FILE (ds.Flag "--deepspeed"), or a script whose
// source calls deepspeed.initialize(..., config=...) while its line names
// no config file (DeepSpeed-Chat, DeepSpeedExamples' cifar).
//
// Without planning (planned false) a line that names no config gets none
// either, as DeepSpeed's launcher adds none: the script's own arguments or
// code give DeepSpeed its config.
func dsInScript(o *Options, ds *deepspeed.UserConfig, planned bool) bool {
	if ds != nil {
		return ds.Flag == deepspeed.HFTrainerFlag
	}
	if flag, _, _ := userDSConfigFlag(o); flag != "" {
		return false
	}
	if !planned {
		return true
	}
	if o.Module {
		return false
	}
	path := o.Script
	if o.WorkDir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(o.WorkDir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return false
	}
	return passesDSConfig(string(src))
}

var initializeCall = regexp.MustCompile(`\binitialize\s*\(`)
var configKeyword = regexp.MustCompile(`(^|[\s,(])(config|config_params)\s*=[^=]`)

// passesDSConfig reports whether Python source calls initialize(...) with a
// config= (or config_params=) keyword argument, in a file that uses
// DeepSpeed. Parentheses are matched so nested calls stay inside.
func passesDSConfig(src string) bool {
	if !strings.Contains(src, "deepspeed") {
		return false
	}
	for _, loc := range initializeCall.FindAllStringIndex(src, -1) {
		depth, end := 1, len(src)
		for i := loc[1]; i < len(src); i++ {
			switch src[i] {
			case '(':
				depth++
			case ')':
				depth--
			}
			if depth == 0 {
				end = i
				break
			}
		}
		if configKeyword.MatchString(src[loc[1]:end]) {
			return true
		}
	}
	return false
}
