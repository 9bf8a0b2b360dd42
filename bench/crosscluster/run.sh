#!/usr/bin/env bash
# Proof for issue 5 (cross-cluster placement), on the test-bed, as root:
# two islands of two hosts (A: fake InfiniBand, B: plain Ethernet) joined by a
# shaped link; probe --measure; plan; then examples/replay_plan.py (a real
# gloo job replaying the plan's traffic) twice through pipette-launch run:
# with the planned placement (--cluster) and with torchrun's rank order for
# the same hosts file (--hostfile: hosts in file order, rank r on host
# r/nproc). Prints both median step times
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
# probe's and plan's flags are the real ones (main / branch render). run's SSH
# flags were not on any branch yet when this was written: override if they
# differ. @SSH_CONFIG@ and @KNOWN_HOSTS@ become the test-bed's files.
PL_SSH_FLAGS_TMPL=${PL_SSH_FLAGS_TMPL:---ssh-config @SSH_CONFIG@ --known-hosts @KNOWN_HOSTS@}
PL_RUN_SSH_FLAGS_TMPL=${PL_RUN_SSH_FLAGS_TMPL:-$PL_SSH_FLAGS_TMPL}
# --reprobe: a cached measurement of same-named hosts from another test-bed
# (other shaping) must not be reused.
PL_EXTRA_PROBE_FLAGS=${PL_EXTRA_PROBE_FLAGS:---reprobe}
PL_PLAN_FLAGS=(--model "$MODEL" --global-batch-size "$GLOBAL_BATCH")
[[ -n $SEQ_LENGTH ]] && PL_PLAN_FLAGS+=(--seq-length "$SEQ_LENGTH")
# The comparison is placement against the default rank order for one plan.
# A plan with data parallelism is where the order matters: PLAN_FIX pins
# the pipeline to 2 stages as a user fixing --pp would (the unconstrained
# best plan on this test-bed may have DP = 1, and then both orders carry
# only pipeline traffic across the islands). PLAN_FIX= plans freely.
PLAN_FIX=${PLAN_FIX---pp 2}
# shellcheck disable=SC2206 # word-split on purpose: a list of flags
[[ -n $PLAN_FIX ]] && PL_PLAN_FLAGS+=($PLAN_FIX)
# Planned: run plans from the cluster file; only a Megatron launch is planned
# (plain torch jobs get torchrun's order), so the replay runs as one, with
# the model and pinned sizes in Megatron's flags (replay_sizes.py).
PL_PLANNED_RUN_FLAGS=${PL_PLANNED_RUN_FLAGS:---framework megatron}
# Naive: a hostfile in the given order, no planning: torchrun's rank order.
PL_NAIVE_RUN_FLAGS=${PL_NAIVE_RUN_FLAGS:---framework torch --nproc-per-node $NPROC}
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
# The order is the point: not the test-bed's own (island-ordered) hosts file.
HOSTFILE=$WORK/hostfile
printf '%s slots='"$NPROC"'\n' "${HOST_ORDER[@]}" >"$HOSTFILE"
fill() { # template -> words, with the test-bed's files filled in
	local f=${1//@SSH_CONFIG@/$TB_DIR/ssh_config}
	echo "${f//@KNOWN_HOSTS@/$TB_DIR/known_hosts}"
}
read -r -a PL_SSH_FLAGS <<<"$(fill "$PL_SSH_FLAGS_TMPL")"
read -r -a PL_RUN_SSH_FLAGS <<<"$(fill "$PL_RUN_SSH_FLAGS_TMPL")"
echo "test-bed state: $TB_DIR; hostfile order: ${HOST_ORDER[*]}"

# ---- 3. probe --measure ----------------------------------------------------
cc_say "probe --measure"
CLUSTER=$WORK/cluster.yaml
# shellcheck disable=SC2086 # extra flags are meant to split
"$PL" probe --hostfile "$HOSTFILE" "${PL_SSH_FLAGS[@]}" --nproc-per-node "$NPROC" --measure \
	$PL_EXTRA_PROBE_FLAGS -o "$CLUSTER"
echo "--- $CLUSTER"
cat "$CLUSTER"

# ---- 4. plan ---------------------------------------------------------------
cc_say "plan (the table also shows the best plan ignoring the islands)"
"$PL" plan --cluster "$CLUSTER" "${PL_PLAN_FLAGS[@]}"
"$PL" plan --cluster "$CLUSTER" "${PL_PLAN_FLAGS[@]}" --json >"$WORK/plan.json"
# Replay sizes from the plan; the arithmetic is in replay_sizes.py's doc.
REPLAY_ARGS=$("$PYTHON" "$HERE/replay_sizes.py" "$WORK/plan.json" --index "$PLAN_INDEX" --scale "$BYTES_SCALE" \
	--max-micro "$MAX_MICRO" --compute-ms "$COMPUTE_MS" --placement-out "$WORK/plan.placement")
echo "replay args: $REPLAY_ARGS"

# ---- 5. two runs -----------------------------------------------------------
run_replay() { # name pipette-launch-flags...
	local name=$1
	shift
	cc_say "run: $name"
	# shellcheck disable=SC2086 # REPLAY_ARGS and extra flags are meant to split
	"$PL" run "$@" "${PL_RUN_SSH_FLAGS[@]}" --python "$PYTHON" $PL_EXTRA_RUN_FLAGS \
		"$SCRIPT" $REPLAY_ARGS --steps "$STEPS" --warmup "$WARMUP" --json-out "$WORK/$name.json" \
		2>&1 | tee "$WORK/$name.log"
	[[ -s $WORK/$name.json ]] || cc_die "$name: rank 0 wrote no $WORK/$name.json (see $WORK/$name.log)"
}
# shellcheck disable=SC2086 # the flag variables are meant to split
run_replay planned --cluster "$CLUSTER" $PL_PLANNED_RUN_FLAGS
# shellcheck disable=SC2086
run_replay naive --hostfile "$HOSTFILE" $PL_NAIVE_RUN_FLAGS

# ---- 6. report -------------------------------------------------------------
cc_report "$WORK/plan.placement"
