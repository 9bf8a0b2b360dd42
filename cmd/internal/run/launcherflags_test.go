package run

import (
	"os"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/urfave/cli/v2"
)

// TestLauncherFlagsIgnoredWithReason (issue 21): torchrun's and DeepSpeed's
// launcher flags that do nothing here are accepted with a warning naming
// the flag and why (never "flag provided but not defined"), --tee with its
// own reason; --help and docs/launcher-flags.md list each one.
func TestLauncherFlagsIgnoredWithReason(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--bind_cores_to_rank"}, "--bind_cores_to_rank is ignored: ranks are not pinned to CPU cores"},
		{[]string{"--force_multi"}, "--force_multi is ignored: pipette-launch starts every listed host itself"},
		{[]string{"--autotuning", "run"}, "--autotuning is ignored: DeepSpeed's autotuner is not run"},
		{[]string{"--run-path"}, "--run-path is ignored: every rank runs the script as its own python process"},
		{[]string{"--local-addr", "10.0.0.1"}, "--local-addr is ignored: each host's address comes from"},
		{[]string{"--numa-binding", "node"}, "--numa-binding is ignored: ranks are not bound to NUMA nodes"},
		{[]string{"--tee", "3"}, "--tee is ignored: every rank's stdout and stderr are already streamed"},
		{[]string{"--node_rank", "0"}, "--node-rank is ignored: pipette-launch starts every host itself"},
		{[]string{"--event_log_handler", "console"}, "--event-log-handler is ignored: no torchelastic event handler is loaded"},
		{[]string{"--logs-specs", "per_cycle"}, "--logs-specs is ignored: no torchrun.logs_specs plugin is loaded"},
		{[]string{"--no_ssh"}, "--no_ssh is ignored: pipette-launch starts every host itself from one copy of the line"},
		{[]string{"--comment", "run 3"}, "--comment is ignored: there is no srun of DeepSpeed's Slurm launcher"},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"--dry-run", "--hosts", "localhost", "--no-check-script"}, tc.flags...), "train.py")...)
		if code != 0 || !strings.Contains(errOut, "warning: "+tc.want) {
			t.Errorf("%v: exit %d, want 0 and %q\nstderr: %s\nstdout: %.300s", tc.flags, code, tc.want, errOut, out)
		}
	}
	doc, err := os.ReadFile("../../../docs/launcher-flags.md")
	if err != nil {
		t.Fatal(err)
	}
	help := launchline.IgnoredFlagsHelp()
	for _, f := range launchline.IgnoredLauncherFlags() {
		why := strings.TrimPrefix(f.(cli.DocGenerationFlag).GetUsage(), "ignored: ")
		line := "--" + f.Names()[0] + "`: " + why + "."
		if !strings.Contains(string(doc), line) {
			t.Errorf("docs/launcher-flags.md lacks %q", line)
		}
		if !strings.Contains(help, "--"+f.Names()[0]+": "+why) {
			t.Errorf("--help lacks --%s", f.Names()[0])
		}
	}
}

// TestRdzvEndpointPortZero (issue 21): torchrun's --rdzv-endpoint HOST:0
// (torchrun docs, torchtitan) picks a free port instead of failing on a
// --master-port the user never typed.
func TestRdzvEndpointPortZero(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--no-check-script", "--nproc_per_node=2", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0", "train.py")
	if code != 0 || strings.Contains(out, "MASTER_PORT=0") || !strings.Contains(out, "MASTER_PORT=") || !strings.Contains(out, "a port free on this machine") {
		t.Errorf("exit %d\nstderr: %s\nstdout: %s", code, errOut, out)
	}
}

