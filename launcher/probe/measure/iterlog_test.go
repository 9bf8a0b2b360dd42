package measure

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseIterationLogRealLines(t *testing.T) {
	for _, tc := range []struct {
		file        string
		globalBatch int
		skip        int
		format      string
		want        []float64 // seconds
	}{
		{"megatron_lm.log", 0, 1, FormatMegatron, []float64{87.8716, 89.4748, 89.0752}},
		// The Megatron line wins over the DeepSpeed timer beside it.
		{"megatron_deepspeed.log", 32, 0, FormatMegatron, []float64{4.1031}},
		{"deepspeed_timer.log", 16, 0, FormatDeepSpeed, []float64{16 / 16.807402094161112}},
		{"deepspeed_timer_0.7.log", 32, 1, FormatDeepSpeed, []float64{32 / 145.0889530760849, 32 / 157.80592669930536, 32 / 155.10475468488542}},
		{"deepspeed_timer_0.5.log", 8, 0, FormatDeepSpeed, []float64{8 / 83.48609168106144, 8 / 83.73838805358588}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "iterlogs", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ParseIterationLog(f, tc.globalBatch, tc.skip)
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tc.format || len(got.Seconds) != len(tc.want) {
				t.Fatalf("got %+v, want %s %v", got, tc.format, tc.want)
			}
			for i := range tc.want {
				if math.Abs(got.Seconds[i]-tc.want[i]) > 1e-9*tc.want[i] {
					t.Errorf("iteration %d: %g s, want %g", i, got.Seconds[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseIterationLogErrors(t *testing.T) {
	ds, _ := os.ReadFile(filepath.Join("testdata", "iterlogs", "deepspeed_timer.log"))
	for _, tc := range []struct{ name, log, want string }{
		{"nothing", "hello\nworld\n", "no iteration times"},
		{"deepspeed without batch", string(ds), "--global-batch-size"},
	} {
		_, err := ParseIterationLog(strings.NewReader(tc.log), 0, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	// More warm-up than iterations keeps the last one.
	l, err := ParseIterationLog(strings.NewReader(" iteration 1/ 2 | elapsed time per iteration (ms): 10.0 |\n iteration 2/ 2 | elapsed time per iteration (ms): 20.0 |\n"), 0, 5)
	if err != nil || len(l.Seconds) != 1 || l.Seconds[0] != 0.02 || l.MedianSeconds() != 0.02 {
		t.Errorf("got %+v, %v", l, err)
	}
}
