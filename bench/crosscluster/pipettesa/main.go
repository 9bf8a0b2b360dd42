// Command pipettesa is Pipette's placement search (Yim et al., DATE 2024),
// reimplemented in Go for bench/crosscluster's 16-host comparison from
// github.com/yimjinkyu1/date2024_pipette,
// Megatron-LM-2.5/strategy/merge4/mh_simulated_annealing_opt.py (class
// MetaHeuristics) and the message sizes of llm_train_strategy_assignment_total_v3.py
// (get_pp_msg_size, get_dp_msg_size). Its objective prices, in
// milliseconds: per pipeline the sum over consecutive stages of
// 2 * pp_msg / bw (the slowest pipeline counts), plus one DP ring, that of
// stage 0 (the first host of every pipeline, slowest hop), and the
// intra-host DP inside a host; no other stage's DP ring and no
// tied-embedding traffic. The annealer starts from a random order (seed 0),
// proposes one of five moves (2-opt, insert, swap, insert a subroute,
// insert it reversed), accepts a worse one with probability
// exp(-(diff scaled to (0.1, 1]) / T), cools T by alpha every step
// (published defaults: T0 1, alpha 0.999) and stops at the time limit.
//
//	pipettesa -cluster cluster.yaml -pp 4 -dp 4 -tp 1 -hidden 2048 -seq 1024 \
//	    -vocab 50257 -layers 24 -micro-batch 1 -budget 60s
//
// It prints JSON: the host of every Megatron rank position (host order:
// position r*inter_dp + d holds stage r of pipeline d), the objective and
// how many orders it priced.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// problem is Pipette's objective over states: a permutation of hosts read
// as pipelines (rows of pp hosts, one per stage).
type problem struct {
	bw               [][]float64 // GB/s, diagonal = inside a host
	pipelines, pp    int
	interDP, innerDP int
	ppMsgGB, dpMsgGB float64
}

// cost is MetaHeuristics.objective's total_parallel_cost (ms).
func (p *problem) cost(state []int) float64 {
	lat := func(a, b int) float64 { return 1 / p.bw[a][b] }
	ppCost := 0.0
	for d := 0; d < p.pipelines; d++ {
		row := state[d*p.pp : (d+1)*p.pp]
		c := 0.0
		for i := 0; i+1 < len(row); i++ {
			c += 2 * p.ppMsgGB * lat(row[i], row[i+1]) * 1e3
		}
		ppCost = math.Max(ppCost, c)
	}
	interMax, innerMax := 0.0, 0.0
	for d := 0; d < p.pipelines; d++ {
		n1, n2 := state[d*p.pp], state[((d+1)%p.pipelines)*p.pp]
		interMax = math.Max(interMax, lat(n1, n2))
		innerMax = math.Max(innerMax, lat(n1, n1))
	}
	inter := 2 * float64(p.interDP-1) * p.dpMsgGB * interMax / float64(p.interDP) * 1e3
	inner := 2 * float64(p.innerDP-1) * p.dpMsgGB * innerMax / float64(p.innerDP) * 1e3
	return ppCost + inter + inner
}

// sample2 is Python's random.sample(range(n), 2).
func sample2(rng *rand.Rand, n int) (int, int) {
	i := rng.IntN(n)
	j := rng.IntN(n - 1)
	if j >= i {
		j++
	}
	return i, j
}

// insertAt is Python's list.insert (a position past the end appends).
func insertAt(s []int, pos, v int) []int {
	pos = min(pos, len(s))
	s = append(s, 0)
	copy(s[pos+1:], s[pos:])
	s[pos] = v
	return s
}

// neighbor applies one of the five moves of MetaHeuristics to a copy.
func neighbor(rng *rand.Rand, state []int) []int {
	n := len(state)
	s := append([]int(nil), state...)
	switch move := rng.IntN(5); move {
	case 0: // two_opt: reverse state[lo:hi]
		i, j := sample2(rng, n)
		lo, hi := min(i, j), max(i, j)
		for a, b := lo, hi-1; a < b; a, b = a+1, b-1 {
			s[a], s[b] = s[b], s[a]
		}
	case 1: // insert: take the host at j, insert it before position i
		i, j := sample2(rng, n)
		v := s[j]
		s = append(s[:j], s[j+1:]...)
		s = insertAt(s, i, v)
	case 2: // swap
		i, j := sample2(rng, n)
		s[i], s[j] = s[j], s[i]
	default: // insert_route (3) / insert_reversed (4): move state[lo:hi] elsewhere
		i, j := rng.IntN(n), rng.IntN(n)
		lo, hi := min(i, j), max(i, j)
		sub := append([]int(nil), s[lo:hi]...)
		s = append(s[:lo], s[hi:]...)
		pos := rng.IntN(n)
		for k := range sub {
			v := sub[k] // insert_reversed inserts front first: reversed
			if move == 3 {
				v = sub[len(sub)-1-k] // insert_route inserts back first: order kept
			}
			s = insertAt(s, pos, v)
		}
	}
	return s
}

// result is one annealing run.
type result struct {
	best  []int
	cost  float64
	evals int
	took  time.Duration
}

