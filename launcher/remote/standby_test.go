package remote

import (
	"bytes"
	"strings"
	"testing"
)

// The mark line may arrive cut anywhere, and the second command's output
// may come in the same write as the mark: the first command's output is
// what came before the mark's own newline, byte for byte (no final
// newline of its own here), and everything after the mark reaches the
// second command's writer, in order, whenever that is set.
func TestHandoffSplitsAtTheMark(t *testing.T) {
	const mark = "@@pipette-standby-0123"
	stream := "hostname\nno newline at the end" + "\n" + mark + " 3\n" + "agent line 1\nagent line 2\n"
	tests := []struct {
		name string
		cuts []int // write boundaries
	}{
		{"one write", nil},
		{"cut inside the mark", []int{40}},
		{"cut before the mark's newline", []int{len("hostname\nno newline at the end")}},
		{"cut before the status's newline", []int{len("hostname\nno newline at the end\n" + mark + " 3")}},
		{"byte by byte", func() []int {
			var c []int
			for i := 1; i < len(stream); i++ {
				c = append(c, i)
			}
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandoff(mark)
			var after bytes.Buffer
			prev := 0
			for i, c := range append(tt.cuts, len(stream)) {
				h.Write([]byte(stream[prev:c]))
				prev = c
				if i == len(tt.cuts)/2 {
					select {
					case <-h.marked:
						h.to(&after) // set while output may still come
					default:
					}
				}
			}
			select {
			case <-h.marked:
			default:
				t.Fatal("mark not seen")
			}
			h.to(&after) // a second call changes nothing but the writer
			if got := string(h.head()); got != "hostname\nno newline at the end" {
				t.Errorf("first output %q", got)
			}
			if h.status != 3 {
				t.Errorf("status %d, want 3", h.status)
			}
			if got := after.String(); got != "agent line 1\nagent line 2\n" {
				t.Errorf("after the mark %q", got)
			}
		})
	}
}

// A line that only looks like the mark (another nonce, or not at a line's
// start) is output.
func TestHandoffIgnoresOtherMarks(t *testing.T) {
	h := newHandoff("@@pipette-standby-aa")
	h.Write([]byte("x @@pipette-standby-aa 0\n@@pipette-standby-bb 0\n"))
	select {
	case <-h.marked:
		t.Fatal("marked by a line that is not the mark")
	default:
	}
	if got := string(h.pending()); !strings.Contains(got, "bb 0") {
		t.Errorf("pending %q", got)
	}
}
