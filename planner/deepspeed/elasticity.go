package deepspeed

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// DeepSpeed's elasticity section ("elasticity": {"enabled": true, ...})
// takes the batch out of the user's hands: DeepSpeedConfig calls
// compute_elastic_config(ds_config, version, world_size) and replaces
// train_batch_size, train_micro_batch_size_per_gpu and
// gradient_accumulation_steps with what it returns (DeepSpeed v0.14.4
// runtime/config.py, DeepSpeedConfig.__init__, lines 732-794). Elastic
// below is that computation, line for line from
// deepspeed/elasticity/elasticity.py and elasticity/config.py (v0.14.4,
// commit d254d75), so that pipette-launch reports, and restarts with, the
// batch DeepSpeed will use at each world size.

// Elasticity is a config's elasticity section, with DeepSpeed's defaults
// (elasticity/constants.py).
type Elasticity struct {
	MaxBatch                 int   // max_train_batch_size (required)
	Micro                    []int // micro_batch_sizes (required)
	MinGPUs, MaxGPUs         int   // min_gpus 1, max_gpus 10000
	ModelParallel            int   // model_parallel_size 1
	GPUsPerNode              int   // num_gpus_per_node 1
	Version                  float64
	PreferLarger             bool // prefer_larger_batch true
	IgnoreNonElasticBatchKey bool // ignore_non_elastic_batch_info false
}

// ElasticBatch is the batch DeepSpeed's elasticity gives one world size.
type ElasticBatch struct {
	Train, Micro, Accum int
	// Valid are the world sizes (data-parallel sizes for version 0.2) the
	// batch is valid for.
	Valid []int
}

// hcn is elasticity.py's HCN_LIST (highly composite numbers).
var hcn = []int{1, 2, 4, 6, 12, 24, 36, 48, 60, 120, 180, 240, 360, 720, 840, 1260, 1680, 2520, 5040, 7560, 10080, 15120, 20160,
	25200, 27720, 45360, 50400, 55440, 83160, 110880, 166320, 221760, 277200, 332640, 498960, 554400, 665280, 720720}

// readElasticity reads raw's elasticity section as ElasticityConfig does;
// nil when it is absent or not enabled (DeepSpeed then ignores it).
func readElasticity(raw map[string]any) (*Elasticity, error) {
	sec, ok := raw["elasticity"].(map[string]any)
	if !ok {
		return nil, nil
	}
	if on, _ := sec["enabled"].(bool); !on {
		return nil, nil
	}
	e := &Elasticity{MinGPUs: 1, MaxGPUs: 10000, ModelParallel: 1, GPUsPerNode: 1, Version: 0.2, PreferLarger: true}
	num := func(key string, to *int, required bool) error {
		v, set := sec[key]
		if !set {
			if required {
				return fmt.Errorf("elasticity: %s is missing (DeepSpeed: \"Elasticity config missing %s\")", key, key)
			}
			return nil
		}
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || math.Abs(f) > 1<<40 {
			return fmt.Errorf("elasticity.%s: want an integer, got %s", key, describeJSON(v))
		}
		*to = int(f)
		return nil
	}
	for _, k := range []struct {
		key      string
		to       *int
		required bool
	}{{"max_train_batch_size", &e.MaxBatch, true}, {"min_gpus", &e.MinGPUs, false}, {"max_gpus", &e.MaxGPUs, false},
		{"model_parallel_size", &e.ModelParallel, false}, {"num_gpus_per_node", &e.GPUsPerNode, false}} {
		if err := num(k.key, k.to, k.required); err != nil {
			return nil, err
		}
	}
	mbs, set := sec["micro_batch_sizes"]
	if !set {
		return nil, fmt.Errorf("elasticity: micro_batch_sizes is missing (DeepSpeed: \"Elasticity config missing micro_batch_sizes\")")
	}
	list, isList := mbs.([]any)
	if !isList {
		return nil, fmt.Errorf("elasticity.micro_batch_sizes: want a list of positive integers, got %s", describeJSON(mbs))
	}
	for _, v := range list {
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || f <= 0 || f > 1<<40 {
			return nil, fmt.Errorf("elasticity.micro_batch_sizes: want positive integers, got %s", describeJSON(v))
		}
		e.Micro = append(e.Micro, int(f))
	}
	if len(e.Micro) == 0 {
		return nil, fmt.Errorf("elasticity.micro_batch_sizes: empty (DeepSpeed takes min() of it)")
	}
	switch {
	case e.MinGPUs < 1 || e.MaxGPUs < 1:
		return nil, fmt.Errorf("elasticity: min_gpus %d and max_gpus %d must be > 0", e.MinGPUs, e.MaxGPUs)
	case e.MaxGPUs < e.MinGPUs:
		return nil, fmt.Errorf("elasticity: min_gpus %d cannot be greater than max_gpus %d", e.MinGPUs, e.MaxGPUs)
	case e.ModelParallel < 1:
		return nil, fmt.Errorf("elasticity.model_parallel_size: %d, want at least 1", e.ModelParallel)
	case e.GPUsPerNode < 1:
		return nil, fmt.Errorf("elasticity.num_gpus_per_node: %d, want at least 1", e.GPUsPerNode)
	}
	if v, set := sec["version"]; set {
		switch x := v.(type) {
		case float64:
			e.Version = x
		case string: // float(elastic_config.version) takes "0.1" too
			f, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return nil, fmt.Errorf("elasticity.version: want 0.1 or 0.2, got %s", describeJSON(v))
			}
			e.Version = f
		default:
			return nil, fmt.Errorf("elasticity.version: want 0.1 or 0.2, got %s", describeJSON(v))
		}
	}
	if v, set := sec["prefer_larger_batch"].(bool); set {
		e.PreferLarger = v
	}
	e.IgnoreNonElasticBatchKey, _ = sec["ignore_non_elastic_batch_info"].(bool)
	switch {
	case e.ModelParallel > 1 && e.Version != 0.2:
		return nil, fmt.Errorf("elasticity: version %g does not support model-parallel training (model_parallel_size %d): DeepSpeed wants version 0.2", e.Version, e.ModelParallel)
	case e.Version > 0.2:
		return nil, fmt.Errorf("elasticity.version %g: DeepSpeed v0.14.4 supports up to 0.2", e.Version)
	case e.Version != 0.1 && e.Version != 0.2:
		return nil, fmt.Errorf("elasticity.version %g: DeepSpeed has no elastic logic for it (0.1 or 0.2)", e.Version)
	}
	return e, nil
}

