#!/usr/bin/env bash
# Issue 12, item 4: placement measured on 16 test-bed hosts in two islands
# with uneven links. Links inside each island are shaped per host around
# INTRA_RATE (a pair gets the slower host's rate), the islands share one
# link shaped to INTER_RATE, and the hosts file lists the hosts shuffled.
# One plan (PP x DP of 1-rank hosts, TP 1) is replayed with
# examples/replay_plan.py (a real gloo job) over plain ssh in three rank
# orders:
#   planned  - pipette-launch plan's placement (cluster file below)
#   pipette  - the best order of Pipette's published simulated annealing
#              (its objective and annealer in Go: pipettesa/, 60 s budget)
#   torchrun - rank r on the r-th host of the shuffled hosts file
# and the medians and ratios are printed. See README.md ("16 hosts").
#
# Usage: sudo bench/crosscluster/sixteen.sh   (settings below, overridable by env)
set -euo pipefail

TB_NAME=${TB_NAME:-sixteen}
INTER_RATE=${INTER_RATE:-40mbit}           # the one link between the islands
INTRA_RATE=${INTRA_RATE:-400}              # Mbit/s; each host's link is 0.5-1.5x this
SHAPE_SEED=${SHAPE_SEED:-12}
NPROC=1
PP=${PP:-4}
DP=${DP:-4}
MODEL=${MODEL:-gpt3-1.3b}
GLOBAL_BATCH=${GLOBAL_BATCH:-16}
SEQ_LENGTH=${SEQ_LENGTH:-1024}
BYTES_SCALE=${BYTES_SCALE:-64}
MAX_MICRO=${MAX_MICRO:-8}
COMPUTE_MS=${COMPUTE_MS:-300}
SA_BUDGET=${SA_BUDGET:-60s}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-1}
MIN_RATIO=0                                # report only; the table is the result
PYTHON=${PYTHON:-/usr/bin/python3}
TB_GROUPS=A:8:ib,B:8:eth
TB_PREFIX=node
TB_STATE_ROOT=${TB_STATE_ROOT:-/var/lib/pipette-testbed}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
cc_require
SCRIPT=$REPO/examples/replay_plan.py
WORK=$(mktemp -d /var/tmp/pipette-sixteen.XXXXXX) # not /tmp: hosts have a private one
PIDS=()
trap cc_stop EXIT
trap 'exit 130' INT TERM

cc_say "build"
(cd "$REPO" && go build -o "$WORK/bin/" ./cmd/pipette-launch ./cmd/pipette-testbed ./bench/crosscluster/pipettesa)
TB=$WORK/bin/pipette-testbed
PL=$WORK/bin/pipette-launch

# Per-host rates, the shuffled hosts file and the cluster file (the rates
# the shaping sets, as Gbit/s, 95% of the tc rate: what iperf3 attains;
# written from the settings, not probed: 240 iperf3 pairs on a loaded
# 2-core machine would take minutes and measure the CPU).
"$PYTHON" - "$WORK" "$SHAPE_SEED" "$INTRA_RATE" "${INTER_RATE%mbit}" <<'PY'
import random, sys
work, seed, intra, inter = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
hosts = ["node%02d" % i for i in range(1, 17)]
island = {h: ("A" if i < 8 else "B") for i, h in enumerate(hosts)}
rate = {h: round(intra * (0.5 + rng.random())) for h in hosts}
order = hosts[:]
rng.shuffle(order)
open(work + "/host-shape", "w").write(",".join("%s=%dmbit" % (h, rate[h]) for h in hosts))
open(work + "/hosts", "w").write("".join(h + "\n" for h in order))
open(work + "/islands", "w").write(",".join("%s=%s" % (h, island[h]) for h in hosts))
def gbit(a, b):
    if a == b:
        return 0
    r = min(rate[a], rate[b])
    if island[a] != island[b]:
        r = min(r, inter)
    return round(0.95 * r / 1000, 4)
