package sbatch

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// How Slurm's sbatch reads a batch script's directives (src/sbatch/opt.c,
// _get_argument): it reads "#SBATCH" lines from the top and stops at the
// first command line; each line is cut into words at blanks, '"' and '\''
// group characters (blanks too), '\' escapes the next one, and an unquoted
// '#' starts a comment; a line holding "hetjob" (older Slurm: "packjob"),
// in any case and anywhere, starts the next component of a heterogeneous
// job. So a value holding a line break would end its line (and start a
// command, which ends every directive after it), and one holding those
// words would split the job: such values are refused; any other value is
// quoted for Slurm by slurmWord.

// maxSignalSeconds is the largest time --signal takes (sbatch(1): "between
// 0 and 65535 seconds").
const maxSignalSeconds = 65535

var (
	// A Slurm partition or account name; partitions are a comma list.
	slurmName     = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	slurmNameList = regexp.MustCompile(`^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$`)
	// --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
	// days-hours:minutes, days-hours:minutes:seconds (sbatch(1)).
	slurmTime     = regexp.MustCompile(`^([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?$`)
	slurmTimeDays = regexp.MustCompile(`^([0-9]{1,9})-([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?$`)
)

// checkDirectives refuses, naming the flag, every value sbatch cannot put
// in an #SBATCH line as the user meant it.
func checkDirectives(o *Options) error {
	for _, v := range []struct{ flag, value string }{
		{"--job-name (default: --run-id)", o.JobName}, {"--time", o.Time}, {"--partition", o.Partition}, {"--account", o.Account},
	} {
		if err := checkDirectiveValue(v.flag, v.value); err != nil {
			return err
		}
	}
	if strings.TrimSpace(o.JobName) == "" {
		return cmdutil.InputErrorf("--job-name %q: want a non-empty Slurm job name", o.JobName)
	}
	limit, err := parseSlurmTime(o.Time)
	if err != nil {
		return err
	}
	if o.Partition != "" && !slurmNameList.MatchString(o.Partition) {
		return cmdutil.InputErrorf("--partition %q: want a Slurm partition name (letters, digits, '_', '.', '-'), or several separated by commas", o.Partition)
	}
	if o.Account != "" && !slurmName.MatchString(o.Account) {
		return cmdutil.InputErrorf("--account %q: want a Slurm account name (letters, digits, '_', '.', '-')", o.Account)
	}
	if err := checkSignalBefore(o.SignalBefore, o.Time, limit); err != nil {
		return err
	}
	if o.Run != nil {
		if err := checkSignalCoversGrace(o.SignalBefore, limit, o.Run.StopGrace); err != nil {
			return err
		}
	}
	for _, e := range o.Extra {
		if err := checkDirectiveValue("--sbatch-arg", e); err != nil {
			return err
		}
		if !strings.HasPrefix(e, "-") {
			return cmdutil.InputErrorf("--sbatch-arg %q: want an sbatch option such as --exclusive or --mem=0 (it is written as one #SBATCH line)", e)
		}
		for rest := e; ; {
			_, n, err := slurmArgument(rest)
			if err != nil {
				return cmdutil.InputErrorf("--sbatch-arg %q: %v", e, err)
			}
			if n == 0 {
				break
			}
			rest = rest[n:]
		}
	}
	return nil
}

// checkDirectiveValue refuses a value with a line break or another
// control character, which cannot be written in one #SBATCH line, and one
// that Slurm would read as a heterogeneous job's separator.
func checkDirectiveValue(flag, value string) error {
	if i := strings.IndexFunc(value, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return cmdutil.InputErrorf("%s %q: holds the control character %q at byte %d; an #SBATCH line cannot hold it (a line break would end the directives)", flag, value, value[i], i)
	}
	for _, w := range []string{"hetjob", "packjob"} {
		if strings.Contains(strings.ToLower(value), w) {
			return cmdutil.InputErrorf("%s %q: Slurm reads %q anywhere in an #SBATCH line as the start of another heterogeneous job component; choose a value without it", flag, value, w)
		}
	}
	return nil
}

