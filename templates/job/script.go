package job

import (
	"bytes"
	"embed"
	"fmt"
	"regexp"
	"strings"
	"text/template"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

//go:embed tmpl/*.tmpl
var tmplFS embed.FS

// scriptTmpl is the per-host launch script. Every value reaches the shell
// through shq, so it arrives byte-for-byte in the rank's argv and env, and
// a value in a comment also through comment, so it cannot end the comment
// and start a command line of its own.
var scriptTmpl = template.Must(template.New("host.sh.tmpl").Funcs(template.FuncMap{
	"shq":     shellquote.Quote,
	"joinq":   shellquote.Join,
	"comment": shellquote.Comment,
	"envArgv": EnvSafeArgv,
	// Names a shell cannot export stay env(1) assignments in argv.
	"validEnvName": ValidEnvName,
	// The signals the wrapper outlives, and the names the watchdog takes.
	"stopSignalList":    func() string { return strings.Join(StopSignalNames(), " ") },
	"stopSignalPattern": func() string { return strings.Join(StopSignalNames(), " | ") },
}).ParseFS(tmplFS, "tmpl/host.sh.tmpl"))

// HostScript renders the standalone POSIX sh launch script of host i.
func HostScript(job *Job, i int) (string, error) {
	var b bytes.Buffer
	data := struct {
		Job    *Job
		Host   *HostJob
		LogDir string
	}{job, &job.Hosts[i], job.LogDir}
	if err := scriptTmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render launch script for %s: %w", job.Hosts[i].Name, err)
	}
	return b.String(), nil
}

// Control is what `pipette-launch run` adds to a host script: the lines
// that switch on its reports to the launcher (see tmpl/host.sh.tmpl).
type Control struct {
	Tag       string // prefix of every control line; a nonce keeps ranks from faking them
	Grace     int    // seconds between SIGTERM and SIGKILL
	Heartbeat int    // seconds of silence from the launcher that stop the ranks; 0: only EOF
	Restart   int    // TORCHELASTIC_RESTART_COUNT of this attempt
	// RemoveFiles is a shell command (Job.RemoveFilesDirScript) the agent
	// runs once its watchdog has stopped the ranks (the launcher stopped
	// the job, or went silent: a launcher that lost the host does not
	// reach it again); "" keeps the files.
	RemoveFiles string
}

// WithControl returns a script from HostScript with c's control lines
// after its first line: the same script, reporting to the launcher.
func WithControl(script string, c Control) string {
	first, rest, _ := strings.Cut(script, "\n")
	removeFiles := ""
	if c.RemoveFiles != "" {
		removeFiles = " PIPETTE_REMOVE_FILES=" + shellquote.Quote(c.RemoveFiles)
	}
	return fmt.Sprintf("%s\n# pipette-launch run: control lines (the rest is the host script --output-dir writes)\n"+
		"PIPETTE_CONTROL=%s PIPETTE_STOP_GRACE_S=%d PIPETTE_HEARTBEAT_S=%d PIPETTE_RESTART_COUNT=%d%s\n%s",
		first, shellquote.Quote(c.Tag), c.Grace, c.Heartbeat, c.Restart, removeFiles, rest)
}

// EnvSafeArgv is argv ready to follow `env NAME=VALUE...`: env takes any
// word with "=" for an assignment (GNU env even after "--"), so a program
// whose path holds "=" is exec'd through sh, which takes any name.
func EnvSafeArgv(argv []string) []string {
	if len(argv) == 0 || !strings.Contains(argv[0], "=") {
		return argv
	}
	return append([]string{"/bin/sh", "-c", `exec "$0" "$@"`}, argv...)
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validEnvName reports whether name can be exported by a POSIX shell.
func ValidEnvName(name string) bool { return envNameRE.MatchString(name) }
