#!/usr/bin/env bash
# Proof for issue 5 (cross-cluster placement), on the test-bed, as root:
# two islands of two hosts (A: fake InfiniBand, B: plain Ethernet) joined by a
# shaped link; probe --measure; plan; then examples/replay_plan.py (a real
# gloo job replaying the plan's traffic) twice through pipette-launch run:
# with the planned placement and with the naive rank order (--ignore-islands:
# hosts in file order, rank r on host r/nproc). Prints both median step times
# and their ratio. See README.md beside this file.
#
# Usage: sudo bench/crosscluster/run.sh        (settings below, overridable by env)
set -euo pipefail

# ---- settings --------------------------------------------------------------
TB_NAME=${TB_NAME:-crosscluster}
INTER_RATE=${INTER_RATE:-100mbit}          # tc rate of the link between islands
NPROC=${NPROC:-2}                          # ranks per host
MODEL=${MODEL:-gpt3-1.3b}                  # preset name or model YAML
GLOBAL_BATCH=${GLOBAL_BATCH:-16}
SEQ_LENGTH=${SEQ_LENGTH:-1024}
PLAN_INDEX=${PLAN_INDEX:-0}                # which plan of `plan --json` to replay (0 = best)
BYTES_SCALE=${BYTES_SCALE:-64}             # every message is the plan's size / BYTES_SCALE
MAX_MICRO=${MAX_MICRO:-8}                  # replay at most this many micro-batches per step
COMPUTE_MS=${COMPUTE_MS:-300}              # sleep standing for one stage's compute per step
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-1}
MIN_RATIO=${MIN_RATIO:-2}                  # exit 1 when naive/planned is below this
PYTHON=${PYTHON:-/usr/bin/python3}         # Debian's, with torch (testbed.md)

# pipette-testbed names hosts PREFIX01.. in group order: A gets node01 and
# node02 (fake InfiniBand), B node03 and node04 (plain Ethernet). The hostfile
# given to pipette-launch interleaves the islands on purpose (see README).
TB_GROUPS=${TB_GROUPS:-A:2:ib,B:2:eth}
TB_PREFIX=${TB_PREFIX:-node}
HOST_ORDER=("${TB_PREFIX}01" "${TB_PREFIX}03" "${TB_PREFIX}02" "${TB_PREFIX}04")
declare -A HOST_ISLAND=(["${TB_PREFIX}01"]=A ["${TB_PREFIX}02"]=A ["${TB_PREFIX}03"]=B ["${TB_PREFIX}04"]=B)
TB_STATE_ROOT=${TB_STATE_ROOT:-/var/lib/pipette-testbed} # testbed.DefaultStateRoot

# ---- pipette-launch flag spellings -----------------------------------------
# pipette-testbed's flags (lib.sh) are its real ones. These were written
# while pipette-launch's CLI was being built: override them if they differ.
# @SSH_CONFIG@ and @KNOWN_HOSTS@ are replaced by the test-bed's files.
PL_SSH_FLAGS_TMPL=${PL_SSH_FLAGS_TMPL:---ssh-config @SSH_CONFIG@ --known-hosts @KNOWN_HOSTS@}
PL_HOSTFILE_FLAG=${PL_HOSTFILE_FLAG:---hostfile}
PL_MEASURE_FLAG=${PL_MEASURE_FLAG:---measure}
PL_OUT_FLAG=${PL_OUT_FLAG:--o}
PL_NPROC_FLAG=${PL_NPROC_FLAG:---nproc-per-node}
PL_IGNORE_ISLANDS_FLAG=${PL_IGNORE_ISLANDS_FLAG:---ignore-islands}
PL_PLAN_FLAGS=(--model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --seq-length "$SEQ_LENGTH")
PL_EXTRA_PROBE_FLAGS=${PL_EXTRA_PROBE_FLAGS:-}
PL_EXTRA_RUN_FLAGS=${PL_EXTRA_RUN_FLAGS:-}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
cc_require

