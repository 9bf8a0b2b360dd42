package scripttest

import "testing"

// SameLines accepts a value's line breaks inside a word of a command line
// and refuses one in a comment, a missing line and an added one.
func TestSameLines(t *testing.T) {
	skeleton := "#!/bin/sh\n# job " + Marker(0) + " here\nexec x " + Marker(1) + "\n"
	values := []string{"j", "a\nb"}
	for _, tc := range []struct {
		script string
		ok     bool
	}{
		{"#!/bin/sh\n# job 'j' here\nexec x 'a\nb'\n", true},
		{"#!/bin/sh\n# job j\ntouch PWNED here\nexec x 'a\nb'\n", false}, // the comment broke
		{"#!/bin/sh\n# job j here\nexec x 'a\nb'\ntouch PWNED\n", false}, // a line added
		{"#!/bin/sh\n# job j here\nexec x 'a b'\n", false},               // a line missing
		{"#!/bin/bash\n# job j here\nexec x 'a\nb'\n", false},            // a fixed line changed
	} {
		err := SameLines(tc.script, skeleton, values)
		if (err == nil) != tc.ok {
			t.Errorf("SameLines(%q) = %v, want ok %v", tc.script, err, tc.ok)
		}
	}
	if v := []string{"j\nx", "a"}; SameLines("#!/bin/sh\n# job j\\nx here\nexec x a\n", skeleton, v) != nil {
		t.Error("an escaped line break in a comment was refused")
	}
}
