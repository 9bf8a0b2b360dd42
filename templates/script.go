package templates

import (
	"bytes"
	"embed"
	"fmt"
	"text/template"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

//go:embed tmpl/*.tmpl
var tmplFS embed.FS

// scriptTmpl is the per-host launch script. Every value reaches the shell
// through shq, so it arrives byte-for-byte in the rank's argv and env.
var scriptTmpl = template.Must(template.New("host.sh.tmpl").Funcs(template.FuncMap{
	"shq":   shellquote.Quote,
	"joinq": shellquote.Join,
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