// TestIncludeSlotsWithoutColon (issue 21): --include worker-0@0,1 fails as
// in DeepSpeed ("0,1" is no host), saying that slots follow a colon.
func TestIncludeSlotsWithoutColon(t *testing.T) {
	code, _, errOut := runCLI(t, "--dry-run", "-H", "hostfile", "--include", "worker-1@0,1", "--no-check-script", "train.py")
	if code != 2 || !strings.Contains(errOut, `"0,1" is not a host`) || !strings.Contains(errOut, "worker-1:0,1") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestLauncherAs (issue 21): lines of python -m torch.distributed.launch and
// deepspeed --module carry no flag only their launcher has, so the user
// names it with --as (docs/launcher-flags.md): each gets what its own
// launcher gives (torchrun: nothing added, one rank by default;
// torch.distributed.launch: --local_rank=N unless --use_env; DeepSpeed:
// --local_rank=N and every GPU of this machine).
func TestLauncherAs(t *testing.T) {
	fakeGPUs(t, 4)
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	for _, tc := range []struct {
		name    string
		flags   []string
		want    []string
		notWant string
	}{
		{"no --as: torchrun", []string{"--module", "pkg.train"}, []string{"# job pipette: 1 ranks on 1 host", "python3 -u -m pkg.train --lr 1\n"}, "--local_rank"},
		{"torchrun", []string{"--as", "torchrun", "--nproc_per_node=2", "train.py"}, []string{"# job pipette: 2 ranks on 1 host", "python3 -u train.py --lr 1\n"}, "--local_rank"},
		{"python -m torch.distributed.run", []string{"--as", "torch.distributed.run", "train.py"}, []string{"python3 -u train.py --lr 1\n"}, "--local_rank"},
		{"torch.distributed.launch", []string{"--as", "torch.distributed.launch", "--nproc_per_node=2", "train.py"}, []string{"# job pipette: 2 ranks on 1 host", "python3 -u train.py --local_rank=1 --lr 1\n"}, ""},
		{"torch.distributed.launch --use_env", []string{"--as", "torch.distributed.launch", "--use_env", "--nproc_per_node=2", "train.py"}, []string{"python3 -u train.py --lr 1\n"}, "--local_rank"},
		{"deepspeed --module", []string{"--as", "deepspeed", "--module", "pkg.train"}, []string{"# job pipette: 4 ranks on 1 host", "python3 -u -m pkg.train --local_rank=3 --lr 1\n"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(append([]string{"--dry-run", "--no-check-script"}, tc.flags...), "--lr", "1")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			if tc.notWant != "" && strings.Contains(out, tc.notWant) {
				t.Errorf("has %q:\n%s", tc.notWant, out)
			}
		})
	}
	code, _, errOut := runCLI(t, "--dry-run", "--as", "mpirun", "train.py")
	if code != 2 || !strings.Contains(errOut, `--as "mpirun": want torchrun, deepspeed or torch.distributed.launch`) {
		t.Errorf("--as mpirun: exit %d, stderr %q", code, errOut)
	}
}

// TestShortIncludeExclude (issue 21): DeepSpeed's -i/-e are its
// --include/--exclude on a launch line, as a DeepSpeed user types them;
// -i naming a file (ssh's -i habit) is refused pointing at --identity.
func TestShortIncludeExclude(t *testing.T) {
	for _, tc := range []struct {
		flags   []string
		code    int
		want    string
		notWant string
	}{
		{[]string{"-i", "worker-2"}, 0, "# job pipette: 4 ranks on 1 host\n\n== host worker-2", "== host worker-1"},
		{[]string{"-e", "worker-1"}, 0, "== host worker-2", "== host worker-1"},
		{[]string{"-i", "hostfile"}, 2, "for an SSH key write --identity hostfile", ""},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"--dry-run", "--as", "deepspeed", "-H", "hostfile", "--no-check-script"}, tc.flags...), "train.py")...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) || (tc.notWant != "" && strings.Contains(out, tc.notWant)) {
			t.Errorf("%v: exit %d, want %d with %q and without %q\nstderr: %s\nstdout: %.400s", tc.flags, code, tc.code, tc.want, tc.notWant, errOut, out)
		}
	}
}
