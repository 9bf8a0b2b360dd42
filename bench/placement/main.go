package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

func main() {
	seed := flag.Uint64("seed", 42, "seed of the random cluster and of both searches")
	hosts := flag.Int("hosts", 64, "hosts (8 GPUs each)")
	saBudget := flag.Duration("sa-budget", 30*time.Second, "simulated annealing time budget")
	flag.Parse()
	if err := run(os.Stdout, *hosts, *seed, *saBudget); err != nil {
		fmt.Fprintln(os.Stderr, "placement bench:", err)
		os.Exit(2)
	}
}

// Benchmark configuration: GPT-3 175B, TP8 PP8 DP(hosts/8), 1F1B.
var gpt3 = model.Model{Name: "gpt3-175b", NumLayers: 96, Hidden: 12288, Heads: 96, SeqLength: 2048, Vocab: 51200}

func benchConfig(hosts int) parallel.Config {
	dp := hosts / 8
	return parallel.Config{TP: 8, PP: 8, DP: dp, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64 * dp,
		SequenceParallel: true, Recompute: parallel.RecomputeFull, DistributedOptimizer: true}
}

func run(w *os.File, hosts int, seed uint64, saBudget time.Duration) error {
	c := randomCluster(hosts, seed)
	p, err := search.NewPlacementProblem(c, gpt3, benchConfig(hosts), parallel.FrameworkMegatron)
	if err != nil {
		return err
	}
	file := make([]int, hosts)
	for i := range file {
		file[i] = i
	}
	start := time.Now()
	order, ours := p.Place(search.PlaceOptions{Seed: int64(seed)})
	oursTook := time.Since(start)
	oursEvals := p.Evaluations()
	if got := p.Cost(order); got != ours {
		return fmt.Errorf("placement reports %g but its order costs %g", ours, got)
	}
	sa := anneal(p, file, saBudget, seed)
	// A fairer baseline also gets the islands for free: hosts grouped by
	// island as its start order.
	grouped := append([]int(nil), file...)
	slices.SortStableFunc(grouped, func(a, b int) int { return c.Hosts[a].Island - c.Hosts[b].Island })
	saWarm := anneal(p, grouped, saBudget, seed)
	fmt.Fprintf(w, "random heterogeneous cluster: %d hosts x 8 GPUs, seed %d; config TP8 PP8 DP%d, GPT-3 175B\n", hosts, seed, hosts/8)
	fmt.Fprintf(w, "%-28s %14s %12s %12s\n", "method", "iteration s", "time", "evaluations")
	fmt.Fprintf(w, "%-28s %14.4f %12s %12s\n", "file order (naive)", p.Cost(file), "-", "1")
	fmt.Fprintf(w, "%-28s %14.4f %12s %12d\n", "pipette-launch placement", ours, oursTook.Round(time.Millisecond), oursEvals)
	fmt.Fprintf(w, "%-28s %14.4f %12s %12d\n", fmt.Sprintf("simulated annealing (%s)", saBudget), sa.cost, sa.took.Round(time.Millisecond), sa.evals)
	fmt.Fprintf(w, "%-28s %14.4f %12s %12d\n", "SA from island-grouped order", saWarm.cost, saWarm.took.Round(time.Millisecond), saWarm.evals)
	if sim, err := p.Simulate(order); err == nil { // what `plan` prints for it
		fmt.Fprintf(w, "pipette-launch placement, schedule simulator: %.4f s (objective %+.2f%%)\n",
			sim.Predicted.IterationSeconds, 100*(ours-sim.Predicted.IterationSeconds)/sim.Predicted.IterationSeconds)
	}
	fmt.Fprintf(w, "cost ratio SA(warm)/ours = %.4f\n", saWarm.cost/ours)
	fmt.Fprintf(w, "cost ratio SA/ours = %.4f, time ratio SA/ours = %.1fx\n", sa.cost/ours, float64(sa.took)/float64(oursTook))
	return nil
}

// randomCluster: four islands of hosts/4 (A100 or H100 per island), random
// intra-island rates 100-400 Gbit/s with per-pair noise, inter-island rates
// 1-25 Gbit/s, symmetric.
func randomCluster(n int, seed uint64) *cluster.Cluster {
	rng := rand.New(rand.NewPCG(seed, 3))
	gpus := []gpu.Spec{
		{Model: "A100-SXM4-80GB", MemoryGiB: 80, PeakTFLOPS: 312, MemoryBandwidthTBPerS: 2.039},
		{Model: "H100-SXM5-80GB", MemoryGiB: 80, PeakTFLOPS: 989, MemoryBandwidthTBPerS: 3.35},
	}
	const islands = 4
	var isl []cluster.Island
	hosts := make([]cluster.Host, n)
	islandRate := make([]float64, islands)
	for i := 0; i < islands; i++ {
		isl = append(isl, cluster.Island{Spec: cluster.IslandSpec{Name: fmt.Sprintf("island%d", i), GPUsPerHost: 8, GPU: gpus[i%2]}, RDMA: true})
		islandRate[i] = 100 + 300*rng.Float64()
	}
	// Hosts are listed shuffled across islands, as a scheduler hands them out.
	perm := rng.Perm(n)
	for i := 0; i < n; i++ {
		k := perm[i] % islands
		hosts[i] = cluster.Host{HostEntry: cluster.HostEntry{Name: fmt.Sprintf("node%03d", i)}, Island: k, GPUs: 8, GPU: gpus[k%2],
			IntraBytesPerS: 300e9, NICBytesPerS: islandRate[k] / 8 * 1e9, MemoryBytes: 1 << 40}
		isl[k].Hosts = append(isl[k].Hosts, i)
	}
	bw := make([][]float64, n)
	lat := make([][]float64, n)
	for a := range bw {
		bw[a] = make([]float64, n)
		lat[a] = make([]float64, n)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			var g, l float64
			if hosts[a].Island == hosts[b].Island {
				g, l = islandRate[hosts[a].Island]*(0.6+0.4*rng.Float64()), 5e-6
			} else {
				g, l = 1+24*rng.Float64(), 50e-6
			}
			bw[a][b], bw[b][a] = g/8*1e9, g/8*1e9
			lat[a][b], lat[b][a] = l, l
		}
	}
	return cluster.NewCluster(isl, hosts, bw, lat)
}
