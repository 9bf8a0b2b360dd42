package measure

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestParseIterationLogLongLine (issue 31): a 20 MB line in a real
// Megatron-LM log (a printed tensor, a progress bar without newlines) is
// skipped over; the iteration lines before and after it are read, not
// "bufio.Scanner: token too long".
func TestParseIterationLogLongLine(t *testing.T) {
	real, err := os.ReadFile(filepath.Join("testdata", "iterlogs", "megatron_lm.log"))
	if err != nil {
		t.Fatal(err)
	}
	half := bytes.Index(real[len(real)/2:], []byte("\n")) + len(real)/2 + 1
	log := io.MultiReader(bytes.NewReader(real[:half]), bytes.NewReader(bytes.Repeat([]byte("0"), 20<<20)),
		bytes.NewReader([]byte("\n")), bytes.NewReader(real[half:]))
	got, err := ParseIterationLog(log, 0, 1)
	if err != nil {
		t.Fatalf("ParseIterationLog with a 20 MB line: %v", err)
	}
	want, err := ParseIterationLog(bytes.NewReader(real), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Seconds) != len(want.Seconds) {
		t.Errorf("with a 20 MB line: %d iterations; without it %d", len(got.Seconds), len(want.Seconds))
	}
}