// Batch is compute_elastic_config(ds_config, version, world_size) for
// world > 0, and the accumulation DeepSpeedConfig derives from it; an error
// is DeepSpeed's (ElasticityIncompatibleWorldSize when world is not one of
// the valid sizes).
func (e *Elasticity) Batch(world int) (ElasticBatch, error) {
	var final int
	var valid []int
	switch e.Version {
	case 0.1:
		var err error
		if final, valid, err = compatibleV01(e.Micro, e.MaxBatch, e.MinGPUs, e.MaxGPUs, e.PreferLarger); err != nil {
			return ElasticBatch{}, err
		}
	default:
		var err error
		if final, valid, err = e.compatibleV02(world); err != nil {
			return ElasticBatch{}, err
		}
	}
	if !slices.Contains(valid, world) {
		return ElasticBatch{}, &InvalidWorldError{World: world, Valid: valid}
	}
	micro := 0
	set := slices.Clone(e.Micro)
	slices.Sort(set)
	for i := len(set) - 1; i >= 0; i-- {
		if final/world%set[i] == 0 {
			micro = set[i]
			break
		}
	}
	if micro == 0 {
		return ElasticBatch{}, fmt.Errorf("elasticity: no micro batch of %v divides %d / world size %d (DeepSpeed: \"Unable to find divisible micro batch size\")", e.Micro, final, world)
	}
	accum := final / (micro * world)
	if accum < 1 || final != micro*accum*world {
		// _batch_assertion in runtime/config.py
		return ElasticBatch{}, fmt.Errorf("elasticity: batch %d != micro %d x accumulation %d x world size %d (DeepSpeed asserts train_batch_size = micro x accumulation x world size)", final, micro, accum, world)
	}
	return ElasticBatch{Train: final, Micro: micro, Accum: accum, Valid: valid}, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// candidateBatches is get_candidate_batch_sizes.
func candidateBatches(bases []int, maxBatch int) []int {
	var out []int
	for _, base := range bases {
		c := base
		if base < maxBatch {
			value := maxBatch / base
			// np.argmax(HCN_LIST > value): the first larger, 0 when none
			// (then HCN_LIST[-1], as Python's index -1 reads).
			i := slices.IndexFunc(hcn, func(h int) bool { return h > value })
			if i <= 0 {
				i = len(hcn)
			}
			c = hcn[i-1] * base
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// validGPUs is get_valid_gpus.
func validGPUs(batch int, micro []int, minGPUs, maxGPUs int) []int {
	var valid []int
	add := func(n int) {
		if !slices.Contains(valid, n) {
			valid = append(valid, n)
		}
	}
	for _, m := range micro {
		if batch%m != 0 {
			continue
		}
		most := batch / m
		if minGPUs <= most && most <= maxGPUs {
			add(most)
		}
		for i := 1; i <= most/2; i++ {
			if i > maxGPUs {
				break
			}
			if i >= minGPUs && most%i == 0 {
				add(i)
			}
		}
	}
	slices.Sort(valid)
	return valid
}

// compatibleV01 is _get_compatible_gpus_v01 (with get_best_candidates).
func compatibleV01(micro []int, maxBatch, minGPUs, maxGPUs int, preferLarger bool) (int, []int, error) {
	if minGPUs == 0 {
		minGPUs = 1
	}
	if maxGPUs == 0 {
		maxGPUs = maxBatch / slices.Min(micro)
	}
	lcm := 1
	for _, m := range micro {
		if m > maxBatch {
			return 0, nil, fmt.Errorf("elasticity: every micro batch must be at most max_train_batch_size %d, got %d", maxBatch, m)
		}
		lcm = lcm / gcd(lcm, m) * m
	}
	bases := append(slices.Clone(micro), lcm)
	best, final := 0, slices.Min(micro)
	var valid []int
	found := false
	for _, b := range candidateBatches(bases, maxBatch) {
		v := validGPUs(b, micro, minGPUs, maxGPUs)
		if len(v) > best || (len(v) == best && ((preferLarger && b > final) || (!preferLarger && b < final))) {
			best, valid, final, found = len(v), v, b, true
		}
	}
	if !found {
		return 0, nil, fmt.Errorf("elasticity: no candidate batch for micro_batch_sizes %v and max_train_batch_size %d", micro, maxBatch)
	}
	return final, valid, nil
}

// InvalidWorldError is DeepSpeed's ElasticityIncompatibleWorldSize: the
// world size is not one of the valid sizes compute_elastic_config lists.
type InvalidWorldError struct {
	World int
	Valid []int
}

func (e *InvalidWorldError) Error() string {
	return fmt.Sprintf("elasticity: world size %d is not valid with the list of valid GPU counts %v (DeepSpeed's ElasticityIncompatibleWorldSize)", e.World, e.Valid)
}

// compatibleV02 is _get_compatible_gpus_v02 for world GPUs (the world
// size DeepSpeedConfig passes: its data-parallel size).
func (e *Elasticity) compatibleV02(world int) (int, []int, error) {
	if e.GPUsPerNode%e.ModelParallel != 0 {
		return 0, nil, fmt.Errorf("elasticity: num_gpus_per_node %d should be divisible by model_parallel_size %d (version 0.2)", e.GPUsPerNode, e.ModelParallel)
	}
	dpPerNode := e.GPUsPerNode / e.ModelParallel
	// int(max / dp_size_per_node), int(min_gpus / num_gpus_per_node), ...:
	// Python's true division, truncated.
	final, validNodes, err := compatibleV01(e.Micro, int(float64(e.MaxBatch)/float64(dpPerNode)),
		int(float64(e.MinGPUs)/float64(e.GPUsPerNode)), int(float64(e.MaxGPUs)/float64(e.GPUsPerNode)), e.PreferLarger)
	if err != nil {
		return 0, nil, err
	}
	final *= dpPerNode
	var validDP []int
	for _, n := range validNodes {
		validDP = append(validDP, n*dpPerNode)
	}
	if slices.Contains(validDP, world/e.ModelParallel) {
		return final, validDP, nil
	}
	// Not a valid size: a batch for this size alone.
	dp := float64(world) / float64(e.GPUsPerNode) * float64(dpPerNode)
	var cands []float64
	for _, m := range e.Micro {
		least := float64(m) * dp
		cands = append(cands, math.Floor(float64(e.MaxBatch)/least)*least)
	}
	c := slices.Min(cands)
	if e.PreferLarger {
		c = slices.Max(cands)
	}
	return int(c), []int{int(dp)}, nil
}

// ElasticSize is one data-parallel size an elasticity section gives a
// batch for, and that batch.
type ElasticSize struct {
	DP int
	ElasticBatch
}

// Sizes are the data-parallel sizes from 1 to most that DeepSpeed starts
// with under the section (Batch without an error), smallest first: the
// sizes a planned job may choose from. With none it returns the error the
// largest size gets (an *InvalidWorldError names the valid sizes).
func (e *Elasticity) Sizes(most int) ([]ElasticSize, error) {
	var out []ElasticSize
	var last error
	for dp := 1; dp <= most; dp++ {
		b, err := e.Batch(dp)
		if err != nil {
			last = err
			continue
		}
		out = append(out, ElasticSize{DP: dp, ElasticBatch: b})
	}
	if len(out) == 0 {
		if last == nil {
			last = fmt.Errorf("elasticity: no data-parallel size up to %d", most)
		}
		return nil, last
	}
	return out, nil
}
