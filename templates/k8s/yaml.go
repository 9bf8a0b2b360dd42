package k8s

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

// YAML is the manifests as one multi-document stream, in apply order,
// without the Secret: a comment names it and its keys, never the values.
func (m *Manifests) YAML() ([]byte, error) {
	var b bytes.Buffer
	if m.Secret != nil {
		md := m.Secret["metadata"].(Object)
		fmt.Fprintf(&b, "# Secret %s\n", shellquote.Comment(fmt.Sprintf("%s/%s (applied by run, never printed) holds: %s", md["namespace"], md["name"], strings.Join(m.SecretKeys, ", "))))
	}
	for i, o := range m.Objects {
		if i > 0 {
			b.WriteString("---\n")
		}
		out, err := ObjectYAML(o)
		if err != nil {
			return nil, err
		}
		b.Write(out)
	}
	return b.Bytes(), nil
}

// ObjectYAML is one object as YAML (keys sorted).
func ObjectYAML(o Object) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(o); err != nil {
		return nil, fmt.Errorf("kubernetes: encode %v: %w", o["kind"], err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Files are the manifests as --output-dir writes them: one file per
// object, named by kind and name, in apply order (the Secret is not
// written).
func (m *Manifests) Files() (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	var order []string
	for i, o := range m.Objects {
		md := o["metadata"].(Object)
		name := fmt.Sprintf("%02d-%s-%s.yaml", i, strings.ToLower(o["kind"].(string)), md["name"])
		out, err := ObjectYAML(o)
		if err != nil {
			return nil, nil, err
		}
		files[name] = out
		order = append(order, name)
	}
	slices.Sort(order)
	return files, order, nil
}

// WriteDir writes Files into dir (--output-dir) and returns their names;
// the Secret is never written. The directory is made 0700 or must be the
// user's own that no one else can write (atomicfile.OwnDir); no file is
// written through a link, and none already there is replaced unless
// replace (--force): atomicfile.CreateAll.
func (m *Manifests) WriteDir(dir string, replace bool) ([]string, error) {
	files, order, err := m.Files()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.OwnDir(dir, false); err != nil {
		return nil, err
	}
	all := make([]atomicfile.File, 0, len(order))
	for _, name := range order {
		all = append(all, atomicfile.File{Name: name, Data: files[name], Perm: 0o644})
	}
	if err := atomicfile.CreateAll(dir, all, replace); err != nil {
		return nil, err
	}
	return order, nil
}
