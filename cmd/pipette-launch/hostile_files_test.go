package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/inputfile/inputfiletest"
	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// TestInputFilesRegularAndBounded (issue 31, items 5 and 6): every input
// file a flag names is opened as a regular file and read through a bound.
// /dev/zero (which grew to 22 GB), a FIFO (which hung forever), a
// directory and a sparse file one byte over 64 MiB are each refused at
// once, exit 2, naming the file and what is wrong with it.
func TestInputFilesRegularAndBounded(t *testing.T) {
	type input struct{ name, path, want string }
	var ins []input
	for _, in := range inputfiletest.NotRegulars(t) {
		ins = append(ins, input{in.Name, in.Path, "is " + in.Kind + ", not a regular file"})
	}
	big := inputfiletest.Sparse(t, t.TempDir(), "big.json", limits.MaxFileBytes+1)
	ins = append(ins, input{"over-64MiB", big, "is larger than 64 MiB"})
	flags := []struct {
		name string
		args func(p string) []string
	}{
		{"plan --cluster", func(p string) []string {
			return []string{"plan", "--model", "llama2-7b", "--global-batch-size", "64", "--cluster", p}
		}},
		{"plan --model", func(p string) []string { return []string{"plan", "--model", p, "--global-batch-size", "64"} }},
		{"run --env-file", func(p string) []string {
			return []string{"run", "--dry-run", "--hosts", "n1", "--env-file", p, "train.py"}
		}},
		{"run --cluster", func(p string) []string { return []string{"run", "--dry-run", "--cluster", p, "train.py"} }},
		{"run --deepspeed_config", func(p string) []string {
			return []string{"run", "--dry-run", "--hosts", "n1", "train.py", "--deepspeed", "--deepspeed_config", p}
		}},
		{"run --k8s-config", func(p string) []string {
			return []string{"run", "--dry-run", "--launcher", "k8s", "--hosts", "n1", "--k8s-config", p, "train.py"}
		}},
		{"run --k8s-pod-patch", func(p string) []string {
			return []string{"run", "--dry-run", "--launcher", "k8s", "--hosts", "n1", "--k8s-pod-patch", p, "train.py"}
		}},
		{"calibrate --cluster", func(p string) []string { return []string{"calibrate", "--cluster", p, "x.log"} }},
		{"calibrate --plan", func(p string) []string {
			return []string{"calibrate", "--cluster", "a100-16x8.yaml", "--plan", p, "x.log"}
		}},
		{"calibrate LOG", func(p string) []string {
			return []string{"calibrate", "--cluster", "a100-16x8.yaml", "--model", "llama2-7b", "--global-batch-size", "64", "--tp", "1", "--pp", "1", p}
		}},
		{"run --vocab-file", func(p string) []string {
			return []string{"run", "--dry-run", "--hosts", "n1", "pretrain_gpt.py", "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", p,
				"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
				"--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "8"}
		}},
	}
	for _, in := range ins {
		for _, f := range flags {
			if f.name == "calibrate LOG" && in.name == "over-64MiB" {
				continue // a log is streamed, not read whole: no size limit
			}
			if f.name == "run --vocab-file" && in.name == "over-64MiB" {
				continue // tokenizer files have a limit of their own (512 MiB)
			}
			t.Run(f.name+"/"+in.name, func(t *testing.T) {
				var code int
				var stderr string
				inputfiletest.Within(t, 20*time.Second, "reading "+in.path, func() { code, _, stderr = runCLI(t, f.args(in.path)...) })
				if code != 2 || !strings.Contains(stderr, in.path+" "+in.want) {
					t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, in.path+" "+in.want)
				}
			})
		}
	}
}

// TestEnvFileLongLine (issue 31, item 14): an env file with a 2 MB line is
// refused naming the file and the line limit, not with a bare
// "bufio.Scanner: token too long".
func TestEnvFileLongLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(p, []byte("A="+strings.Repeat("x", 2<<20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--dry-run", "--hosts", "n1", "--env-file", p, "train.py")
	if want := "env file " + p + ": a line longer than 1 MiB"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}
