package hostname

import (
	"strings"
	"testing"
)

// TestCheckNamesTheCharacter (issue 31): "bücher.de" was reported as
// containing 'Ã' at byte 1 (the first byte of 'ü' printed as a rune); the
// message names the character as written.
func TestCheckNamesTheCharacter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bücher.de", `contains 'ü' (U+00FC, not ASCII) at byte 1`},
		{"a;b", `contains ';' at byte 1`},
		{"w\x01", `contains '\x01' at byte 1`},
		{"ab\xff", `contains the byte "\xff" (not UTF-8) at byte 2`},
		{"x\uFFFD", `contains '�' (U+FFFD, not ASCII) at byte 1`},
	} {
		err := Check(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want %s", tc.in, err, tc.want)
		}
	}
	if err := CheckUser("jürgen"); err == nil || !strings.Contains(err.Error(), `contains 'ü' (U+00FC, not ASCII) at byte 1`) {
		t.Errorf("CheckUser: %v", err)
	}
	if Key("Node-1.Example") != Key("node-1.example") {
		t.Error("Key must fold case")
	}
}
