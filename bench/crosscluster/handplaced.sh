#!/usr/bin/env bash
# run.sh's comparison without pipette-launch: the same test-bed (two islands,
# shaped link between them), but the ranks of examples/replay_plan.py are
# started over plain ssh with a placement written by hand. It measures what
# the two rank orders cost on such links; run.sh measures what pipette-launch
# chooses and launches.
#
# Usage: sudo bench/crosscluster/handplaced.sh    (settings by env; TB=path
# of a pipette-testbed binary, else ./cmd/pipette-testbed is built)
set -euo pipefail

TB_NAME=${TB_NAME:-handplaced}
INTER_RATE=${INTER_RATE:-100mbit}
NPROC=${NPROC:-2}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
MIN_RATIO=${MIN_RATIO:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
# TestReplaySizes' first case: a 1.2e9-parameter model of 24 layers, hidden
# 2048, sequence 1024, TP2 PP2 DP2, 16 micro-batches of 1, sizes / 64.
REPLAY_ARGS=${REPLAY_ARGS:---tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dp 2 --micro-batches 8 --tp-bytes 1572864 --pp-bytes 131072 --dp-bytes 18750000 --compute-ms 300}

TB_GROUPS=${TB_GROUPS:-A:2:ib,B:2:eth}
TB_PREFIX=${TB_PREFIX:-node}
TB_STATE_ROOT=${TB_STATE_ROOT:-/var/lib/pipette-testbed}
# Hosts file order: islands interleaved, as in run.sh.
HOST_ORDER=("${TB_PREFIX}01" "${TB_PREFIX}03" "${TB_PREFIX}02" "${TB_PREFIX}04")
declare -A HOST_ISLAND=(["${TB_PREFIX}01"]=A ["${TB_PREFIX}02"]=A ["${TB_PREFIX}03"]=B ["${TB_PREFIX}04"]=B)
# Planned: island-major, so TP stays in a host, DP in an island and only the
# pipeline crosses (what the planner should choose for TP2 PP2 DP2). Naive:
# rank r on host r/NPROC in file order (torchrun, DeepSpeed), which puts
# every DP group across the islands.
PLANNED=("${TB_PREFIX}01" "${TB_PREFIX}02" "${TB_PREFIX}03" "${TB_PREFIX}04")
NAIVE=("${HOST_ORDER[@]}")

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
cc_require
SCRIPT=$REPO/examples/replay_plan.py
WORK=$(mktemp -d /var/tmp/pipette-handplaced.XXXXXX) # not /tmp: hosts have a private one
PIDS=()
trap cc_stop EXIT
trap 'exit 130' INT TERM

if [[ -z ${TB:-} ]]; then
	(cd "$REPO" && go build -o "$WORK/bin/pipette-testbed" ./cmd/pipette-testbed)
	TB=$WORK/bin/pipette-testbed
fi
cc_tb_up

cc_run_placed planned "${PLANNED[@]}"
cc_run_placed naive "${NAIVE[@]}"
cc_report ""
