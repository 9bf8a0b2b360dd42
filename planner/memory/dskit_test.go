package memory

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// dsEstimatorScript runs DeepSpeed's own estimate_zero2_model_states_mem_needs
// (runtime/zero/stage_1_and_2.py) and estimate_zero3_model_states_mem_needs
// (runtime/zero/stage3.py), read from the DeepSpeed v0.14.4 source archive
// of the framework kits (commit d254d75ef028e2e6bd3305ba0feeb6a61c986443)
// and executed as written: the two functions are plain arithmetic, so they
// run without importing deepspeed (whose dependencies the kit's setup
// installs). argv: archive, JSON list of calls; prints the JSON results.
const dsEstimatorScript = `
import ast, json, sys, tarfile
tar = tarfile.open(sys.argv[1])
ns = {}
for path, name in [("deepspeed-0.14.4/deepspeed/runtime/zero/stage_1_and_2.py", "estimate_zero2_model_states_mem_needs"),
                   ("deepspeed-0.14.4/deepspeed/runtime/zero/stage3.py", "estimate_zero3_model_states_mem_needs")]:
    tree = ast.parse(tar.extractfile(path).read())
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    exec(compile(ast.Module(body=fn, type_ignores=[]), path, "exec"), ns)
out = []
for call in json.loads(sys.argv[2]):
    out.append(ns[call["fn"]](*call["args"], **call["kwargs"]))
print(json.dumps(out))
`

// TestDeepSpeedEstimatorsFromKit prices the cases of TestDeepSpeedEstimators
// with DeepSpeed's own functions run from the kit's source archive
// ($PIPETTE_FRAMEWORKS or ../shared/frameworks beside the repository; the
// test skips without it), additional_buffer_factor 1, one node of G GPUs.
func TestDeepSpeedEstimatorsFromKit(t *testing.T) {
	archive := kitArchive(t, "deepspeed-v0.14.4.tar.gz")
	m, _ := model.Preset("llama2-13b")
	const G = 4
	p := float64(m.Parameters())
	L := largestLayerPerGPU(m, 1)
	type call struct {
		Fn     string         `json:"fn"`
		Args   []any          `json:"args"`
		Kwargs map[string]any `json:"kwargs"`
	}
	z2 := func(offload bool) call {
		return call{"estimate_zero2_model_states_mem_needs", []any{p, G, 1}, map[string]any{"cpu_offload": offload, "additional_buffer_factor": 1}}
	}
	z3 := func(offload, params bool) call {
		return call{"estimate_zero3_model_states_mem_needs", []any{p, L, G, 1}, map[string]any{"cpu_offload": offload, "cpu_offload_params": params, "zero_init": true, "additional_buffer_factor": 1}}
	}
	cases := []struct {
		name   string
		z      int
		off    parallel.Offload
		call   call
		ourGap float64 // what DeepSpeed counts that is not live at our peak (TestDeepSpeedEstimators says why)
	}{
		{"zero2 offload", 2, parallel.Offload{OptimizerFraction: 1}, z2(true), 0},
		{"zero3 offload all", 3, parallel.Offload{OptimizerFraction: 1, Params: true}, z3(true, true), 0},
		{"zero3 offload optimizer", 3, parallel.Offload{OptimizerFraction: 1}, z3(true, false), 0},
		{"zero3", 3, parallel.Offload{}, z3(false, false), 2 * p / G},
		{"zero2", 2, parallel.Offload{}, z2(false), 4 * p / G},
	}
	calls := make([]call, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	arg, _ := json.Marshal(calls)
	out, err := exec.Command("python3", "-c", dsEstimatorScript, archive, string(arg)).Output()
	if err != nil {
		t.Fatalf("running DeepSpeed's estimators: %v", err)
	}
	var res [][2]float64 // (cpu_mem, gpu_mem) per call
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cases) {
		t.Fatalf("DeepSpeed's estimators printed %q: %v", out, err)
	}
	for i, c := range cases {
		st := deepSpeedStates(m, Normalized(parallel.Config{TP: 1, PP: 1, DP: G, ZeroStage: c.z, Offload: c.off}), p)
		gpu, host := st.weights+st.grads+st.optimizer, G*st.host
		dsCPU, dsGPU := res[i][0], res[i][1]
		// DeepSpeed rounds to whole bytes.
		if !relClose(gpu+c.ourGap, dsGPU, 1e-9) {
			t.Errorf("%s: GPU %.6g B + gap %.4g, DeepSpeed's %s %.6g B", c.name, gpu, c.ourGap, c.call.Fn, dsGPU)
		}
		if c.off != (parallel.Offload{}) && !relClose(host, dsCPU, 1e-9) {
			t.Errorf("%s: host %.6g B, DeepSpeed's %s %.6g B", c.name, host, c.call.Fn, dsCPU)
		}
	}
}