SCRIPT=$REPO/examples/replay_plan.py
# Outside /tmp: every test-bed host mounts a private /tmp, and rank 0 (on
# some test-bed host) writes its result file here.
WORK=$(mktemp -d /var/tmp/pipette-crosscluster.XXXXXX)
trap cc_tb_down EXIT
trap 'exit 130' INT TERM

# ---- 1. build --------------------------------------------------------------
cc_say "build pipette-launch and pipette-testbed into $WORK/bin"
(cd "$REPO" && go build -o "$WORK/bin/pipette-launch" ./cmd/pipette-launch &&
	go build -o "$WORK/bin/pipette-testbed" ./cmd/pipette-testbed)
PL=$WORK/bin/pipette-launch
TB=$WORK/bin/pipette-testbed

# ---- 2. test-bed -----------------------------------------------------------
cc_tb_up
HOSTFILE=$WORK/hostfile
printf '%s\n' "${HOST_ORDER[@]}" >"$HOSTFILE" # the order is the point: not the test-bed's own list
ssh_flags=${PL_SSH_FLAGS_TMPL//@SSH_CONFIG@/$TB_DIR/ssh_config}
read -r -a PL_SSH_FLAGS <<<"${ssh_flags//@KNOWN_HOSTS@/$TB_DIR/known_hosts}"
echo "test-bed state: $TB_DIR; hostfile order: ${HOST_ORDER[*]}"

# ---- 3. probe --measure ----------------------------------------------------
cc_say "probe --measure"
CLUSTER=$WORK/cluster.yaml
# shellcheck disable=SC2086 # extra flags are meant to split
"$PL" probe "$PL_HOSTFILE_FLAG" "$HOSTFILE" "${PL_SSH_FLAGS[@]}" "$PL_NPROC_FLAG" "$NPROC" \
	"$PL_MEASURE_FLAG" $PL_EXTRA_PROBE_FLAGS "$PL_OUT_FLAG" "$CLUSTER"
echo "--- $CLUSTER"
cat "$CLUSTER"

# ---- 4. plan ---------------------------------------------------------------
cc_say "plan (with islands, and ignoring them for comparison)"
"$PL" plan --cluster "$CLUSTER" "${PL_PLAN_FLAGS[@]}"
"$PL" plan --cluster "$CLUSTER" "${PL_PLAN_FLAGS[@]}" "$PL_IGNORE_ISLANDS_FLAG" || true
"$PL" plan --cluster "$CLUSTER" "${PL_PLAN_FLAGS[@]}" --json >"$WORK/plan.json"
# Replay sizes from the plan; the arithmetic is in replay_sizes.py's doc.
REPLAY_ARGS=$("$PYTHON" "$HERE/replay_sizes.py" "$WORK/plan.json" --index "$PLAN_INDEX" --scale "$BYTES_SCALE" \
	--max-micro "$MAX_MICRO" --compute-ms "$COMPUTE_MS" --placement-out "$WORK/plan.placement")
echo "replay args: $REPLAY_ARGS"

# ---- 5. two runs -----------------------------------------------------------
run_replay() { # name [extra pipette-launch flags...]
	local name=$1
	shift
	cc_say "run: $name"
	# shellcheck disable=SC2086 # REPLAY_ARGS and extra flags are meant to split
	"$PL" run --cluster "$CLUSTER" "${PL_SSH_FLAGS[@]}" --framework torch --python "$PYTHON" \
		"$PL_NPROC_FLAG" "$NPROC" "${PL_PLAN_FLAGS[@]}" "$@" $PL_EXTRA_RUN_FLAGS \
		"$SCRIPT" $REPLAY_ARGS --steps "$STEPS" --warmup "$WARMUP" --json-out "$WORK/$name.json" \
		2>&1 | tee "$WORK/$name.log"
	[[ -s $WORK/$name.json ]] || cc_die "$name: rank 0 wrote no $WORK/$name.json (see $WORK/$name.log)"
}
run_replay planned
run_replay naive "$PL_IGNORE_ISLANDS_FLAG"

# ---- 6. report -------------------------------------------------------------
cc_report "$WORK/plan.placement"
