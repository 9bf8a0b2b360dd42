#!/bin/sh
# Our plans only, on chosen rows of Sailor's traces, scored by Sailor's own
# simulator as all.sh scores them (without running Sailor's planner or its
# baselines: minutes instead of the better part of an hour). For comparing
# our planner before and after a change; all.sh prints the whole table.
#
# Usage: bench/sailor/ours.sh FIGURE ROW... (FIGURE 7, 8b or 10; rows from 0)
# Environment: SAILOR_WORK (default /tmp/pipette-sailor: prepared once, then
#   reused), SAILOR_ARCHIVE (default ../shared/frameworks/src/
#   sailor-cf2c8e3.tar.gz beside the checkout), PYTHON (default /usr/bin/python3).
# Prints per row: our plan (layout, predicted seconds), Sailor's simulator's
# verdict on it (fits, seconds per iteration) and our planning seconds.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/row.sh"
sailor_defaults
[ $# -ge 2 ] || { echo "usage: $0 FIGURE ROW..." >&2; exit 2; }
fig=$1
shift
case $fig in
7) trace=gpu_trace_scaled.csv ;;
8b) trace=gpu_trace_heterogeneous_imbalanced.csv ;;
10) trace=gpu_trace_multizone.csv ;;
*) echo "unknown figure $fig (7, 8b, 10)" >&2; exit 2 ;;
esac
sailor_tree "$archive" reuse
for r in "$@"; do
	d=$work/rows/$fig-$r
	label=$("$py" "$here/clusters.py" "$S" "$sim/configs/$trace" "$r" "$d")
	plan_row "$d"
	"$py" - "$d/plan.json" "$k" "$d/score.txt" "$fig/$r" "$label" "$start" "$end" <<'PYEOF'
import json, sys
plan = json.load(open(sys.argv[1]))["plans"][int(sys.argv[2]) - 1]
score = json.loads(open(sys.argv[3]).read().strip().splitlines()[-1])
print("%-6s %-26s TP%d PP%d DP%d mb%d predicted %.3f s; Sailor's simulator: fits %s, %.3f s; planned in %.1f s" % (
    sys.argv[4], sys.argv[5], plan["tp"], plan["pp"], plan["dp"], plan["micro_batch_size"],
    plan["predicted"]["iteration_seconds"], score["fits"], score["iteration_seconds"], float(sys.argv[7]) - float(sys.argv[6])))
PYEOF
done