// anneal is MetaHeuristics.annealing from a random start.
func anneal(p *problem, n int, temp0, alpha float64, budget time.Duration, seed uint64) result {
	rng := rand.New(rand.NewPCG(seed, 0))
	sol := rng.Perm(n)
	solCost := p.cost(sol)
	res := result{best: append([]int(nil), sol...), cost: solCost, evals: 1}
	temp := temp0
	start := time.Now()
	for time.Since(start) < budget {
		nb := neighbor(rng, sol)
		c := p.cost(nb)
		res.evals++
		if diff := c - solCost; diff <= 0 {
			sol, solCost = nb, c
		} else {
			scaled := diff / math.Pow(10, math.Trunc(math.Log10(diff))+1)
			if rng.Float64() <= math.Exp(-scaled/temp) {
				sol, solCost = nb, c
			}
		}
		temp *= alpha
		if solCost < res.cost {
			res.cost = solCost
			res.best = append(res.best[:0], sol...)
		}
	}
	res.took = time.Since(start)
	return res
}

// hostOrder turns a state (pipelines x stages) into Megatron's host order:
// stage r of pipeline d at position r*pipelines + d.
func hostOrder(state []int, pipelines, pp int) []int {
	out := make([]int, len(state))
	for d := 0; d < pipelines; d++ {
		for r := 0; r < pp; r++ {
			out[r*pipelines+d] = state[d*pp+r]
		}
	}
	return out
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pipettesa:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pipettesa", flag.ContinueOnError)
	clusterPath := fs.String("cluster", "", "cluster YAML (its measured matrix is the bandwidth data)")
	pp := fs.Int("pp", 0, "pipeline stages")
	dp := fs.Int("dp", 0, "data-parallel size")
	tp := fs.Int("tp", 1, "tensor-parallel size")
	hidden := fs.Int("hidden", 0, "hidden size")
	seq := fs.Int("seq", 0, "sequence length")
	vocab := fs.Int("vocab", 50256, "vocabulary (Pipette's default 50256)")
	layers := fs.Int("layers", 0, "transformer layers")
	micro := fs.Int("micro-batch", 1, "micro-batch size")
	budget := fs.Duration("budget", 60*time.Second, "time limit")
	temp := fs.Float64("temp", 1, "initial temperature (Pipette's default)")
	alpha := fs.Float64("alpha", 0.999, "cooling factor (Pipette's default)")
	seed := fs.Uint64("seed", 0, "random seed (Pipette seeds 0)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clusterPath == "" || *pp < 1 || *dp < 1 || *hidden < 1 || *seq < 1 || *layers < 1 {
		return fmt.Errorf("need -cluster, -pp, -dp, -hidden, -seq and -layers")
	}
	data, err := os.ReadFile(*clusterPath)
	if err != nil {
		return err
	}
	f, err := cluster.Parse(data)
	if err != nil {
		return err
	}
	c, err := f.Resolve()
	if err != nil {
		return err
	}
	p, err := newProblem(c, *pp, *dp, *tp, *hidden, *seq, *vocab, *layers, *micro)
	if err != nil {
		return err
	}
	n := len(c.Hosts)
	res := anneal(p, n, *temp, *alpha, *budget, *seed)
	order := hostOrder(res.best, p.pipelines, p.pp)
	names := make([]string, n)
	for i, h := range order {
		names[i] = c.Hosts[h].Name
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"host_order": names, "objective_ms": res.cost, "evaluations": res.evals, "seconds": res.took.Seconds()})
}

// newProblem sizes Pipette's messages (bf16) for a GPT: pp_msg =
// micro*seq*hidden*2 B; dp_msg = (hidden*vocab + 16*hidden^2*layers/pp)/tp*2 B
// (Pipette's in_layers is layers per stage).
func newProblem(c *cluster.Cluster, pp, dp, tp, hidden, seq, vocab, layers, micro int) (*problem, error) {
	n := len(c.Hosts)
	gpus := c.Hosts[0].GPUs
	for _, h := range c.Hosts {
		if h.GPUs != gpus {
			return nil, fmt.Errorf("Pipette's layout needs equal hosts; %s has %d GPUs, %s %d", h.Name, h.GPUs, c.Hosts[0].Name, gpus)
		}
	}
	if gpus%tp != 0 || n*gpus != tp*pp*dp {
		return nil, fmt.Errorf("%d hosts x %d GPUs do not hold TP %d x PP %d x DP %d", n, gpus, tp, pp, dp)
	}
	innerDP := gpus / tp
	if dp%innerDP != 0 || n%pp != 0 {
		return nil, fmt.Errorf("a host must hold whole DP replicas of one stage (DP %d, %d per host)", dp, innerDP)
	}
	p := &problem{pipelines: n / pp, pp: pp, interDP: dp / innerDP, innerDP: innerDP}
	p.ppMsgGB = float64(micro*seq*hidden) * 2 / 1e9
	params := (float64(hidden)*float64(vocab) + 16*float64(hidden)*float64(hidden)*float64(layers/pp)) / float64(tp)
	p.dpMsgGB = params * 2 / 1e9
	p.bw = make([][]float64, n)
	for i := range p.bw {
		p.bw[i] = make([]float64, n)
		for j := range p.bw[i] {
			p.bw[i][j] = c.LinkBetween(i, j).BytesPerS / 1e9
		}
	}
	return p, nil
}