isl = """  - name: %s
    hosts: [%s]
    gpus_per_host: 1
    gpu: {model: cpu, memory_gib: 11.7, peak_bf16_tflops: 1}
    intra_host: {type: pcie}
    nics:
%s    host_memory_gib: 23.4
    cpu_cores: 2
"""
ib = "      - {type: infiniband, count: 1, rate_gbit_per_s: 200}\n      - {type: ethernet, count: 1, rate_gbit_per_s: 10}\n"
eth = "      - {type: ethernet, count: 1, rate_gbit_per_s: 10}\n"
with open(work + "/cluster.yaml", "w") as f:
    f.write("# bench/crosscluster/sixteen.sh: the test-bed's shaped rates (not probed)\nclusters:\n")
    f.write(isl % ("A", ", ".join(hosts[:8]), ib))
    f.write(isl % ("B", ", ".join(hosts[8:]), eth))
    f.write("measured:\n  measured_at: 2026-11-23T00:00:00Z\n  tool: sixteen.sh (tc rates x 0.95)\n")
    f.write("  hosts: [%s]\n  gbit_per_s:\n" % ", ".join(order))
    for a in order:
        f.write("    - [%s]\n" % ", ".join(str(gbit(a, b)) for b in order))
PY
TB_HOST_SHAPE=$(cat "$WORK/host-shape")
mapfile -t HOST_ORDER <"$WORK/hosts"
declare -A HOST_ISLAND=()
for h in "${HOST_ORDER[@]}"; do HOST_ISLAND[$h]=$([[ 10#${h#node} -le 8 ]] && echo A || echo B); done
cc_say "hosts file (torchrun's order): ${HOST_ORDER[*]}"
cc_say "host links: $TB_HOST_SHAPE; $INTER_RATE between islands"

cc_say "plan (TP 1, PP $PP, DP $DP) and your layout (--as-is on the hosts file)"
PLAN_FLAGS=(--cluster "$WORK/cluster.yaml" --model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --seq-length "$SEQ_LENGTH"
	--tp 1 --pp "$PP" --dp "$DP" --vpp 1)
"$PL" plan "${PLAN_FLAGS[@]}" --hostfile "$WORK/hosts" --as-is --top 1
"$PL" plan "${PLAN_FLAGS[@]}" --hostfile "$WORK/hosts" --as-is --top 1 --json >"$WORK/plan.json"
REPLAY_ARGS=$("$PYTHON" "$HERE/replay_sizes.py" "$WORK/plan.json" --scale "$BYTES_SCALE" --max-micro "$MAX_MICRO" \
	--compute-ms "$COMPUTE_MS" --placement-out "$WORK/placement")
cc_say "replay arguments: $REPLAY_ARGS"
mapfile -t PLANNED < <(awk '{print $2}' "$WORK/placement")

cc_say "Pipette's simulated annealing ($SA_BUDGET)"
read -r HIDDEN LAYERS MB < <("$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1])); m = d["model"]["shape"]; p = d["plans"][0]
print(m["hidden_size"], m["num_layers"], p["micro_batch_size"])' "$WORK/plan.json")
"$WORK/bin/pipettesa" -cluster "$WORK/cluster.yaml" -pp "$PP" -dp "$DP" -tp 1 -hidden "$HIDDEN" -seq "$SEQ_LENGTH" \
	-layers "$LAYERS" -micro-batch "$MB" -budget "$SA_BUDGET" | tee "$WORK/pipette.json"
mapfile -t PIPETTE < <("$PYTHON" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["host_order"]))' "$WORK/pipette.json")
# The simulator's figure for Pipette's order, as `plan --as-is` prices it.
"$PL" plan "${PLAN_FLAGS[@]}" --hosts "$(IFS=,; echo "${PIPETTE[*]}")" --as-is --top 1 | grep '^your layout' |
	sed 's/^your layout/Pipette SA order/'

cc_tb_up
cc_run_placed planned "${PLANNED[@]}"
cc_run_placed pipette "${PIPETTE[@]}"
cc_run_placed torchrun "${HOST_ORDER[@]}"

cc_say "result"
islands=$(cat "$WORK/islands")
for base in pipette torchrun; do
	"$PYTHON" "$HERE/report.py" --islands "$islands" --min-ratio 0 --placement "$WORK/placement" \
		"planned=$WORK/planned.log:$WORK/planned.json" "$base=$WORK/$base.log:$WORK/$base.json"
done
