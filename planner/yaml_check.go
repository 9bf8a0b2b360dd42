package planner

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/hostlist"
	"github.com/pipette-launch/pipette-launch/internal/hostname"
	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// yamlCheck walks a YAML document against the Go type it is decoded into
// before yaml.v3 decodes it, and reports with the field path and line and
// column what yaml.v3 would accept silently or describe in Go terms:
// unknown keys, non-integers in integer fields (yaml.v3 turns 8.5 into 8),
// anything but true/false in boolean fields (it reads "yes" as true), the
// wrong kind of node. It also counts the hosts every hosts field names, so
// that a file naming too many is refused before any list is expanded.
type yamlCheck struct {
	errs fieldErrors
	// pos maps a field path (clusters[0].gpus_per_host) to "line L, column C".
	pos   map[string]string
	hosts int
	// seen stops alias expansion: each anchored node is checked once.
	seen map[*yaml.Node]bool
}

var (
	timeType        = reflect.TypeOf(time.Time{})
	hostEntriesType = reflect.TypeOf(HostEntries{})
)

func newYAMLCheck() *yamlCheck {
	return &yamlCheck{pos: map[string]string{}, seen: map[*yaml.Node]bool{}}
}

func where(n *yaml.Node) string { return fmt.Sprintf("line %d, column %d", n.Line, n.Column) }

func (c *yamlCheck) bad(n *yaml.Node, path, format string, a ...any) {
	c.errs.addAt(path, where(n), format, a...)
}

func (c *yamlCheck) walk(n *yaml.Node, t reflect.Type, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			c.walk(n.Content[0], t, path)
		}
		return
	case yaml.AliasNode:
		if c.seen[n.Alias] {
			return
		}
		c.seen[n.Alias] = true
		c.walk(n.Alias, t, path)
		return
	}
	if path != "" {
		if _, ok := c.pos[path]; !ok {
			c.pos[path] = where(n)
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // unset: the field keeps its zero value and validation judges it
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == hostEntriesType:
		c.hostEntries(n, path)
	case t == timeType:
		c.scalar(n, path, "a time such as 2025-01-31T12:00:00Z")
	case t.Kind() == reflect.Struct:
		c.mapping(n, t, path)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		c.sequence(n, t, path)
	default:
		c.value(n, t, path)
	}
}

func (c *yamlCheck) mapping(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		c.bad(n, path, "got %s; want a map with keys %s", describe(n), strings.Join(yamlKeys(t), ", "))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fieldByKey(t, k.Value)
		kp := joinPath(path, k.Value)
		if !ok {
			c.bad(k, kp, "unknown field %q; the fields here are %s", k.Value, strings.Join(yamlKeys(t), ", "))
			continue
		}
		c.walk(v, f.Type, kp)
	}
}

func (c *yamlCheck) sequence(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.SequenceNode {
		c.bad(n, path, "got %s; want a list", describe(n))
		return
	}
	if t.Kind() == reflect.Array && len(n.Content) != t.Len() {
		c.bad(n, path, "got %d items; want exactly %d", len(n.Content), t.Len())
		return
	}
	for i, item := range n.Content {
		c.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
	}
}

// hostEntries counts the hosts of an expression or list (see
// HostEntries.UnmarshalYAML) and records where each expanded index came from.
func (c *yamlCheck) hostEntries(n *yaml.Node, path string) {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	} else if n.Kind != yaml.ScalarNode {
		c.bad(n, path, "got %s; want a hostlist expression such as node[01-16] or a list of hosts", describe(n))
		return
	}
	idx := 0
	for _, it := range items {
		switch it.Kind {
		case yaml.ScalarNode:
			k, err := hostlist.Count(it.Value)
			if err != nil {
				c.bad(it, path, "%v", err)
				continue
			}
			c.hosts += k
			if c.hosts > limits.MaxHosts {
				c.bad(it, path, "the file names more than %d hosts (the limit of one job) by here", limits.MaxHosts)
				return
			}
			names, _ := hostlist.Expand(it.Value) // counted above: bounded
			for j, name := range names {
				hp := fmt.Sprintf("%s[%d]", path, idx+j)
				c.pos[hp] = where(it)
				if _, err := hostname.ParseTarget(name); err != nil {
					c.bad(it, hp, "%v", err)
				}
			}
			idx += k
		case yaml.MappingNode:
			c.hosts++
			c.walk(it, reflect.TypeOf(HostEntry{}), fmt.Sprintf("%s[%d]", path, idx))
			idx++
		default:
			c.bad(it, fmt.Sprintf("%s[%d]", path, idx), "got %s; want a host name or a {name, address, user, port} map", describe(it))
			idx++
		}
	}
}

func (c *yamlCheck) scalar(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.ScalarNode {
		c.bad(n, path, "got %s; want %s", describe(n), want)
		return false
	}
	return true
}

// value checks a scalar field by its Go kind.
func (c *yamlCheck) value(n *yaml.Node, t reflect.Type, path string) {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		if !c.scalar(n, path, "an integer") {
			return
		}
		// int fields are counts and sizes the limits keep far below 2^31;
		// int64 fields are byte counts.
		bits := 32
		if t.Kind() == reflect.Int64 {
			bits = 64
		}
		if n.ShortTag() != "!!int" {
			c.bad(n, path, "got %s; want an integer", describe(n))
		} else if _, err := strconv.ParseInt(n.Value, 0, bits); err != nil {
			c.bad(n, path, "%s is out of range; want an integer below 2^%d", n.Value, bits-1)
		}
	case reflect.Float64, reflect.Float32:
		if c.scalar(n, path, "a number") && n.ShortTag() != "!!int" && n.ShortTag() != "!!float" {
			c.bad(n, path, "got %s; want a number", describe(n))
		}
	case reflect.Bool:
		if c.scalar(n, path, "true or false") && n.ShortTag() != "!!bool" {
			c.bad(n, path, "got %s; want true or false (unquoted)", describe(n))
		}
	case reflect.String:
		c.scalar(n, path, "a string")
	}
}

// describe names a node as a user wrote it: "8.5", the string "yes", a list.
func describe(n *yaml.Node) string {
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

// checkYAML parses data as YAML and checks it against v's type. A syntax
// error is returned as it is (yaml.v3 gives its line).
func checkYAML(data []byte, v any) (*yamlCheck, error) {
	if len(data) > limits.MaxFileBytes {
		return nil, fmt.Errorf("%d bytes; at most %d MiB", len(data), limits.MaxFileBytes>>20)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	c := newYAMLCheck()
	if root.Kind == 0 { // empty document: the decoder says so
		return c, nil
	}
	c.walk(&root, reflect.TypeOf(v).Elem(), "")
	return c, nil
}
