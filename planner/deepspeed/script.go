package deepspeed

import (
	"regexp"
	"strings"
)

// A script that calls deepspeed.initialize(..., config=...) hands DeepSpeed
// its config itself (DeepSpeed-Chat, DeepSpeedExamples' cifar): DeepSpeed
// asserts when --deepspeed_config names one too.

var initializeCall = regexp.MustCompile(`\binitialize\s*\(`)
var configKeyword = regexp.MustCompile(`(^|[\s,(])(config|config_params)\s*=[^=]`)

// ScriptPassesConfig reports whether Python source calls initialize(...) with a
// config= (or config_params=) keyword argument, in a file that uses
// DeepSpeed. Parentheses are matched so nested calls stay inside.
func ScriptPassesConfig(src string) bool {
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

// InScript reports whether the script hands DeepSpeed its config itself,
// so that the launcher must add no --deepspeed_config (DeepSpeed asserts
// when a config comes both from the arguments and from
// deepspeed.initialize, or from --deepspeed_config and --deepscale_config):
// HF Trainer's --deepspeed FILE (u.Flag HFTrainerFlag), or a script whose
// source (src, "" when unknown) calls deepspeed.initialize(...,
// config=...) while its line names no config (flag ""). Without planning a
// line that names no config gets none either, as DeepSpeed's launcher adds
// none: the script's own arguments or code give DeepSpeed its config.
func InScript(u *UserConfig, flag string, planned bool, src func() string) bool {
	switch {
	case u != nil:
		return u.Flag == HFTrainerFlag
	case flag != "":
		return false
	case !planned:
		return true
	}
	return ScriptPassesConfig(src())
}

// ConfigFlag finds the config a script's arguments name: --deepspeed_config,
// --deepscale_config (the last given), or HF Trainer's --deepspeed FILE
// (a value that names a .json file or, by exists, a file here: DeepSpeed's
// own --deepspeed is a switch). It returns the flag and the path as given.
func ConfigFlag(args []string, exists func(string) bool) (flag, path string) {
	for i, a := range args {
		for _, f := range []string{"--deepspeed_config", "--deepscale_config"} {
			if a == f && i+1 < len(args) {
				flag, path = f, args[i+1]
			} else if v, ok := strings.CutPrefix(a, f+"="); ok {
				flag, path = f, v
			}
		}
		v, ok := strings.CutPrefix(a, HFTrainerFlag+"=")
		if !ok && a == HFTrainerFlag && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			v, ok = args[i+1], true
		}
		if ok && flag == "" && (strings.HasSuffix(v, ".json") || exists(v)) {
			flag, path = HFTrainerFlag, v
		}
	}
	return flag, path
}
