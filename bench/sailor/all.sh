#!/bin/sh
# Every throughput row of Sailor's artifact (ae_scripts/planner: Figure 7,
# 8b and 10), each planner's plan scored by Sailor's own simulator: Sailor's
# planner and the baselines run_all_sim.py runs for that figure, and
# pipette-launch's plan (fp32, --recompute none, the first of its plans that
# passes Sailor's check_config_fits). Prints one table; exits 1 when our plan
# is slower than Sailor's on any row (`make sailor`; README.md).
#
# Usage: bench/sailor/all.sh [SAILOR_ARCHIVE]
#   SAILOR_ARCHIVE: Sailor's source (default ../shared/frameworks/src/
#   sailor-cf2c8e3.tar.gz beside the checkout); unpacked, never fetched.
# Needs Debian 12 packages: python3-torch (Sailor's baselines import it),
#   python3-pandas (its simulator reads the traces with it), python3-numpy,
#   python3-dev pybind11-dev libjsoncpp-dev g++ make (its C++ planner), Go.
# Environment: SAILOR_WORK (default a new temporary folder), PYTHON
#   (default /usr/bin/python3), SAILOR_FIGURES (default "7 8b 10").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/row.sh"
root=$(cd "$here/../.." && pwd)
archive=${1:-$root/../shared/frameworks/src/sailor-cf2c8e3.tar.gz}
[ -f "$archive" ] || { echo "$archive: no Sailor archive (give its path)" >&2; exit 2; }
py=${PYTHON:-/usr/bin/python3}
for mod in numpy pandas torch; do
	"$py" -c "import $mod" 2>/dev/null || { echo "all.sh: $py cannot import $mod: apt-get install python3-$mod (README.md)" >&2; exit 2; }
done
work=${SAILOR_WORK:-$(mktemp -d)}
sailor_tree "$archive"
home=$work/home
# run_all_sim.py starts each planner as `python ...`; Debian has only python3.
mkdir -p "$work/bin" && ln -sf "$py" "$work/bin/python"

: >"$work/rows.txt"
for fig in ${SAILOR_FIGURES:-7 8b 10}; do
	case $fig in
	7) trace=gpu_trace_scaled.csv baselines=all ;;
	8b) trace=gpu_trace_heterogeneous_imbalanced.csv baselines=heterogeneous ;;
	10) trace=gpu_trace_multizone.csv baselines=geo ;;
	*) echo "SAILOR_FIGURES: unknown figure $fig (7, 8b, 10)" >&2; exit 2 ;;
	esac
	echo "sailor: figure $fig, planners of --baselines $baselines (log: $work/fig$fig.log)" >&2
	# As ae_scripts/planner/run_*.sh run it, from the checkout's root.
	(cd "$S" && PATH=$work/bin:$PATH "$py" ae_scripts/planner/run_all_sim.py --model-name OPT-350 --gpu-type A100-40 \
		--trace_file "$sim/configs/$trace" --basic_cluster_config_json "$sim/configs/basic_cluster_config.json" \
		--simulator_profile_file "$sim/profiles_tmp.json" --simulator_profile_file_op "$sim/profiles_tmp_aceso.json" \
		--quotas_dict "$S/sailor/Planner/sailor_planner/dummy_quotas_dict.json" --gpus-per-node 4 \
		--sailor_path "$home" --res_dir "$work/res/fig$fig" --objective throughput --baselines "$baselines") >"$work/fig$fig.log" 2>&1 || true
	rows=$(($(wc -l <"$sim/configs/$trace") - 1))
	for r in $(seq 0 $((rows - 1))); do
		d=$work/rows/$fig-$r
		label=$("$py" "$here/clusters.py" "$S" "$sim/configs/$trace" "$r" "$d")
		plan_row "$d"
		"$py" "$here/table.py" row "$fig" "$r" "$label" "$work/res/fig$fig" "$d" "$end" "$start" >>"$work/rows.txt"
	done
done
"$py" "$here/table.py" print "$work/rows.txt" "$work"
