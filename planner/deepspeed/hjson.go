package deepspeed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// DeepSpeed reads its config with hjson (deepspeed/runtime/config.py:
// hjson.load with dict_raise_error_on_duplicate_keys): comments and
// trailing commas are accepted, a key given twice in one object is not.
// Normalize turns such a file into plain JSON; DuplicateKey finds the
// first key given twice.

// Normalize returns data as plain JSON: #, // and /* */ comments and
// commas before a closing bracket dropped, everything inside strings kept.
func Normalize(data []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(data))
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
			out.WriteByte(c)
		case c == '#' || (c == '/' && i+1 < len(data) && data[i+1] == '/'):
			for i < len(data) && data[i] != '\n' {
				i++
			}
			out.WriteByte('\n')
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 {
				i = len(data)
			} else {
				i += end + 3
			}
			out.WriteByte(' ')
		case c == ',':
			// A comma followed (past blanks and comments) by a closing
			// bracket is dropped.
			if j := nextSignificant(data, i+1); j < len(data) && (data[j] == '}' || data[j] == ']') {
				continue
			}
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// nextSignificant is the index of the next byte after i that is neither
// blank nor inside a comment.
func nextSignificant(data []byte, i int) int {
	for i < len(data) {
		switch c := data[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || (c == '/' && i+1 < len(data) && data[i+1] == '/'):
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 {
				return len(data)
			}
			i += end + 4
		default:
			return i
		}
	}
	return i
}

// DuplicateKey returns the first key (dotted path) given twice in one
// object of the JSON data, "" when there is none.
func DuplicateKey(data []byte) (string, error) {
	type frame struct {
		object bool
		keys   map[string]bool
		path   string // of this container
		last   string // object: the key whose value comes next
		want   bool   // object: the next token is a key
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.want {
			if top.keys[s] {
				return strings.TrimPrefix(top.path+"."+s, "."), nil
			}
			top.keys[s], top.last, top.want = true, s, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			path := ""
			if top != nil {
				path = top.path
				if top.object {
					path += "." + top.last
				}
			}
			stack = append(stack, &frame{object: tok == json.Delim('{'), keys: map[string]bool{}, path: path, want: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].want = true
		}
	}
}

// Decode reads a DeepSpeed config as DeepSpeed does: hjson's comments and
// trailing commas accepted, a duplicate key refused.
func Decode(data []byte) (map[string]any, error) {
	clean := Normalize(data)
	var raw map[string]any
	if err := json.Unmarshal(clean, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	if k, err := DuplicateKey(clean); err != nil || k != "" {
		return nil, fmt.Errorf("key %s is given twice (DeepSpeed refuses duplicate keys)", k)
	}
	return raw, nil
}
