package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

func TestDeepSpeedConfigsPassDeepSpeedChecks(t *testing.T) {
	for _, stage := range []int{0, 1, 2, 3} {
		for _, frac := range []float64{0, 0.5, 1} {
			for _, params := range []bool{false, true} {
				for _, fp16 := range []bool{false, true} {
					if (frac > 0 && stage == 0) || (frac > 0 && frac < 1 && stage != 3) || (params && stage != 3) {
						continue // the planner does not produce these
					}
					cfg := parallel.Config{TP: 1, PP: 1, DP: 6, CP: 1, MicroBatch: 2, GlobalBatch: 48, ZeroStage: stage,
						Offload: parallel.Offload{OptimizerFraction: frac, Params: params}}
					data, err := MarshalDSConfig(DeepSpeedConfig(cfg, fp16))
					if err != nil {
						t.Fatal(err)
					}
					if err := CheckDSConfig(data, cfg.DP, cfg.PP); err != nil {
						t.Errorf("stage %d offload %g params %v fp16 %v: %v\n%s", stage, frac, params, fp16, err, data)
					}
					if got := strings.Contains(string(data), `"gradient_accumulation_steps": 4`); !got {
						t.Errorf("48 = 2 * 4 * 6 should give 4 accumulation steps:\n%s", data)
					}
				}
			}
		}
	}
}

func TestCheckDSConfigRejectsBadConfigs(t *testing.T) {
	cases := []struct {
		name, json string
		dp, pp     int
		want       string
	}{
		{"batch rule", `{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 1}}`, 8, 1, "!= micro 2 * gradient_accumulation_steps 2 * data-parallel size 8"},
		{"missing gas", `{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}`, 8, 1, "must all be integers"},
		{"both precisions", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "fp16": {"enabled": true}}`, 8, 1, "both enabled"},
		{"stage 4", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 4}}`, 8, 1, "want 0-3"},
		{"pp with zero 2", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 2}}`, 4, 2, "not compatible with ZeRO stage 2"},
		{"offload stage 1 of param", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 1, "offload_param": {"device": "cpu"}}}`, 8, 1, "needs stage 3"},
		{"ratio stage 2", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}`, 8, 1, "below 1 needs ZeRO stage 3"},
		{"ratio range", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 2}}}`, 8, 1, "outside 0..1"},
		{"param offload stage 2", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}`, 8, 1, "offload_param needs stage 3"},
		{"bad device", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "gpu"}}}`, 8, 1, "want none, cpu or nvme"},
		{"nvme without path", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}`, 8, 1, "needs nvme_path"},
		{"buffer count", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "buffer_count": 0}}}`, 8, 1, "positive integer"},
		{"not json", `{"train_batch_size": `, 8, 1, "ds_config.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDSConfig([]byte(tc.json), tc.dp, tc.pp)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckDSConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestHostfileIsDeepSpeedFormatInNodeRankOrder(t *testing.T) {
	got := string(Hostfile([]job.HostJob{{Name: "b2", Ranks: make([]job.RankJob, 8)}, {Name: "a1", Ranks: make([]job.RankJob, 3)}}))
	want := "# DeepSpeed hostfile written by pipette-launch; line order is rank order\nb2 slots=8\na1 slots=3\n"
	if got != want {
		t.Errorf("hostfile = %q, want %q", got, want)
	}
}

// Two hosts that differ only by port are two entries (DeepSpeed rejects a
// name listed twice), each as name:port.
func TestHostfileHostsDifferingOnlyByPort(t *testing.T) {
	got := string(Hostfile([]job.HostJob{{Name: "box", Port: 2222, Ranks: make([]job.RankJob, 2)}, {Name: "box", Port: 2223, Ranks: make([]job.RankJob, 1)}, {Name: "gpu1", Port: 22, Ranks: make([]job.RankJob, 4)}}))
	want := "# DeepSpeed hostfile written by pipette-launch; line order is rank order\nbox:2222 slots=2\nbox:2223 slots=1\ngpu1 slots=4\n"
	if got != want {
		t.Errorf("hostfile = %q, want %q", got, want)
	}
}

// The ds_config carries the bucket sizes the memory estimator counted;
// DeepSpeed's own default (5e8 elements each) would use 2.5x the memory.
func TestDeepSpeedConfigBucketsMatchEstimator(t *testing.T) {
	c := DeepSpeedConfig(parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, MicroBatch: 2, GlobalBatch: 64, ZeroStage: 2}, false)
	z := c.ZeroOptimization
	if z.ReduceBucketSize != memory.DeepSpeedBucketElements || z.AllgatherBucketSize != memory.DeepSpeedBucketElements {
		t.Errorf("buckets reduce=%d allgather=%d, want %g each", z.ReduceBucketSize, z.AllgatherBucketSize, float64(memory.DeepSpeedBucketElements))
	}
}
