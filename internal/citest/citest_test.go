package citest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// setupHeading is the README section whose first sh block holds the set-up
// commands.
const setupHeading = "## Set-up on a fresh machine"

// readmeSetupCommands returns the command lines of the first ```sh block
// after the set-up heading: every line that is neither blank nor a comment.
func readmeSetupCommands(readme string) ([]string, bool) {
	i := strings.Index(readme, setupHeading)
	if i < 0 {
		return nil, false
	}
	rest := readme[i:]
	start := strings.Index(rest, "```sh\n")
	if start < 0 {
		return nil, false
	}
	rest = rest[start+len("```sh\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		return nil, false
	}
	return commandLines(rest[:end]), true
}

// commandLines drops blank lines and comments.
func commandLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// preamble lines may stand in .ci/run before the README's commands: each
// only sets up the shell a user already has (strict errors, the checkout as
// working directory, Go on PATH where Debian's image puts it). A package
// install, a build or a download there is a set-up step the README does not
// give, so it fails the check.
var preamble = []*regexp.Regexp{
	regexp.MustCompile(`^set -[euo]+( pipefail)?$`),
	regexp.MustCompile(`^cd "\$\(dirname "\$0"\)/\.\."$`),
	regexp.MustCompile(`^export PATH="\$PATH:/usr/local/go/bin"$`),
}

// checkCIRunsREADME returns what is wrong with ci as the runner of the
// README's set-up commands, or "" when it runs them first and as written.
func checkCIRunsREADME(readmeCmds, ciLines []string) []string {
	var problems []string
	if len(readmeCmds) != 2 {
		problems = append(problems, "README.md's set-up block must hold exactly two commands, has: "+strings.Join(readmeCmds, " | "))
	}
	i := 0
	for ; i < len(ciLines); i++ {
		if !matchesAny(preamble, ciLines[i]) {
			break
		}
	}
	for j, want := range readmeCmds {
		if i+j >= len(ciLines) {
			problems = append(problems, ".ci/run ends before README's command "+want)
			continue
		}
		if got := ciLines[i+j]; got != want {
			problems = append(problems, ".ci/run runs "+got+" where README.md's set-up command is "+want+
				" (only shell set-up may come before README's commands)")
		}
	}
	return problems
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

// TestCIRunsREADMESetupCommands holds README.md and .ci/run together.
func TestCIRunsREADMESetupCommands(t *testing.T) {
	readmeCmds, ok := readmeSetupCommands(readRepoFile(t, "README.md"))
	if !ok {
		t.Fatalf("README.md: no ```sh block under %q", setupHeading)
	}
	ci := commandLines(readRepoFile(t, ".ci/run"))
	// The shebang is a comment to commandLines; a script without one is
	// still checked line by line.
	for _, p := range checkCIRunsREADME(readmeCmds, ci) {
		t.Error(p)
	}
}

// TestCheckCIRunsREADMECatchesDrift proves the check fails on the drifts it
// exists for.
func TestCheckCIRunsREADMECatchesDrift(t *testing.T) {
	readme := []string{"go run ./cmd/pipette-launch plan --model gpt3-13b", "make test"}
	tests := []struct {
		name  string
		ci    []string
		wantN int
	}{
		{"as written", []string{"set -euo pipefail", `cd "$(dirname "$0")/.."`, readme[0], readme[1], "make conformance"}, 0},
		{"a hidden build first", []string{"set -euo pipefail", "./.ci/build-kubernetes", readme[0], readme[1]}, 2},
		{"plan missing", []string{"make test"}, 2},
		{"command changed", []string{readme[0], "make test FUZZSCALE=0"}, 1},
		{"apt-get before", []string{"apt-get install -y make", readme[0], readme[1]}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkCIRunsREADME(readme, tt.ci); len(got) != tt.wantN {
				t.Errorf("problems = %d %q, want %d", len(got), got, tt.wantN)
			}
		})
	}
	if got := checkCIRunsREADME(readme[:1], []string{readme[0]}); len(got) != 1 {
		t.Errorf("a README with one command: problems %q, want 1", got)
	}
}

func TestReadmeSetupCommandsReadsFirstShBlock(t *testing.T) {
	text := "# x\n\n" + setupHeading + "\n\n```sh\n# one\ngo run ./a\n\n# two\nmake test\n```\n\n```sh\nnot this\n```\n"
	got, ok := readmeSetupCommands(text)
	if !ok || strings.Join(got, "|") != "go run ./a|make test" {
		t.Fatalf("got %q %v", got, ok)
	}
	if _, ok := readmeSetupCommands("no heading"); ok {
		t.Fatal("found a block without the heading")
	}
}
