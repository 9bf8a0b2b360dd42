#!/bin/sh
# Sailor's heterogeneous scenario, scored by Sailor's own simulator: Sailor's
# planner's plan against pipette-launch's (README.md beside this file).
#
# Usage: bench/sailor/run.sh SAILOR_CHECKOUT
#   SAILOR_CHECKOUT: a checkout of github.com/eth-easl/sailor (tested at
#   cf2c8e3). It is copied and the copy changed (four changes, below); the
#   checkout itself is left as it is. Not run by CI: it needs Sailor's source.
# Needs Debian 12 packages: python3 python3-dev pybind11-dev libjsoncpp-dev g++ make python3-torch
#   python3-numpy python3-pandas (and Go, to build pipette-launch).
# Environment: SAILOR_WORK (where the copy goes; default a new temporary folder),
#   PYTHON (default /usr/bin/python3, Debian's, which has numpy and pandas).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SAILOR_CHECKOUT" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
work=${SAILOR_WORK:-$(mktemp -d)}
PYTHON=$py "$here/prepare.sh" "$1" "$work"
home=$work/home            # Sailor reads its files under $SAILOR_PATH/sailor/
S=$home/sailor
sim=$S/sailor/Planner/simulations

export SAILOR_PATH=$home PYTHONPATH=$S:$sim
# The scenario: the first row of run_het.sh's trace (32 A100-40 + 96 V100-16 in one zone).
head -2 "$sim/configs/gpu_trace_heterogeneous_imbalanced.csv" > "$work/trace.csv"
echo "sailor: planning (log: $work/sailor.log)" >&2
"$py" "$sim/simulator.py" --sailor_path "$home" --trace_file "$work/trace.csv" \
	--basic_cluster_config_json "$sim/configs/basic_cluster_config.json" \
	--training_config_json "$sim/configs/training_config_opt_350.json" --result_dir_path "$work/res" \
	--objective throughput --planner SAILOR --sailor_profile_file_dir "$S/sailor/Planner/sailor_planner/profiles/OPT-350/" \
	--quotas_dict "$S/sailor/Planner/sailor_planner/dummy_quotas_dict.json" \
	--simulator_profile_file "$sim/profiles_tmp.json" >"$work/sailor.log" 2>&1
sailor=$("$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; p=r["plan"]["pipelines"][0]
tp = ["+".join(sorted({"%s TP%d x%d" % (g[0][0][0], g[1], sum(1 for h in st if h == g)) for g in st})) for st in p["tmp_stages"]]
print("%.4f %.2f mbs=%d,PP=%d,layers(of.26)=%s,stages=%s" % (1/r["throughput"], r["search_time"], r["plan"]["mbs"], p["num_stages"],
      "/".join(str(len(l)) for l in p["layers_per_stage"]), "|".join(tp).replace(" ", ".")))' "$work/res/SAILOR_OPT-350.json")

echo "pipette-launch: planning" >&2
(cd "$root" && go build -o "$work/pipette-launch" ./cmd/pipette-launch)
# fp32, as the scenario trains (run_het.sh passes no --fp16, and Sailor's profiles are fp32); 16-bit for comparison:
# fp16, as V100 has no bf16 (the planner refuses bf16 there).
start=$(date +%s.%N)
"$work/pipette-launch" plan --cluster "$here/cluster.yaml" --model "$here/opt-350m.yaml" --global-batch-size 1024 \
	--framework deepspeed --precision fp32 --top 1 --json >"$work/plan.json"
end=$(date +%s.%N)
"$work/pipette-launch" plan --cluster "$here/cluster.yaml" --model "$here/opt-350m.yaml" --global-batch-size 1024 \
	--framework deepspeed --precision fp16 --top 1 --json >"$work/plan-bf16.json"
ours=$("$py" "$here/score.py" --plan-json "$work/plan.json" 2>"$work/score.log")
bf16=$("$py" "$here/score.py" --plan-json "$work/plan-bf16.json" 2>>"$work/score.log")
even=$("$py" "$here/score.py" --mbs 1 --dp 32 V100-16:6 V100-16:6 V100-16:6 A100-40:6 2>>"$work/score.log")

secs() { "$py" -c 'import json,sys; print(json.loads(sys.argv[1])["iteration_seconds"])' "$1"; }
echo "Sailor's simulator, OPT-350 on 32 A100-40 + 96 V100-16, global batch 1024 (copy and logs: $work)"
set -- $sailor
echo "  Sailor's plan:                  $1 s/iteration (planner $2 s; $3)"
echo "  pipette-launch plan 1, fp32:    $(secs "$ours") s/iteration (planner $("$py" -c "print(round($end - $start, 2))") s; $ours)"
echo "  pipette-launch plan 1, fp16:    $(secs "$bf16") s/iteration ($bf16)"
echo "  TP1 PP4 DP32, even 6/6/6/6:     $(secs "$even") s/iteration"
