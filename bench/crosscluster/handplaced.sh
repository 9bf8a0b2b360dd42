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
stop() {
	local rc=$? p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	cc_tb_down # also ends every process left in the hosts' namespaces
	exit "$rc"
}
trap stop EXIT
trap 'exit 130' INT TERM

if [[ -z ${TB:-} ]]; then
	(cd "$REPO" && go build -o "$WORK/bin/pipette-testbed" ./cmd/pipette-testbed)
	TB=$WORK/bin/pipette-testbed
fi
cc_tb_up

# squote WORD: WORD in POSIX single quotes for the remote shell.
squote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

run() { # name host...  (one host per NPROC consecutive ranks)
	local name=$1
	shift
	local hosts=() h r
	for h in "$@"; do for ((r = 0; r < NPROC; r++)); do hosts+=("$h"); done; done
	local world=${#hosts[@]} master pids=() line a
	master=$(cc_tb_addr "$1")
	cc_say "$name: ranks on hosts ${hosts[*]}"
	for ((r = 0; r < world; r++)); do
		line="env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % NPROC)) MASTER_ADDR=$master MASTER_PORT=29500"
		line+=" GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 $(squote "$PYTHON") $(squote "$SCRIPT")"
		for a in $REPLAY_ARGS --steps "$STEPS" --warmup "$WARMUP" --timeout-s 300 --json-out "$WORK/$name.json"; do
			line+=" $(squote "$a")"
		done
		ssh -F "$TB_DIR/ssh_config" -o UserKnownHostsFile="$TB_DIR/known_hosts" \
			-o IdentityFile="$TB_DIR/id_ed25519" "${hosts[$r]}" "$line" >"$WORK/$name.$r.log" 2>&1 &
		pids+=($!)
		PIDS+=($!)
	done
	local rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	cat "$WORK/$name".*.log >"$WORK/$name.log"
	((rc == 0)) || cc_die "$name: a rank failed; see $WORK/$name.*.log"
	grep -E '^(step|\{)' "$WORK/$name.0.log"
}
run planned "${PLANNED[@]}"
run naive "${NAIVE[@]}"
cc_report ""
