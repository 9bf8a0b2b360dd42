package remote

import (
	"bytes"
	"testing"
)

// The mark line may arrive cut anywhere, and the second command's output
// may come in the same write as the mark: the first command's output is
// what came before the mark's own newline, byte for byte (no final
// newline of its own here), its status is read, and everything after the
// mark reaches the second command's writer, in order, whenever that is set.
func TestHandoffSplitsAtTheMark(t *testing.T) {
	const mark = "@@pipette-standby-0123"
	first := "hostname\nno newline at the end"
	stream := first + "\n" + mark + " 3\n" + "agent line 1\nagent line 2\n"
	every := func() []int {
		var c []int
		for i := 1; i < len(stream); i++ {
			c = append(c, i)
		}
		return c
	}
	tests := []struct {
		name string
		cuts []int // write boundaries
	}{
		{"one write", nil},
		{"cut inside the mark", []int{len(first) + 10}},
		{"cut before the mark's newline", []int{len(first)}},
		{"cut before the status's newline", []int{len(first + "\n" + mark + " 3")}},
		{"byte by byte", every()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &handoff{mark: []byte("\n" + mark + " "), marked: make(chan struct{})}
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
			if h.w == nil {
				h.to(&after)
			}
			if got := string(h.first); got != first {
				t.Errorf("first output %q, want %q", got, first)
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
// start) is output; a status that is not a number is 255.
func TestHandoffMarkOnly(t *testing.T) {
	h := &handoff{mark: []byte("\n@@pipette-standby-aa "), marked: make(chan struct{})}
	h.Write([]byte("x @@pipette-standby-aa 0\n@@pipette-standby-bb 0\n"))
	select {
	case <-h.marked:
		t.Fatal("marked by a line that is not the mark")
	default:
	}
	h.Write([]byte("\n@@pipette-standby-aa 1x\n"))
	<-h.marked
	if want := "x @@pipette-standby-aa 0\n@@pipette-standby-bb 0\n"; string(h.first) != want || h.status != 255 {
		t.Errorf("first %q status %d, want %q 255", h.first, h.status, want)
	}
}

// stderr's handoff drops what came before Then (kept for errors only)
// and passes on what comes after.
func TestHandoffStderr(t *testing.T) {
	h := &handoff{}
	h.Write([]byte("login noise\n"))
	if string(h.held()) != "login noise\n" {
		t.Errorf("held %q", h.held())
	}
	var w bytes.Buffer
	h.to(&w)
	h.Write([]byte("agent\n"))
	if w.String() != "agent\n" {
		t.Errorf("passed on %q", w.String())
	}
}
