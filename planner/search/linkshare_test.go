package search

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Issue 22: the data-parallel replicas whose stages sit on the same two
// hosts send their activations over that pair's link at the same time.
//
// TP1 PP3 DP8 on three hosts of 8 A100s, one host per island, 1 Gbit/s
// between islands: Megatron's rank order puts stage r of all eight
// pipelines on host r, so both stage boundaries carry eight replicas.
// Hand calculation (bf16, sequence 2048, hidden 2048, micro-batch 1):
//
//	one activation  = 2048 x 2048 x 2 B          = 8,388,608 B
//	per replica     = 8 micro-batches (64 / DP 8) = 67.1 MB each way
//	eight replicas  = 536.9 MB each way per boundary per iteration
//	1 Gbit/s        = 125,000,000 B/s  ->  536.9 MB / 125 MB/s = 4.295 s
//
// so no schedule finishes an iteration in less than 4.295 s (one
// direction of one boundary, fully busy), and each single send takes
// 8 x 8,388,608 B / 125 MB/s + 50 us = 0.5369 s. Before this change each
// replica was priced with the link to itself: 0.0672 s a send.
func TestReplicasShareStageLink(t *testing.T) {
	isl := islandDef{hosts: 1, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}
	c := testCluster([]islandDef{isl, isl, isl}, 1)
	m := model.Model{Name: "1.2b", NumLayers: 24, Hidden: 2048, Heads: 16, SeqLength: 2048, Vocab: 50257,
		UntieEmbeddings: true} // untied: no embedding all-reduce between the first and last stage
	cfg := parallel.Config{TP: 1, PP: 3, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 8,
		Recompute: parallel.RecomputeFull}
	const act = 2048 * 2048 * 2.0
	const linkBps = 1e9 / 8
	wantSend := 8*act/linkBps + 50e-6
	floor := 8 * 8 * act / linkBps

	e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
	bh := []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2}
	var ss sendScratch
	sends := e.blockSends(bh, &ss)
	var w stageWork
	for d := 0; d < cfg.DP; d++ {
		e.stage(bh, 0, d, make([]int, 1), &w, sends)
		if !approx(w.sendNext, wantSend, 1e-9) {
			t.Fatalf("pipeline %d: stage 0 send %.4f s, want %.4f s (eight replicas on one 1 Gbit/s link)", d, w.sendNext, wantSend)
		}
	}
	p, err := PriceOrder(c, m, cfg, parallel.FrameworkMegatron, []int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	it := p.Predicted.IterationSeconds
	t.Logf("iteration %.3f s (link floor %.3f s, one send %.4f s)", it, floor, wantSend)
	if it < floor {
		t.Errorf("iteration priced at %.3f s, under the %.3f s the eight replicas' activations need on the shared link", it, floor)
	}
	// The rest is fill and drain (a few sends) and compute: well under 2x.
	if it > 2*floor {
		t.Errorf("iteration priced at %.3f s, over twice the link floor %.3f s", it, floor)
	}
}

// Given a choice, the planner keeps the replicas off one slow link. Two
// islands of two 8xA100 hosts, 10 Gbit/s between the islands, TP1 PP2
// DP16 of a small model with long sequences (large activations, small
// gradients). Pipelines across the islands put eight replicas' activations
// on each 10 Gbit/s host pair; pipelines inside the islands instead send
// the gradients of each stage's DP ring across. Priced with each replica
// alone on its link, pipelines across looked faster (3.18 vs 3.46 s).
func TestPlannerAvoidsSharedSlowLink(t *testing.T) {
	isl := islandDef{hosts: 2, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}
	c := testCluster([]islandDef{isl, isl}, 10)
	m := model.Model{Name: "0.4b", NumLayers: 24, Hidden: 1024, Heads: 16, SeqLength: 8192, Vocab: 50257}
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 256, TopK: 1, Seed: 1,
		Fixed: parallel.Constraints{TP: 1, PP: 2, DP: 16, CP: 1, VPP: 1, MicroBatch: 1, ZeroStage: -1, Recompute: parallel.RecomputeFull}}
	res, err := Search(c, m, o)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	dp := p.Config.DP
	if p.Config.PP != 2 || dp != 16 {
		t.Fatalf("plan %+v, want PP 2 DP 16", p.Config)
	}
	host := map[int]int{}
	for _, rp := range p.Placement {
		host[rp.Rank] = rp.HostIndex
	}
	for d := 0; d < dp; d++ {
		a, b := host[d], host[d+dp]
		if c.Hosts[a].Island != c.Hosts[b].Island {
			t.Errorf("pipeline %d runs from %s to %s across the 10 Gbit/s link (%.3f s/iteration)", d, c.Hosts[a].Name, c.Hosts[b].Name, p.Predicted.IterationSeconds)
		}
	}
}

// After the DP reduction every replica all-reduces its tied embedding
// gradient between its first and last stage, all at once. The TP1 PP3 DP8
// layout above with tied embeddings: the eight replicas' first stages are
// on host 0 and their last on host 2, so all eight all-reduces cross the
// one 1 Gbit/s pair. By hand: the fp32 gradient of the padded vocabulary
// (50,257 -> 50,304, a multiple of 128) x hidden 2048 is
// 4 x 50,304 x 2,048 = 412,090,368 B; a 2-rank ring all-reduce sends it
// once each way (2 x 1/2 x bytes) and pays 2 latencies, so one replica alone
// takes 412,090,368 / 125,000,000 + 2 x 50 us = 3.2968 s, and eight sharing
// the pair 8 x 3.2967 + 0.0001 = 26.374 s (before: 3.2968 s).
func TestReplicasShareEmbeddingAllReduce(t *testing.T) {
	isl := islandDef{hosts: 1, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}
	c := testCluster([]islandDef{isl, isl, isl}, 1)
	m := model.Model{Name: "1.2b", NumLayers: 24, Hidden: 2048, Heads: 16, SeqLength: 2048, Vocab: 50257}
	cfg := parallel.Config{TP: 1, PP: 3, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 8,
		Recompute: parallel.RecomputeFull}
	e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
	const shard = 4 * 50304 * 2048.0
	if got := e.embeddingShardBytes(); got != shard {
		t.Fatalf("shard %g B, want %g", got, shard)
	}
	bh := []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2}
	want := 8*shard/(1e9/8) + 2*50e-6
	if got := e.embeddingSyncSeconds(bh, &sendScratch{}); !approx(got, want, 1e-9) {
		t.Errorf("eight replicas' embedding all-reduces over one 1 Gbit/s pair: %.4f s, want %.4f s", got, want)
	}
}
