package measure

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

func TestRoundRobinRounds(t *testing.T) {
	for n := 0; n <= 17; n++ {
		rounds := RoundRobinRounds(n)
		wantRounds := n - 1
		if n%2 == 1 {
			wantRounds = n
		}
		if n < 2 {
			wantRounds = 0
		}
		if len(rounds) != wantRounds {
			t.Errorf("n=%d: %d rounds, want %d", n, len(rounds), wantRounds)
		}
		seen := map[[2]int]bool{}
		for r, pairs := range rounds {
			busy := map[int]bool{}
			if len(pairs) != n/2 {
				t.Errorf("n=%d round %d: %d pairs, want %d", n, r, len(pairs), n/2)
			}
			for _, p := range pairs {
				if busy[p[0]] || busy[p[1]] {
					t.Errorf("n=%d round %d: host in two pairs: %v", n, r, pairs)
				}
				busy[p[0]], busy[p[1]] = true, true
				if p[0] >= p[1] || p[1] >= n || seen[p] {
					t.Errorf("n=%d: bad or repeated pair %v", n, p)
				}
				seen[p] = true
			}
		}
		if len(seen) != n*(n-1)/2 {
			t.Errorf("n=%d: %d distinct pairs, want %d", n, len(seen), n*(n-1)/2)
		}
	}
}

func TestParseIperf3JSONCaptures(t *testing.T) {
	for _, tc := range []struct {
		file    string
		want    float64
		errText string
	}{
		{file: "client-forward.json", want: 7.254169224206325},
		{file: "client-reverse-shaped-100mbit.json", want: 0.0960680891910809},
		{file: "client-refused.json", errText: "Connection refused"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			capture, err := os.ReadFile(filepath.Join("testdata", "iperf3", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseIperf3JSON(capture)
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("err = %v, want %q", err, tc.errText)
				}
				return
			}
			if err != nil || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := ParseIperf3JSON([]byte("iperf3: error")); err == nil {
		t.Error("want an error for non-JSON output")
	}
}

func TestMeasureCache(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	hosts := []Host{{Name: "a", Addr: "198.18.0.11"}, {Name: "b", Addr: "198.18.0.12"}}
	at := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	m := &cluster.MeasuredBandwidth{MeasuredAt: at, Tool: MeasureTool, Hosts: []string{"a", "b"},
		GbitPerS: [][]float64{{0, 9.5}, {0.1, 0}}}
	if _, ok := c.Load(hosts, time.Hour, at); ok {
		t.Fatal("hit before anything was saved")
	}
	if err := c.Save(hosts, m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		hosts []Host
		now   time.Time
		hit   bool
	}{
		{"fresh", hosts, at.Add(59 * time.Minute), true},
		{"stale", hosts, at.Add(61 * time.Minute), false},
		{"other address", []Host{{Name: "a", Addr: "198.18.0.11"}, {Name: "b", Addr: "198.18.0.99"}}, at, false},
		{"other order", []Host{hosts[1], hosts[0]}, at, false},
	} {
		got, ok := c.Load(tc.hosts, time.Hour, tc.now)
		if ok != tc.hit {
			t.Errorf("%s: hit %v, want %v", tc.name, ok, tc.hit)
		}
		if ok && (!reflect.DeepEqual(got.GbitPerS, m.GbitPerS) || !got.MeasuredAt.Equal(at)) {
			t.Errorf("%s: loaded %+v, want %+v", tc.name, got, m)
		}
	}
	ents, _ := os.ReadDir(c.Dir)
	if len(ents) != 1 {
		t.Errorf("cache dir holds %d files, want 1 (no temp files left)", len(ents))
	}
	// The matrix names a private cluster's hosts: the directory is the
	// user's own, as the launch probe cache's is.
	if st, err := os.Stat(c.Dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode %v, %v; want 0700", st.Mode().Perm(), err)
	}
}

func TestMatrixTable(t *testing.T) {
	m := &cluster.MeasuredBandwidth{Hosts: []string{"a", "b"}, GbitPerS: [][]float64{{0, 9.5}, {0.096, 0}}}
	got := MatrixTable(m)
	for _, want := range []string{"9.500", "0.096", "-"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
