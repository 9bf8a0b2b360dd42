package cluster

import (
	"math"
	"strings"
	"testing"
)

// TestParseClusterFileHostileNumbers (issue 31): NaN, infinite and absurd
// numbers loaded and were planned with (`rate_gbit_per_s: .nan` ended in a
// schedule deadlock; `memory_gib: 1e308` printed 17.7/+Inf; a calibration
// factor of 1e-300 gave an A100 2797 TFLOP/s); `memory_gib: -1` added a
// false "unknown GPU"; n1 and N1 were two hosts; "xxA100-80GB-SXM" was an
// A100. Each is refused with the field path and the allowed range.
func TestParseClusterFileHostileNumbers(t *testing.T) {
	const calib = "calibration:\n  compute: {factor: %s, observations: 1}\n  runs:\n    - {source: r.log, plan: p, iterations: 3, observed_iteration_s: %s, predicted_iteration_s: 1, parts_s: {compute: 1}}\n"
	for _, tc := range []struct {
		name, old, new, want, notWant string
	}{
		{"nan rate", "rate_gbit_per_s: 100", "rate_gbit_per_s: .nan", "clusters[1].nics[0].rate_gbit_per_s (line 12, column 56): got .nan; want a finite number", ""},
		{"inf rate", "rate_gbit_per_s: 100", "rate_gbit_per_s: .inf", "clusters[1].nics[0].rate_gbit_per_s (line 12, column 56): got .inf; want a finite number", ""},
		{"huge rate", "rate_gbit_per_s: 100", "rate_gbit_per_s: 1e308", "clusters[1].nics[0].rate_gbit_per_s (line 12, column 56): must be 0 (not given) or a number from 0.001 to 100000 Gbit/s, got 1e+308", ""},
		{"tiny rate", "rate_gbit_per_s: 100", "rate_gbit_per_s: 1e-300", "clusters[1].nics[0].rate_gbit_per_s (line 12, column 56): must be 0 (not given) or a number from 0.001 to 100000 Gbit/s, got 1e-300", ""},
		{"inf tflops", "{model: L40S}", "{model: L40S, peak_bf16_tflops: .inf}", "clusters[1].gpu.peak_bf16_tflops (line 11, column 42): got .inf; want a finite number", ""},
		{"huge tflops", "{model: L40S}", "{model: L40S, peak_bf16_tflops: 1e9}", "clusters[1].gpu.peak_bf16_tflops (line 11, column 42): must be 0 (not given) or a number from 0.0001 to 100000 TFLOP/s, got 1e+09", ""},
		{"huge fp8 tflops", "{model: L40S}", "{model: L40S, peak_fp8_tflops: 1e300}", "clusters[1].gpu.peak_fp8_tflops (line 11, column 41): must be 0 (not given) or a number from 0.0001 to 100000 TFLOP/s, got 1e+300", ""},
		{"huge memory", "{model: L40S}", "{model: L40S, memory_gib: 1e308}", "clusters[1].gpu.memory_gib (line 11, column 36): must be 0 (not given) or a number from 0.001 to 100000 GiB, got 1e+308", ""},
		{"negative memory, no unknown GPU", "{model: L40S}", "{model: L40S, memory_gib: -1}", "clusters[1].gpu.memory_gib (line 11, column 36): must be 0 (not given) or a number from 0.001 to 100000 GiB, got -1", "unknown GPU"},
		{"huge HBM", "{model: L40S}", "{model: L40S, memory_bandwidth_tbyte_per_s: 1e6}", "clusters[1].gpu.memory_bandwidth_tbyte_per_s (line 11, column 54): must be 0 (not given) or a number from 0.0001 to 1000 TB/s, got 1e+06", ""},
		{"huge host memory", "gpu: {model: L40S}", "gpu: {model: L40S}\n    host_memory_gib: 1e20", "clusters[1].host_memory_gib (line 12, column 22): must be 0 (not given) or a number from 0.001 to 100000 GiB, got 1e+20", ""},
		{"huge intra bus", "gpu: {model: L40S}", "gpu: {model: L40S}\n    intra_host: {bandwidth_gbyte_per_s: 1e300}", "clusters[1].intra_host.bandwidth_gbyte_per_s (line 12, column 41): must be 0 (not given) or a number from 0.001 to 100000 GB/s", ""},
		{"link latency", "", "links: [{between: [a, b], type: ethernet, bandwidth_gbit_per_s: 10, latency_us: 1e300}]", "links[0].latency_us (line 13, column 81): must be 0 (not given) or a number from 0.001 to 1000000 us, got 1e+300", ""},
		{"link nan", "", "links: [{between: [a, b], type: ethernet, bandwidth_gbit_per_s: .NaN}]", "links[0].bandwidth_gbit_per_s (line 13, column 65): got .NaN; want a finite number", ""},
		{"measured huge", "", "measured: {hosts: [a1, a2], gbit_per_s: [[0, 1e300], [1, 0]]}", "measured.gbit_per_s[0][1] (line 13, column 46): must be 0 (not given) or a number from 0.001 to 100000 Gbit/s, got 1e+300", ""},
		{"calibration factor", "", strings.Replace(strings.Replace(calib, "%s", "1e-300", 1), "%s", "2", 1), "calibration.compute.factor (line 14, column 21): must be a number from 0.05 to 20, got 1e-300", ""},
		{"observed 1e30 s", "", strings.Replace(strings.Replace(calib, "%s", "1.1", 1), "%s", "1e30", 1), "calibration.runs[0].observed_iteration_s (line 16, column 69): must be a number from 0.000001 to 1000000 s, got 1e+30", ""},
		{"hosts differing in case", "hosts: b1", "hosts: [b1, B1]", `clusters[1].hosts[1] (line 9, column 17): duplicate host "B1" (also clusters[1].hosts[0], as "b1": host names are case-insensitive); list each host once`, ""},
		{"hosts differing in case across islands", "hosts: b1", "hosts: A1", `clusters[1].hosts[0] (line 9, column 12): duplicate host "A1" (also clusters[0].hosts[0], as "a1": host names are case-insensitive)`, ""},
		{"xx GPU", "{model: L40S}", "{model: xxA100-80GB-SXM}", `clusters[1].gpu.model (line 11, column 18): unknown GPU "xxA100-80GB-SXM": the catalog has GB200, B200,`, ""},
		{"banana GPU", "{model: L40S}", "{model: A100-80GB-SXM banana}", `clusters[1].gpu.model (line 11, column 18): unknown GPU "A100-80GB-SXM banana": the catalog has`, ""},
	} {
		doc := validBase
		if tc.old == "" {
			doc += tc.new
		} else {
			if !strings.Contains(doc, tc.old) {
				t.Fatalf("%s: base lacks %q", tc.name, tc.old)
			}
			doc = strings.Replace(doc, tc.old, tc.new, 1)
		}
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.notWant != "" && strings.Contains(err.Error(), tc.notWant)) {
			t.Errorf("%s: error %v\nwant it to contain %q", tc.name, err, tc.want)
		}
	}
}

// A File built in code (not parsed) gets the same checks from Validate and
// Resolve: a NaN NIC rate cannot reach the planner.
func TestResolveRefusesNaNRate(t *testing.T) {
	f := mustParseCluster(t, validBase)
	f.Clusters[0].NICs[0].RateGbitPerS = math.NaN()
	if _, err := f.Resolve(); err == nil || !strings.Contains(err.Error(), "clusters[0].nics[0].rate_gbit_per_s: must be a number from 0.001 to 100000 Gbit/s, got NaN") {
		t.Errorf("Resolve with a NaN rate: %v", err)
	}
}
