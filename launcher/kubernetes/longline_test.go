package kubernetes

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/lines"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
)

// TestReadLogLongLine (issue 31): a 20 MB line in a pod's log is printed
// cut, with a note, and the log is read on: the rank exit after it still
// arrives (bufio.Scanner stopped at it, leaving kubectl logs unread).
func TestReadLogLongLine(t *testing.T) {
	const tag = "@@pipette-0123456789abcdef"
	pod := k8s.Pod{Name: "j-cpu-0-1", Host: "cpu-1", NodeRank: 1, Ranks: []int{2, 3}}
	m := &k8s.Manifests{Name: "j", Pods: []k8s.Pod{pod}}
	var out syncBuffer
	s := newSupervisor(m, tag, Options{Out: &out})
	log := io.MultiReader(strings.NewReader("2 "), bytes.NewReader(bytes.Repeat([]byte("x"), 20<<20)),
		strings.NewReader("\n3 "+tag+" exit 3 7 1764096000000000000 0\n"))
	done := make(chan struct{})
	go func() { s.readLog(pod, log); close(done) }()
	select {
	case ev := <-s.events:
		if ev.rank != 3 || ev.code != 7 {
			t.Errorf("exit event %+v; want rank 3 code 7", ev)
		}
	case <-done:
		t.Fatalf("the log ended without the rank exit after the long line")
	}
	<-done
	want := " [pipette-launch: " + strconv.Itoa(20<<20+2-lines.Max) + " more bytes of this line not shown]\n"
	if got := out.String(); !strings.HasPrefix(got, "j-cpu-0-1:2: xxx") || !strings.HasSuffix(got, want) || len(got) > lines.Max+200 {
		t.Errorf("printed %d bytes ending %q; want the cut line ending %q", len(got), got[max(0, len(got)-80):], want)
	}
}
