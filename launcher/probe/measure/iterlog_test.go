package measure

import (
	"errors"
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
	// Issue 31: 1e30 ms was recorded as observed; zero, negative and NaN
	// were skipped, ending in "no iteration times found". Each is refused
	// with its line and the range.
	const meg = " iteration        3/      10 | consumed samples: 96 | elapsed time per iteration (ms): %s | learning rate: 1.0E-04 |\n"
	for _, tc := range []struct{ name, log, want string }{
		{"1e30 ms", "x\n" + strings.Replace(meg, "%s", "1e30", 1), "line 2: elapsed time per iteration (ms) is 1e30: want an iteration time from 0.000001 to 1000000 s"},
		{"zero", strings.Replace(meg, "%s", "0.0", 1), "line 1: elapsed time per iteration (ms) is 0.0: want an iteration time from"},
		{"negative", strings.Replace(meg, "%s", "-5", 1), "line 1: elapsed time per iteration (ms) is -5:"},
		{"nan", strings.Replace(meg, "%s", "nan", 1), "line 1: elapsed time per iteration (ms) is nan:"},
		{"ds zero rate", "[timer.py:258:stop] epoch=0/micro_step=1/global_step=1, RunningAvgSamplesPerSec=1, CurrSamplesPerSec=0, MemAllocated=1GB\n", "line 1: samples per second is 0: want a positive number"},
		{"ds absurd rate", "[timer.py:258:stop] epoch=0/micro_step=1/global_step=1, RunningAvgSamplesPerSec=1, CurrSamplesPerSec=1e-300, MemAllocated=1GB\n", "line 1: 1e-300 samples per second at a global batch of 16 is an iteration of 1.6e+301 s: want an iteration time from"},
	} {
		_, err := ParseIterationLog(strings.NewReader(tc.log), 16, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrNoIterationTimes) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseIterationLog(strings.NewReader("hello\n"), 0, 0); !errors.Is(err, ErrNoIterationTimes) {
		t.Errorf("no lines: %v, want ErrNoIterationTimes", err)
	}
	// More warm-up than iterations keeps the last one.
	l, err := ParseIterationLog(strings.NewReader(" iteration 1/ 2 | elapsed time per iteration (ms): 10.0 |\n iteration 2/ 2 | elapsed time per iteration (ms): 20.0 |\n"), 0, 5)
	if err != nil || len(l.Seconds) != 1 || l.Seconds[0] != 0.02 || l.MedianSeconds() != 0.02 {
		t.Errorf("got %+v, %v", l, err)
	}
}
