package deepspeed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/dskit"
)

// elasticCases are elasticity sections (each a whole config's) and world
// sizes: versions 0.1 and 0.2, micro-batch lists whose LCM or members win,
// GPU bounds, prefer_larger_batch false, nodes of several GPUs with model
// parallelism, world sizes valid and not.
var elasticCases = []struct {
	name    string
	section string
	worlds  []int
}{
	{"v0.1 docstring", `{"enabled": true, "max_train_batch_size": 2000, "micro_batch_sizes": [2,4,6], "min_gpus": 1, "max_gpus": 10000, "version": 0.1}`, []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 100, 7000}},
	{"v0.1 small", `{"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [1,2], "version": 0.1}`, []int{1, 2, 3, 4, 5, 6, 8, 12, 24, 48}},
	{"v0.1 bounded smaller", `{"enabled": true, "max_train_batch_size": 100, "micro_batch_sizes": [3,5], "min_gpus": 2, "max_gpus": 8, "prefer_larger_batch": false, "version": 0.1}`, []int{1, 2, 3, 4, 5, 6, 8, 9}},
	{"v0.1 batch below micro", `{"enabled": true, "max_train_batch_size": 4, "micro_batch_sizes": [4], "version": 0.1}`, []int{1, 2}},
	{"v0.2 default version", `{"enabled": true, "max_train_batch_size": 64, "micro_batch_sizes": [1,2,4]}`, []int{1, 2, 3, 4, 5, 6, 7, 8}},
	{"v0.2 nodes of 4, MP 2", `{"enabled": true, "max_train_batch_size": 256, "micro_batch_sizes": [2,4], "num_gpus_per_node": 4, "model_parallel_size": 2, "min_gpus": 4, "max_gpus": 64, "version": 0.2}`, []int{2, 4, 6, 8, 10, 16}},
	{"v0.2 prefer smaller", `{"enabled": true, "max_train_batch_size": 90, "micro_batch_sizes": [2,3], "prefer_larger_batch": false, "version": 0.2}`, []int{1, 4, 5, 7, 9}},
}

// elasticKitScript runs DeepSpeed's own compute_elastic_config (the kit's
// deepspeed.elasticity) on each {id, config, world} line of stdin, and
// prints the batch, micro batch, the accumulation DeepSpeedConfig derives
// and the valid sizes, or the exception's type.
const elasticKitScript = `
import json, sys
from deepspeed.elasticity import compute_elastic_config
for line in sys.stdin:
    c = json.loads(line)
    try:
        final, valid, micro = compute_elastic_config(c["config"], "0.14.4", world_size=c["world"])
        print(json.dumps({"id": c["id"], "train": final, "micro": micro, "accum": final // (micro * c["world"]), "valid": [int(v) for v in valid]}))
    except Exception as e:
        print(json.dumps({"id": c["id"], "error": type(e).__name__ + ": " + str(e)}))
`

// TestElasticBatchMatchesDeepSpeed: Elasticity.Batch gives, for every case
// and world size, what DeepSpeed v0.14.4's compute_elastic_config gives,
// run from the framework kit (make deps sets it up; a test without it
// fails saying so), and refuses where it raises.
func TestElasticBatchMatchesDeepSpeed(t *testing.T) {
	kit, err := dskit.Find()
	if err != nil {
		t.Fatalf("%v; make deps sets the kits up", err)
	}
	var in bytes.Buffer
	type want struct {
		ID                  string
		Train, Micro, Accum int
		Valid               []int
		Error               string
	}
	for _, c := range elasticCases {
		for _, w := range c.worlds {
			fmt.Fprintf(&in, `{"id": "%s/%d", "world": %d, "config": {"elasticity": %s}}`+"\n", c.name, w, w, c.section)
		}
	}
	cmd := exec.Command(kit.Python, "-c", elasticKitScript)
	cmd.Env, cmd.Stdin = append(os.Environ(), kit.Env...), &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compute_elastic_config from the kit: %v\n%s", err, stderr.String())
	}
	got := map[string]want{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var w want
		if json.Unmarshal([]byte(l), &w) == nil && w.ID != "" {
			got[w.ID] = w
		}
	}
	n := 0
	for _, c := range elasticCases {
		u, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(`{"elasticity": `+c.section+`}`))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, w := range c.worlds {
			id := fmt.Sprintf("%s/%d", c.name, w)
			ds, ok := got[id]
			if !ok {
				t.Fatalf("%s: no answer from the kit\n%s", id, out)
			}
			b, err := u.Elastic.Batch(w)
			switch {
			case ds.Error != "" && err == nil:
				t.Errorf("%s: DeepSpeed raises %s, we give %+v", id, ds.Error, b)
			case ds.Error == "" && err != nil:
				t.Errorf("%s: DeepSpeed gives %+v, we refuse: %v", id, ds, err)
			case ds.Error == "" && (b.Train != ds.Train || b.Micro != ds.Micro || b.Accum != ds.Accum || !slices.Equal(b.Valid, ds.Valid)):
				t.Errorf("%s: we give batch %d micro %d accumulation %d valid %v, DeepSpeed %d %d %d %v", id, b.Train, b.Micro, b.Accum, b.Valid, ds.Train, ds.Micro, ds.Accum, ds.Valid)
			}
			if ds.Error == "" {
				n++
			}
		}
	}
	t.Logf("%d world sizes agree with DeepSpeed's compute_elastic_config (%d refused by both)", n, len(got)-n)
}
