package k8s

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/scripttest"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

// podCase is one pod's values: what the renderer is given.
type podCase struct {
	name, host, file, content string
	args                      []string
	env                       [][2]string
}

var hostilePods = []podCase{
	{name: "a\ntouch PWNED\n", host: "n1", file: "ds_config.json", content: "{}\n", args: []string{"x"}},
	{name: "j", host: "n1\ntouch PWNED", file: "a b/it's\n$(x)", content: "'\n`x`", args: []string{"a b", "it's"}},
	{name: "j\u2028x", host: "h\r#", file: "f", content: "", args: []string{"--x=\n"}, env: [][2]string{{"NCCL_X", "a'b\nc"}}},
}

// The pod entrypoint and the host script in the ConfigMap, read back from
// its YAML and run by a real sh as the pod would, put the job's file in
// place and start the command with exactly the argv and environment given,
// and hold no line the renderer did not write.
func TestPodScriptsDeliverValues(t *testing.T) {
	for _, c := range hostilePods {
		if err := checkPod(t, c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
}

// A variable headed for the Secret whose name is no Secret key is refused,
// and the YAML's comment naming the Secret's keys stays one line.
func TestSecretKeysAreKeys(t *testing.T) {
	j := &job.Job{Name: "j", Hosts: []job.HostJob{{Name: "h", Ranks: []job.RankJob{{Argv: []string{"x"},
		Env: []job.EnvVar{{Name: "MY_TOKEN\nkind: Pod", Value: "s"}}}}}}}
	m, err := Render(j, []Island{{Name: "i", Hosts: []string{"h"}}}, Options{Image: "img", Affinity: AffinityNone})
	if err == nil {
		out, _ := m.YAML()
		t.Fatalf("rendered a Secret key with a line break:\n%s", out)
	}
	if !strings.Contains(err.Error(), "whose keys may hold only letters") {
		t.Errorf("error %v does not say what a Secret key may hold", err)
	}
}

func FuzzPodScripts(f *testing.F) {
	for _, c := range hostilePods {
		f.Add(c.name, c.host, c.file, c.content, strings.Join(c.args, "\x00"), scripttest.VarsText(c.env))
	}
	f.Fuzz(func(t *testing.T, name, host, file, content, args, env string) {
		// TORCHELASTIC_RESTART_COUNT and MASTER_ADDR are the pod's own.
		c := podCase{name, host, file, content, scripttest.Words(args), scripttest.Vars(env, "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR")}
		if scripttest.Skip([]string{name, host, file, content}, len(c.args), len(c.env)) {
			return
		}
		if err := checkPod(t, c); err != nil {
			t.Fatal(err)
		}
	})
}

// checkPod renders c's pod (and its skeleton, every value a marker), reads
// the ConfigMap back from YAML into a stand-in for the pod's mount, and
// runs the entrypoint with the printer as the rank's program.
func checkPod(t *testing.T, c podCase) error {
	h := scripttest.NewHarness(t)
	mount, filesDir := filepath.Join(h.Dir, "mount"), filepath.Join(h.Dir, "files")
	// The file: a relative path inside the job's files directory.
	file := strings.Trim(path.Clean("/"+c.file), "/")
	if file == "" || len(file) > 200 || strings.Contains(file, "//") || len(path.Base(file)) > 200 {
		file = "f"
	}
	render := func(name, host, file string, args []string, env [][2]string) (map[string]string, *Manifests, error) {
		r := job.RankJob{Argv: slices.Concat(h.Printer, args)}
		for _, e := range env {
			r.Env = append(r.Env, job.EnvVar{Name: e[0], Value: e[1]})
		}
		j := &job.Job{Name: name, FilesDir: filesDir,
			Files: []job.File{{Path: file, Mode: 0o640, Content: []byte(c.content)}},
			Hosts: []job.HostJob{{Name: host, Ranks: []job.RankJob{r}}}}
		m, err := Render(j, []Island{{Name: "isl", Hosts: []string{host}}}, Options{Name: "job", Image: "img", Affinity: AffinityNone})
		if err != nil {
			return nil, nil, err
		}
		data, err := configMapData(m)
		return data, m, err
	}
	data, m, err := render(c.name, c.host, file, c.args, c.env)
	if err != nil {
		if !utf8.ValidString(c.name+c.host+c.file+c.content+strings.Join(c.args, "")+scripttest.VarsText(c.env)) &&
			strings.Contains(err.Error(), "not UTF-8") {
			return nil // refused: a ConfigMap holds text only
		}
		return err
	}
	var sk scripttest.Skeleton
	skName, skHost := sk.Mark(c.name), sk.Mark(c.host)
	skFile := path.Join(path.Dir(file), sk.Mark(path.Base(file)))
	skeleton, _, err := render(skName, skHost, skFile, sk.MarkAll(c.args), sk.MarkVars(c.env, job.ValidEnvName))
	if err != nil {
		return fmt.Errorf("skeleton: %w", err)
	}
	for _, k := range []string{"entrypoint.sh", "host-0.sh"} {
		if err := scripttest.SameLines(data[k], skeleton[k], sk.Values); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	// The pod's mount, here: the entrypoint names mountDir.
	if err := os.Mkdir(mount, 0o700); err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(mount, k), []byte(v), 0o500); err != nil {
			return err
		}
	}
	entry := strings.ReplaceAll(data["entrypoint.sh"], mountDir, mount)
	rec, err := h.Run(entry, "PIPETTE_RJOB="+m.Pods[0].RJob, "PIPETTE_INDEX=0")
	if err != nil {
		return fmt.Errorf("entrypoint: %w", err)
	}
	placed := filepath.Join(filesDir, file)
	got, err := os.ReadFile(placed)
	if err != nil || !bytes.Equal(got, []byte(c.content)) {
		return fmt.Errorf("the job's file %s holds %q (%v), want %q", placed, got, err, c.content)
	}
	// PIPETTE_*: the pod's own variables; PWD: the shell's.
	return rec.Check(c.args, scripttest.WantEnv(c.env), "PIPETTE_RJOB", "PIPETTE_INDEX", "PWD")
}

// configMapData is the ConfigMap's data as the apiserver would read it
// from the YAML printed and applied.
func configMapData(m *Manifests) (map[string]string, error) {
	for _, o := range m.Objects {
		if o["kind"] != "ConfigMap" {
			continue
		}
		text, err := ObjectYAML(o)
		if err != nil {
			return nil, err
		}
		var back struct {
			Data map[string]string `yaml:"data"`
		}
		if err := yaml.Unmarshal(text, &back); err != nil {
			return nil, fmt.Errorf("the ConfigMap's YAML does not read back: %w\n%s", err, text)
		}
		for k, v := range o["data"].(Object) {
			if back.Data[k] != v {
				return nil, fmt.Errorf("ConfigMap entry %s reads back from YAML as %q, want %q", k, back.Data[k], v)
			}
		}
		return back.Data, nil
	}
	return nil, fmt.Errorf("no ConfigMap")
}
