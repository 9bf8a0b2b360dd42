package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInputFilesRegularAndBounded (issue 31, items 5 and 6): every input
// file a flag names is opened as a regular file and read through a bound.
// /dev/zero (which grew to 22 GB), a FIFO (which hung forever), a
// directory and a sparse file one byte over 64 MiB are each refused at
// once, exit 2, naming the file and what is wrong with it.
func TestInputFilesRegularAndBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "adir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 64<<20+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
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
	for _, in := range []struct{ name, path, want string }{
		{"fifo", fifo, "is a named pipe (FIFO), not a regular file"},
		{"directory", sub, "is a directory, not a regular file"},
		{"dev-zero", "/dev/zero", "is a character device, not a regular file"},
		{"over-64MiB", big, "is larger than 64 MiB"},
	} {
		for _, f := range flags {
			if f.name == "calibrate LOG" && in.name == "over-64MiB" {
				continue // a log is streamed, not read whole: no size limit
			}
			if f.name == "run --vocab-file" && in.name == "over-64MiB" {
				continue // tokenizer files have a limit of their own (512 MiB)
			}
			t.Run(f.name+"/"+in.name, func(t *testing.T) {
				type result struct {
					code   int
					stderr string
				}
				done := make(chan result, 1)
				go func() {
					code, _, stderr := runCLI(t, f.args(in.path)...)
					done <- result{code, stderr}
				}()
				select {
				case r := <-done:
					if r.code != 2 || !strings.Contains(r.stderr, in.path+" "+in.want) {
						t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, in.path+" "+in.want)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("still reading %s after 20 s", in.path)
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
