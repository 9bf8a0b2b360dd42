// Package yamlcheck is the one strict YAML decoding of the project's input
// files (cluster and model files). Before yaml.v3 decodes a document, it
// walks the document against the Go type it is decoded into and reports,
// with the field path and line and column, what yaml.v3 would accept
// silently or describe in Go terms: unknown keys, non-integers in integer
// fields (yaml.v3 turns 8.5 into 8), anything but true/false in boolean
// fields (it reads "yes" as true), the wrong kind of node. Then it decodes
// with unknown fields refused. A caller's own types with their own YAML
// forms (a host list written as an expression) are checked by its hooks.
package yamlcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// ErrEmpty is Decode's error for a document with no content.
var ErrEmpty = errors.New("empty document")

// Problem is one thing wrong in a document: the field's path
// (clusters[0].gpus_per_host), where it is ("line 3, column 5") and what
// is wrong.
type Problem struct{ Path, At, Msg string }

// Problems is every problem found, so that a user sees all at once.
type Problems []Problem

// Add records a problem at path (its position filled in later by Locate).
func (p *Problems) Add(path, format string, args ...any) {
	*p = append(*p, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// AddAt records a problem at path whose position is already known.
func (p *Problems) AddAt(path, at, format string, args ...any) {
	*p = append(*p, Problem{Path: path, At: at, Msg: fmt.Sprintf(format, args...)})
}

// Check records a problem at path when v is outside r (a required field:
// zero is out of range unless r allows it).
func (p *Problems) Check(path string, r limits.Range, v float64) {
	if err := r.Check(v); err != nil {
		p.Add(path, "%v", err)
	}
}

// CheckOptional is Check for a field that may be left out (zero).
func (p *Problems) CheckOptional(path string, r limits.Range, v float64) {
	if err := r.CheckOptional(v); err != nil {
		p.Add(path, "%v", err)
	}
}

// Locate fills in positions from pos (path -> position, as Decode returns
// it), using the nearest enclosing field the file has (a host written as a
// plain name has no .name of its own).
func (p Problems) Locate(pos map[string]string) {
	for i := range p {
		for q := p[i].Path; q != "" && p[i].At == ""; q = parentPath(q) {
			p[i].At = pos[q]
		}
	}
}

func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i > 0 {
		return p[:i]
	}
	return ""
}

// Err is nil without problems, else all of them under what ("cluster
// file: clusters[0].hosts: ...").
func (p Problems) Err(what string) error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", what, p)
}

func (p Problems) Error() string {
	parts := make([]string, len(p))
	for i, e := range p {
		if e.At != "" {
			parts[i] = fmt.Sprintf("%s (%s): %s", e.Path, e.At, e.Msg)
		} else {
			parts[i] = e.Path + ": " + e.Msg
		}
	}
	return strings.Join(parts, "; ")
}

// A Hook checks the nodes decoded into one Go type itself, for a type with
// a YAML form of its own (an UnmarshalYAML method). It reports through w.
type Hook func(w *Walker, n *yaml.Node, path string)

// Hooks maps a Go type to its check.
type Hooks map[reflect.Type]Hook

// Decode checks data against v's type (v is a pointer), then decodes it
// into v with unknown fields refused. It returns each field path's
// position ("line L, column C"), for the caller's validation errors to
// name. The errors: a file over limits.MaxFileBytes, yaml.v3's syntax
// error (with its line), Problems, yaml.v3's decoding error, ErrEmpty.
func Decode(data []byte, v any, hooks Hooks) (map[string]string, error) {
	if len(data) > limits.MaxFileBytes {
		return nil, fmt.Errorf("%d bytes; at most %d MiB", len(data), limits.MaxFileBytes>>20)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	w := &Walker{pos: map[string]string{}, seen: map[*yaml.Node]bool{}, hooks: hooks}
	if root.Kind != 0 { // an empty document: the decoder says so below
		w.Walk(&root, reflect.TypeOf(v).Elem(), "")
	}
	if len(w.problems) > 0 {
		return nil, w.problems
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrEmpty
		}
		return nil, err
	}
	return w.pos, nil
}

// Walker walks one document; hooks use it to report and to descend.
type Walker struct {
	problems Problems
	// pos maps a field path to "line L, column C".
	pos   map[string]string
	hooks Hooks
	// seen stops alias expansion: each anchored node is checked once.
	seen map[*yaml.Node]bool
}

var timeType = reflect.TypeOf(time.Time{})

// Where is n's position as errors name it.
func Where(n *yaml.Node) string { return fmt.Sprintf("line %d, column %d", n.Line, n.Column) }

// Bad records a problem at n.
func (w *Walker) Bad(n *yaml.Node, path, format string, a ...any) {
	w.problems = append(w.problems, Problem{Path: path, At: Where(n), Msg: fmt.Sprintf(format, a...)})
}

