package progress

import (
	"bytes"
	"testing"
)

func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := New(&b)
	p.Update("probe: %d/%d hosts", 1, 2)
	p.Update("probe: %d/%d hosts", 1, 2) // repeated: shown once
	p.Update("probe: %d/%d hosts", 2, 2)
	p.Done()
	if got, want := b.String(), "probe: 1/2 hosts\nprobe: 2/2 hosts\n"; got != want {
		t.Errorf("plain progress %q, want %q", got, want)
	}
	var none *Line
	none.Update("ignored %d", 1) // a nil Line shows nothing and does not panic
	none.Done()
}

func TestProgressInPlaceOnTerminal(t *testing.T) {
	var b bytes.Buffer
	p := &Line{w: &b, tty: true}
	p.Update("measure: round %d/%d", 1, 3)
	p.Update("measure: round %d/%d", 2, 3)
	p.Done()
	if got, want := b.String(), "\r\x1b[Kmeasure: round 1/3\r\x1b[Kmeasure: round 2/3\n"; got != want {
		t.Errorf("terminal progress %q, want %q", got, want)
	}
}