// parseSlurmTime reads --time in one of Slurm's formats and returns the
// limit (0: none given, or unlimited).
func parseSlurmTime(s string) (time.Duration, error) {
	switch strings.ToLower(s) {
	case "", "infinite", "unlimited":
		return 0, nil
	}
	n := func(p string) int64 { v, _ := strconv.ParseInt(p, 10, 64); return v }
	var secs int64
	if m := slurmTimeDays.FindStringSubmatch(s); m != nil {
		secs = n(m[1])*86400 + n(m[2])*3600 + n(m[3])*60 + n(m[4])
	} else if m := slurmTime.FindStringSubmatch(s); m != nil {
		switch {
		case m[3] != "": // hours:minutes:seconds
			secs = n(m[1])*3600 + n(m[2])*60 + n(m[3])
		case m[2] != "": // minutes:seconds
			secs = n(m[1])*60 + n(m[2])
		default: // minutes
			secs = n(m[1]) * 60
		}
	} else {
		return 0, cmdutil.InputErrorf("--time %q: want a Slurm time limit: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS or UNLIMITED (e.g. 2:00:00)", s)
	}
	return time.Duration(secs) * time.Second, nil
}

// checkSignalBefore: Slurm's --signal takes whole seconds up to 65535, and
// a signal as early as the limit itself would stop the job at its start.
func checkSignalBefore(d time.Duration, timeFlag string, limit time.Duration) error {
	switch {
	case d < 0:
		return cmdutil.InputErrorf("--signal-before %s: want a duration from 0 (no signal) to %ds, such as 2m", d, maxSignalSeconds)
	case d > maxSignalSeconds*time.Second:
		return cmdutil.InputErrorf("--signal-before %s: Slurm's --signal takes at most %d s (18h12m15s)", d, maxSignalSeconds)
	case d%time.Second != 0:
		return cmdutil.InputErrorf("--signal-before %s: want whole seconds (Slurm's --signal counts seconds)", d)
	case d > 0 && limit > 0 && d >= limit:
		return cmdutil.InputErrorf("--signal-before %s is not shorter than --time %s (%s): the signal would stop the job as it starts; give a shorter --signal-before, or 0 for none", d, timeFlag, limit)
	}
	return nil
}

// checkSignalCoversGrace: the SIGTERM Slurm sends --signal-before the
// limit starts the ranks' --stop-grace, which must end before the limit,
// where Slurm kills every step: a checkpoint a SIGTERM handler saves in
// that grace would be cut off.
func checkSignalCoversGrace(signal, limit, grace time.Duration) error {
	if signal > 0 && limit > 0 && signal <= grace {
		return cmdutil.InputErrorf("--signal-before %s is not longer than --stop-grace %s: the ranks get SIGTERM %s before the time limit and SIGKILL %s after it, so Slurm's limit would end them first; give a --signal-before longer than the grace, such as %s",
			signal, grace, signal, grace, (grace + time.Minute).Truncate(time.Second))
	}
	return nil
}

// slurmWord is value as one word of an #SBATCH line: bare when Slurm
// reads it as it is, else in double quotes with '"' and '\' escaped.
// Values are one line (checkDirectiveValue).
func slurmWord(value string) string {
	if value != "" && !strings.ContainsAny(value, " \t\v\f\"'\\#") {
		return value
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(value) + `"`
}

// directive is one #SBATCH line: --opt=value, the value quoted for Slurm.
func directive(opt, value string) string {
	return fmt.Sprintf("#SBATCH --%s=%s\n", opt, slurmWord(value))
}

// slurmArgument is Slurm's _get_argument: the next word of one #SBATCH
// line's rest s and how many bytes it took (0: none left); an error where
// sbatch stops with a fatal one (an unmatched quote, a word starting with
// ':').
func slurmArgument(s string) (string, int, error) {
	i := 0
	for i < len(s) && isSlurmSpace(s[i]) {
		i++
	}
	if i == len(s) {
		return "", 0, nil
	}
	if s[i] == ':' {
		return "", 0, fmt.Errorf("Slurm's sbatch stops at a word starting with ':'")
	}
	var w strings.Builder
	var q byte
	escape := false
	for ; i < len(s) && (q != 0 || !isSlurmSpace(s[i])) && s[i] != '\n'; i++ {
		c := s[i]
		switch {
		case escape:
			escape = false
		case c == '\\':
			escape = true
			continue
		case q != 0 && c == q:
			q = 0
			continue
		case q != 0:
		case c == '"' || c == '\'':
			q = c
			continue
		case c == '#':
			return w.String(), len(s), nil // the rest is a comment
		}
		w.WriteByte(c)
	}
	if q != 0 {
		return "", 0, fmt.Errorf("Slurm's sbatch stops at the unmatched %c", q)
	}
	return w.String(), i, nil
}

// isSlurmSpace is C's isspace, which Slurm's reader cuts words at.
func isSlurmSpace(c byte) bool { return strings.IndexByte(" \t\n\v\f\r", c) >= 0 }
