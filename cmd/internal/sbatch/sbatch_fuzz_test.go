package sbatch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/scripttest"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

// batchCase is one batch script's values: what the renderer is given.
type batchCase struct {
	jobName, time, partition, account, extra, wd string
	signal                                       int // seconds
	args                                         []string
}

var hostileBatches = []batchCase{
	{jobName: "jn\n#SBATCH --uid=0", time: "1:00:00", args: []string{"x"}},
	{jobName: `my "job" #1 \ x`, time: "1:00:00\ntouch PWNED", signal: 120, partition: "p;x", args: []string{"a b", "it's"}},
	{jobName: "j", time: "2-12:30", signal: 300, partition: "gpu,gpu-long", account: "proj_1.a", extra: "--comment='a #b'", wd: "w d\n$(x)", args: []string{"$(touch PWNED)", "\n"}},
	{jobName: "j'", time: "banana", extra: "--exclusive\ntouch PWNED", args: nil},
	{jobName: "j", time: "10", signal: 999 * 3600, extra: `--comment="unmatched`, args: []string{"x"}},
}

// The batch script, read as Slurm's sbatch reads it, holds exactly the
// directives asked for, all before the body; run by a real sh, its body
// starts the command in the launch directory with exactly the argv given,
// and it holds no line the renderer did not write; or sbatch refuses the
// values.
func TestBatchScriptDeliversValues(t *testing.T) {
	for _, c := range hostileBatches {
		if err := checkBatch(t, c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func FuzzBatchScript(f *testing.F) {
	for _, c := range hostileBatches {
		f.Add(c.jobName, c.time, c.partition, c.account, c.extra, c.wd, c.signal, strings.Join(c.args, "\x00"))
	}
	f.Fuzz(func(t *testing.T, jobName, tm, partition, account, extra, wd string, signal int, args string) {
		c := batchCase{jobName: jobName, time: tm, partition: partition, account: account, extra: extra, wd: wd, signal: signal,
			args: scripttest.Words(args)}
		if scripttest.Skip([]string{jobName, tm, partition, account, extra, wd}, len(c.args)) {
			return
		}
		if err := checkBatch(t, c); err != nil {
			t.Fatal(err)
		}
	})
}

func checkBatch(t *testing.T, c batchCase) error {
	h := scripttest.NewHarness(t)
	wd := scripttest.Component(h.Dir, c.wd)
	if err := os.Mkdir(wd, 0o700); err != nil { // where sbatch was run
		return err
	}
	opts := func(jobName, tm, partition, account, extra string) Options {
		o := Options{JobName: jobName, Time: tm, Partition: partition, Account: account,
			SignalBefore: time.Duration(c.signal) * time.Second}
		if extra != "" {
			o.Extra = []string{extra}
		}
		return o
	}
	o := opts(c.jobName, c.time, c.partition, c.account, c.extra)
	if err := checkDirectives(&o); err != nil {
		return nil // refused, by name
	}
	nodes := batchNodes{Count: 2, Names: []string{"n1", "n2"}, GPUsPerNode: 8}
	script := batchScript(o, nodes, wd, slices.Concat(h.Printer, c.args))

	// As Slurm reads it.
	want := []string{"--job-name=" + c.jobName, "--nodes=2", "--ntasks-per-node=1", "--nodelist=n1,n2", "--gpus-per-node=8"}
	if c.time != "" {
		want = append(want, "--time="+c.time)
		if c.signal > 0 {
			want = append(want, fmt.Sprintf("--signal=B:TERM@%d", c.signal))
		}
	}
	if c.partition != "" {
		want = append(want, "--partition="+c.partition)
	}
	if c.account != "" {
		want = append(want, "--account="+c.account)
	}
	for rest := c.extra; ; {
		w, n, _ := slurmArgument(rest)
		if n == 0 {
			break
		}
		if w != "" {
			want = append(want, w)
		}
		rest = rest[n:]
	}
	if got := slurmDirectives(t, script); !slices.Equal(got, want) {
		return fmt.Errorf("Slurm reads the directives %q, want %q\n%s", got, want, script)
	}

	// As sh reads it.
	var sk scripttest.Skeleton
	mark := func(v string) string {
		if v == "" {
			return "" // an empty value writes no line
		}
		return sk.Mark(v)
	}
	skOpts := opts(mark(c.jobName), mark(c.time), mark(c.partition), mark(c.account), mark(c.extra))
	skWD := filepath.Join(h.Dir, mark(filepath.Base(wd)))
	skeleton := batchScript(skOpts, nodes, skWD, slices.Concat(h.Printer, sk.MarkAll(c.args)))
	if err := scripttest.SameLines(script, skeleton, sk.Values); err != nil {
		return err
	}
	rec, err := h.Run(script)
	if err != nil {
		return err
	}
	if rec.Dir != wd {
		return fmt.Errorf("the command ran in %q, want %q", rec.Dir, wd)
	}
	return rec.Check(c.args, scripttest.WantEnv(nil), "PWD", "OLDPWD")
}
