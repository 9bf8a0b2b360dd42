package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// With --json every error is one JSON object on stderr naming the flag or
// cluster-file field, with the exit code; without it, the text line.
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badCluster := filepath.Join(dir, "bad.yaml")
	b, err := os.ReadFile("../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "gpus_per_host: 8", "gpus_per_host: 0", 1)
	if bad == string(b) {
		t.Fatal("examples/cluster.yaml has no gpus_per_host: 8 to break")
	}
	if err := os.WriteFile(badCluster, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		field     string
		inMessage string
	}{
		{"run --json without --dry-run", []string{"run", "--json", "--no-check-script", "train.py"}, 2, "--json", "--dry-run"},
		{"bare --json without --dry-run", []string{"--json", "--no-check-script", "train.py"}, 2, "--json", "--dry-run"},
		{"run bad flag value", []string{"--dry-run", "--json", "--master-port", "0", "train.py"}, 2, "--master-port", "1-65535"},
		{"run unknown flag", []string{"run", "--json", "--dry-runn", "train.py"}, 2, "", "dry-runn"},
		{"plan bad --tp", []string{"plan", "--json", "--model", "gpt3-13b", "--global-batch-size", "256", "--tp", "3"}, 2, "--tp", "--tp"},
		{"plan cluster field", []string{"plan", "--cluster", badCluster, "--json", "--model", "gpt3-13b", "--global-batch-size", "256"}, 2, "clusters[0].gpus_per_host", "gpus_per_host"},
		{"plan does not fit", []string{"plan", "--json", "--model", "gpt3-175b", "--global-batch-size", "64", "--no-offload"}, 3, "", "misses by"},
		{"sbatch --json", []string{"sbatch", "--json", "--no-check-script", "train.py"}, 2, "--json", "batch script"},
		{"probe bad --group", []string{"probe", "--json", "--hosts", "a", "--group", "rack"}, 2, "--group", "rack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAppBuffers(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q on an error", stdout)
			}
			var got struct {
				Error    string `json:"error"`
				Field    *string
				ExitCode *int `json:"exit_code"`
			}
			dec := json.NewDecoder(strings.NewReader(stderr))
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stderr is not a JSON error: %v\n%s", err, stderr)
			}
			if dec.More() {
				t.Fatalf("more than one JSON object on stderr:\n%s", stderr)
			}
			if got.Field == nil || *got.Field != tc.field || got.ExitCode == nil || *got.ExitCode != tc.code || !strings.Contains(got.Error, tc.inMessage) {
				t.Fatalf("got %s, want field %q exit_code %d and %q in the error", stderr, tc.field, tc.code, tc.inMessage)
			}
			// The same command without --json prints the text line.
			textArgs := slices.DeleteFunc(slices.Clone(tc.args), func(a string) bool { return a == "--json" })
			if _, _, text := runAppBuffers(textArgs...); strings.HasPrefix(strings.TrimSpace(text), "{") {
				t.Errorf("without --json stderr is JSON: %s", text)
			}
		})
	}
}

// --json after the script is the script's own flag: errors stay text.
func TestWantsJSON(t *testing.T) {
	t.Parallel()
	app := testApp(&cmdutil.IOStreams{})
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"plan", "--json"}, true},
		{[]string{"plan", "--model", "x", "--json=true"}, true},
		{[]string{"plan", "--json=false"}, false},
		{[]string{"--dry-run", "--json", "train.py"}, true},
		{[]string{"run", "--cluster", "c.yaml", "-json", "train.py"}, true},
		{[]string{"run", "--dry-run", "train.py", "--json"}, false},
		{[]string{"--nproc-per-node", "8", "train.py", "--json"}, false},
		{[]string{"--master-port", "29500", "--", "--json"}, false},
		{[]string{"probe", "-o", "-", "--json"}, true},
	} {
		if got := cmdutil.WantsJSON(app, append([]string{"pipette-launch"}, tc.args...)); got != tc.want {
			t.Errorf("WantsJSON(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
	code, _, stderr := runAppBuffers("--master-port", "0", "train.py", "--json")
	if code != 2 || strings.HasPrefix(stderr, "{") || !strings.Contains(stderr, "--master-port") {
		t.Fatalf("script's --json: exit %d, stderr %q; want the text error", code, stderr)
	}
}
