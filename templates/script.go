package templates

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

//go:embed tmpl/*.tmpl
var tmplFS embed.FS

// scriptTmpl is the per-host launch script. Every value reaches the shell
// through shq, so it arrives byte-for-byte in the rank's argv and env.
var scriptTmpl = template.Must(template.New("host.sh.tmpl").Funcs(template.FuncMap{
	"shq":     shellquote.Quote,
	"joinq":   shellquote.Join,
	"envArgv": EnvSafeArgv,
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

// EnvSafeArgv is argv ready to follow `env NAME=VALUE...`: env takes any
// word with "=" for an assignment (GNU env even after "--"), so a program
// whose path holds "=" is exec'd through sh, which takes any name.
func EnvSafeArgv(argv []string) []string {
	if len(argv) == 0 || !strings.Contains(argv[0], "=") {
		return argv
	}
	return append([]string{"/bin/sh", "-c", `exec "$0" "$@"`}, argv...)
}
