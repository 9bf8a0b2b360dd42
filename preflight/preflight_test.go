package preflight

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates"
)

func spec() *templates.PreflightSpec {
	return &templates.PreflightSpec{TimeoutS: 10, Bytes: 1 << 20, Iters: 3, Phases: []templates.PreflightPhase{
		{Name: "dp", Groups: []templates.PreflightGroup{
			{ID: "dp0", Type: "dp", Op: "allreduce", Ranks: []int{0, 2}, Hosts: []string{"a", "b"}, Transport: "IB", AssumedBytesPerS: 25e9},
		}},
		{Name: "pp-even", Groups: []templates.PreflightGroup{
			{ID: "pp0-1", Type: "pp", Op: "sendrecv", Ranks: []int{0, 1}, Hosts: []string{"a", "c"}, Transport: "Socket", AssumedBytesPerS: 1e9},
		}},
	}}
}

func lines(c *Collector, ls ...string) {
	for _, l := range ls {
		fmt.Fprintf(c, "%s\n", l)
	}
}

func TestEvaluate(t *testing.T) {
	t.Run("pass with bandwidth", func(t *testing.T) {
		var c Collector
		lines(&c, `a:0: ::pipette-preflight:: {"event":"group","id":"dp0","rank":0,"ok":true,"seconds":[0.001,0.002,0.001],"backend":"nccl"}`,
			`b:2: ::pipette-preflight:: {"event":"group","id":"dp0","rank":2,"ok":true,"seconds":[0.001,0.001,0.001],"backend":"nccl"}`,
			`a:0: ::pipette-preflight:: {"event":"group","id":"pp0-1","rank":0,"ok":true,"seconds":[0.0005],"backend":"nccl"}`,
			`c:1: ::pipette-preflight:: {"event":"group","id":"pp0-1","rank":1,"ok":true,"seconds":[0.0005],"backend":"nccl"}`,
			`a:0: some other output`)
		rep := Evaluate(spec(), c.Events(), 0.01)
		if rep.Failed != nil {
			t.Fatalf("failed: %s", rep.Reason)
		}
		// 2 ranks: bus bandwidth = bytes * 2(n-1)/n / slowest median (rank 0's 2 ms... median 0.001).
		if got, want := rep.Groups[0].MeasuredBytesPerS, float64(1<<20)/0.001; got != want {
			t.Errorf("dp0 %g B/s, want %g", got, want)
		}
		if got, want := rep.Groups[1].MeasuredBytesPerS, float64(1<<20)/0.0005; got != want {
			t.Errorf("pp %g B/s, want %g", got, want)
		}
		if o := c.Other(); len(o) != 1 || o[0] != "a:0: some other output" {
			t.Errorf("other lines %q", o)
		}
	})
	t.Run("nccl short", func(t *testing.T) {
		var c Collector
		lines(&c, `a:0: ::pipette-preflight:: {"event":"group","id":"dp0","rank":0,"ok":true,"seconds":[0.01],"backend":"nccl"}`,
			`b:2: ::pipette-preflight:: {"event":"group","id":"dp0","rank":2,"ok":true,"seconds":[0.01],"backend":"nccl"}`,
			`a:0: ::pipette-preflight:: {"event":"group","id":"pp0-1","rank":0,"ok":true,"seconds":[0.0005],"backend":"nccl"}`,
			`c:1: ::pipette-preflight:: {"event":"group","id":"pp0-1","rank":1,"ok":true,"seconds":[0.0005],"backend":"nccl"}`)
		rep := Evaluate(spec(), c.Events(), 0.5)
		if rep.Failed == nil || rep.Failed.ID != "dp0" || !strings.Contains(rep.Reason, "dp group dp0 (ranks 0,2 on a,b, IB) falls short: 0.10 GB/s, under 50% of the plan's 25.00 GB/s") {
			t.Fatalf("reason %q", rep.Reason)
		}
		// gloo is reported, not judged.
		for i := range c.events {
			c.events[i].Backend = "gloo"
		}
		if rep := Evaluate(spec(), c.Events(), 0.5); rep.Failed != nil {
			t.Errorf("gloo judged: %s", rep.Reason)
		}
	})
	t.Run("timeout names the pair", func(t *testing.T) {
		var c Collector
		lines(&c, `a:0: ::pipette-preflight:: {"event":"group","id":"dp0","rank":0,"ok":true,"seconds":[0.001],"backend":"gloo"}`,
			`b:2: ::pipette-preflight:: {"event":"group","id":"dp0","rank":2,"ok":true,"seconds":[0.001],"backend":"gloo"}`,
			`a:0: ::pipette-preflight:: {"event":"group","id":"pp0-1","rank":0,"ok":false,"error":"TimeoutError: no progress for 10s","elapsed":10.1,"backend":"gloo"}`,
			`c:1: ::pipette-preflight:: {"event":"group","id":"pp0-1","rank":1,"ok":false,"error":"RuntimeError: connect: Connection refused","elapsed":0.1,"backend":"gloo"}`,
			`a:0: ::pipette-preflight:: {"event":"pair","id":"pp0-1","rank":0,"hosts":["a","c"],"ok":false,"error":"no answer within 20s"}`,
			`c:1: ::pipette-preflight:: {"event":"pair","id":"pp0-1","rank":1,"hosts":["a","c"],"ok":false,"error":"RuntimeError: connect: Connection refused"}`)
		rep := Evaluate(spec(), c.Events(), 0.5)
		want := "pp group pp0-1 (ranks 0,1 on a,c, Socket) failed: rank 1 after 0.1s: RuntimeError: connect: Connection refused; link(s) that do not connect: a <-> c (RuntimeError: connect: Connection refused)"
		if rep.Reason != want {
			t.Fatalf("reason\n%s\nwant\n%s", rep.Reason, want)
		}
	})
	t.Run("missing rank", func(t *testing.T) {
		var c Collector
		lines(&c, `a:0: ::pipette-preflight:: {"event":"hang","rank":2,"what":"dp group dp0"}`)
		rep := Evaluate(spec(), c.Events(), 0.5)
		if rep.Failed == nil || !strings.Contains(rep.Reason, "did not finish: rank 0 never reported") {
			t.Fatalf("reason %q", rep.Reason)
		}
	})
}
