package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

func addFiles(f *testing.F, patterns ...string) {
	for _, pat := range patterns {
		files, _ := filepath.Glob(pat)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b))
		}
	}
}

// Every cluster file either loads or errs; what loads validates, names at
// most limits.MaxHosts hosts and survives a marshal round trip. Seeds: the
// example and test cluster files.
func FuzzParseClusterFile(f *testing.F) {
	addFiles(f, "../../examples/*.yaml", "../../cmd/internal/testdata/*.yaml", "../../bench/crosscluster/*.yaml")
	f.Add("clusters:\n  - name: a\n    hosts: node[1-20000]\n    gpus_per_host: 8\n    gpu: {model: H100}\n")
	f.Add("clusters: [{name: a, hosts: [\"[::1]:2222\"], gpus_per_host: 8.5, gpu: {model: H100}}]\n")
	f.Add("clusters: [{name: a, hosts: [n1, n2], gpus_per_host: 8, gpu: {model: H100}, nics: [{type: roce, count: 1, rate_gbit_per_s: .nan}]}]\n")
	f.Add("clusters: [{name: a, hosts: n1, gpus_per_host: 8, gpu: {model: L40S, memory_gib: 1e308, peak_bf16_tflops: .inf}}]\n")
	f.Fuzz(func(t *testing.T, doc string) {
		c, err := Parse([]byte(doc))
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("loaded but does not validate: %v", err)
		}
		hosts := 0
		for _, is := range c.Clusters {
			hosts += len(is.Hosts)
			if is.GPUsPerHost < 1 || is.GPUsPerHost > limits.MaxGPUsPerHost {
				t.Fatalf("gpus_per_host %d", is.GPUsPerHost)
			}
		}
		if hosts > limits.MaxHosts {
			t.Fatalf("%d hosts", hosts)
		}
		// Issue 31: every number that loads is finite and inside the
		// widest range any field has (no NaN rate reaches the planner),
		// and a small file resolves to finite figures.
		if p, v, ok := badFloat(reflect.ValueOf(c), "file"); !ok {
			t.Fatalf("loaded %s = %g", p, v)
		}
		if hosts <= 64 {
			if r, err := c.Resolve(); err == nil {
				if p, v, ok := badFloat(reflect.ValueOf(r.Hosts), "hosts"); !ok {
					t.Fatalf("resolved %s = %g", p, v)
				}
			}
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("marshalled file does not load: %v\n%s", err, out)
		}
	})
}

// widestRange holds every range of internal/limits a cluster file's
// numbers are checked against, and the figures resolving derives from
// them (bytes/s of 64 NICs at the highest rate: 8e14).
var widestRange = limits.Range{Min: 0, Max: 1e15}

// badFloat finds a float64 in v (structs, pointers, slices, maps) that is
// NaN, infinite or outside widestRange: its path and value, ok false.
func badFloat(v reflect.Value, path string) (string, float64, bool) {
	switch v.Kind() {
	case reflect.Float64:
		if !widestRange.Contains(v.Float()) {
			return path, v.Float(), false
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return badFloat(v.Elem(), path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				if p, x, ok := badFloat(v.Field(i), path+"."+v.Type().Field(i).Name); !ok {
					return p, x, false
				}
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if p, x, ok := badFloat(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, x, false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p, x, ok := badFloat(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key())); !ok {
				return p, x, false
			}
		}
	}
	return "", 0, true
}

// Every model file either loads or errs; what loads has a positive
// parameter count (no overflow). Seeds: the example model files.
func FuzzParseModelFile(f *testing.F) {
	addFiles(f, "../../examples/models/*.yaml")
	f.Add("num_layers: 32\nhidden_size: 2048.7\nnum_attention_heads: 32\nseq_length: 4096\nvocab_size: 32000\nswiglu: \"yes\"\n")
	f.Fuzz(func(t *testing.T, doc string) {
		m, err := model.Parse([]byte(doc))
		if err != nil {
			return
		}
		if m.Parameters() <= 0 {
			t.Fatalf("%+v: %d parameters", m, m.Parameters())
		}
		if p, v, ok := badFloat(reflect.ValueOf(m), "model"); !ok {
			t.Fatalf("loaded %s = %g", p, v)
		}
	})
}

// Megatron-LM argument lists (words of a real launch line) either give a
// model that validates, no model, or an error. Seeds: lines from
// Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh and the CLI's
// test lines.
func FuzzModelFromMegatronArgs(f *testing.F) {
	f.Add("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 1536 --rampup-batch-size 16 16 5859375 --train-iters 500000 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --init-method-std 0.006 --clip-grad 1.0 --fp16 --lr 6.0e-5 --lr-decay-style cosine --min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 430000")
	f.Add("--num-layers 40 --hidden-size 5120 --num-attention-heads 40 --seq-length 2048 --max-position-embeddings 2048 --vocab-size 50257 --global-batch-size 32 --bf16")
	f.Add("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --seq-length 8192 --use-distributed-optimizer --recompute-granularity selective --num-layers-per-virtual-pipeline-stage 4 --pipeline-model-parallel-size 2")
	f.Fuzz(func(t *testing.T, line string) {
		m, _, found, err := megatron.ModelFromArgs(strings.Fields(line))
		if err != nil || !found {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("returned a model that does not validate: %v", err)
		}
		_, _, _ = megatron.BatchArgs(strings.Fields(line))
	})
}