// SetPos records that path is written at n (a hook's expanded items).
func (w *Walker) SetPos(path string, n *yaml.Node) { w.pos[path] = Where(n) }

// Walk checks n, found at path, against Go type t.
func (w *Walker) Walk(n *yaml.Node, t reflect.Type, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			w.Walk(n.Content[0], t, path)
		}
		return
	case yaml.AliasNode:
		if w.seen[n.Alias] {
			return
		}
		w.seen[n.Alias] = true
		w.Walk(n.Alias, t, path)
		return
	}
	if path != "" {
		if _, ok := w.pos[path]; !ok {
			w.pos[path] = Where(n)
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // unset: the field keeps its zero value and validation judges it
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if hook, ok := w.hooks[t]; ok {
		hook(w, n, path)
		return
	}
	switch {
	case t == timeType:
		w.scalar(n, path, "a time such as 2025-01-31T12:00:00Z")
	case t.Kind() == reflect.Struct:
		w.mapping(n, t, path)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		w.sequence(n, t, path)
	default:
		w.value(n, t, path)
	}
}

func (w *Walker) mapping(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.Bad(n, path, "got %s; want a map with keys %s", Describe(n), strings.Join(yamlKeys(t), ", "))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fieldByKey(t, k.Value)
		kp := joinPath(path, k.Value)
		if !ok {
			w.Bad(k, kp, "unknown field %q; the fields here are %s", k.Value, strings.Join(yamlKeys(t), ", "))
			continue
		}
		w.Walk(v, f.Type, kp)
	}
}

func (w *Walker) sequence(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.SequenceNode {
		w.Bad(n, path, "got %s; want a list", Describe(n))
		return
	}
	if t.Kind() == reflect.Array && len(n.Content) != t.Len() {
		w.Bad(n, path, "got %d items; want exactly %d", len(n.Content), t.Len())
		return
	}
	for i, item := range n.Content {
		w.Walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
	}
}

func (w *Walker) scalar(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.ScalarNode {
		w.Bad(n, path, "got %s; want %s", Describe(n), want)
		return false
	}
	return true
}

// value checks a scalar field by its Go kind.
func (w *Walker) value(n *yaml.Node, t reflect.Type, path string) {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		if !w.scalar(n, path, "an integer") {
			return
		}
		// int fields are counts and sizes the limits keep far below 2^31;
		// int64 fields are byte counts.
		bits := 32
		if t.Kind() == reflect.Int64 {
			bits = 64
		}
		if n.ShortTag() != "!!int" {
			w.Bad(n, path, "got %s; want an integer", Describe(n))
		} else if _, err := strconv.ParseInt(n.Value, 0, bits); err != nil {
			w.Bad(n, path, "%s is out of range; want an integer below 2^%d", n.Value, bits-1)
		}
	case reflect.Float64, reflect.Float32:
		if !w.scalar(n, path, "a number") {
			return
		}
		if _, err := strconv.ParseFloat(n.Value, 64); errors.Is(err, strconv.ErrRange) && n.Style == 0 {
			w.Bad(n, path, "got %s; too large for a 64-bit float (want a finite number)", n.Value)
		} else if n.ShortTag() != "!!int" && n.ShortTag() != "!!float" {
			w.Bad(n, path, "got %s; want a number", Describe(n))
		} else if msg := notFinite(n); msg != "" {
			w.Bad(n, path, "got %s; %s", n.Value, msg)
		}
	case reflect.Bool:
		if w.scalar(n, path, "true or false") && n.ShortTag() != "!!bool" {
			w.Bad(n, path, "got %s; want true or false (unquoted)", Describe(n))
		}
	case reflect.String:
		w.scalar(n, path, "a string")
	}
}

// notFinite says why a number node is not a usable finite number: YAML's
// .nan and .inf decode into float fields, and a number below 1e-308 such
// as 1e-400 silently becomes 0, which a field reads as "not given".
func notFinite(n *yaml.Node) string {
	var v float64
	if err := n.Decode(&v); err != nil {
		return "want a number"
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "want a finite number"
	case v == 0 && strings.ContainsAny(mantissa(n.Value), "123456789"):
		return "too small for a 64-bit float (it reads as 0); write 0 or a larger number"
	}
	return ""
}

// mantissa is a number's text before its exponent.
func mantissa(s string) string {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		return s[:i]
	}
	return s
}

// Describe names a node as a user wrote it: "8.5", the string "yes", a list.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("the string %q", v)
	case "!!float":
		return fmt.Sprintf("%s (not a whole number)", v)
	}
	return v
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldByKey finds the struct field whose yaml tag is key, looking into
// ",inline" structs as yaml.v3 does.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			if g, ok := fieldByKey(f.Type, key); ok {
				return g, true
			}
			continue
		}
		if name == key && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			out = append(out, yamlKeys(f.Type)...)
		} else if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
