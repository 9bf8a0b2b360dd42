#!/bin/sh
# Sailor's heterogeneous scenario, scored by Sailor's own simulator: Sailor's
# planner's plan against pipette-launch's (README.md beside this file).
#
# Usage: bench/sailor/run.sh SAILOR_CHECKOUT
#   SAILOR_CHECKOUT: a checkout of github.com/eth-easl/sailor (tested at
#   cf2c8e3). It is copied and the copy changed (four changes, below); the
#   checkout itself is left as it is. Not run by CI: it needs Sailor's source.
# Needs Debian 12 packages: python3 python3-dev pybind11-dev libjsoncpp-dev g++ make
#   python3-numpy python3-pandas (and Go, to build pipette-launch).
# Environment: SAILOR_WORK (where the copy goes; default a new temporary folder),
#   PYTHON (default /usr/bin/python3, Debian's, which has numpy and pandas).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SAILOR_CHECKOUT" >&2; exit 2; }
src=$(cd "$1" && pwd)
[ -f "$src/sailor/Planner/simulations/simulator.py" ] || { echo "$src: not a Sailor checkout (no sailor/Planner/simulations/simulator.py)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
work=${SAILOR_WORK:-$(mktemp -d)}
home=$work/home            # Sailor reads its files under $SAILOR_PATH/sailor/
S=$home/sailor
mkdir -p "$home"
rm -rf "$S"
cp -a "$src" "$S"
cpp=$S/sailor/Planner/sailor_planner/cpp_src
sim=$S/sailor/Planner/simulations

# 1. The Makefile: Python 3.11's headers, Debian's pybind11 (already on the include path), `uname -m`
#    (Debian's `uname -p` says "unknown"), so the module is built as libplanner.cpython-311-x86_64-linux-gnu.so.
sed -i 's#/usr/include/python3\.10#/usr/include/python3.11#g; s#cpython-310#cpython-311#g; s#\$(python3 -m pybind11 --includes)##; s/uname -p/uname -m/' "$cpp/Makefile"
# 2. Build it once and put it where simulator.py imports it from.
make -C "$cpp" clean >/dev/null
make -C "$cpp" libplanner.so >"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 1; }
cp "$cpp"/libplanner.cpython-311-*.so "$sim/"
# 3. planner.py's three lines that delete and rebuild a cpython-310 module on every run: commented out.
sed -i -E 's/^( +)(os\.system\(f"(rm|cd|cp) \{)/\1# \2/' "$cpp/planner.py"
[ "$(grep -c '# os.system(f"' "$cpp/planner.py")" -eq 3 ] || { echo "planner.py: expected 3 os.system lines to comment out" >&2; exit 1; }
# 4. Stand-ins for the baseline planners this scenario does not run that import torch or einops:
#    each `from sailor.Planner.baselines... import X` in simulator.py becomes try/except ImportError: X = None.
"$py" - "$sim/simulator.py" <<'PYEOF'
import re, sys
p = sys.argv[1]
out = []
for line in open(p).read().split("\n"):
    m = re.match(r"^from (sailor\.Planner\.baselines\.\S+) import (\w+)$", line)
    out.append("try:\n    %s\nexcept ImportError:  # stand-in: this baseline needs torch or einops\n    %s = None" % (line, m.group(2)) if m else line)
open(p, "w").write("\n".join(out))
PYEOF

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
