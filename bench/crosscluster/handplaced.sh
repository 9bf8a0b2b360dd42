#!/usr/bin/env bash
# The same comparison as run.sh with pipette-launch left out: two islands of
# two hosts (network namespaces with their own hostname, islands joined by a
# tc-shaped link), ranks of examples/replay_plan.py started directly in the
# namespaces with a placement written by hand. It measures what the two rank
# orders cost on such links; run.sh measures what pipette-launch chooses.
#
# Usage: sudo bench/crosscluster/handplaced.sh     (as root; settings by env)
set -euo pipefail

INTER_RATE=${INTER_RATE:-100mbit}
NPROC=${NPROC:-2}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
MIN_RATIO=${MIN_RATIO:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
# TestReplaySizes' first case: a 1.2e9-parameter model of 24 layers, hidden
# 2048, sequence 1024, TP2 PP2 DP2, 16 micro-batches of 1, sizes / 64.
REPLAY_ARGS=${REPLAY_ARGS:---tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dp 2 --micro-batches 8 --tp-bytes 1572864 --pp-bytes 131072 --dp-bytes 18750000 --compute-ms 300}

HOST_ORDER=(a1 b1 a2 b2) # the hosts file order: islands interleaved
declare -A ISLAND=([a1]=A [a2]=A [b1]=B [b2]=B)
declare -A ADDR=([a1]=198.19.250.11 [b1]=198.19.250.12 [a2]=198.19.250.13 [b2]=198.19.250.14)
# Planned: island-major, so TP stays in a host, DP in an island and only the
# pipeline crosses. Naive: rank r on host r/NPROC in file order (torchrun,
# DeepSpeed), which puts every DP group across the islands.
PLANNED=(a1 a2 b1 b2)
NAIVE=("${HOST_ORDER[@]}")
PREFIX=xc # namespaces xcsw, xca1, ...: not the test-bed's pl<k>*

die() { printf 'handplaced: %s\n' "$*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root (network namespaces)"
"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
	die "$PYTHON cannot import torch.distributed with gloo: apt-get install python3-torch"
for ns in "${PREFIX}sw" "${HOST_ORDER[@]/#/$PREFIX}"; do
	[[ ! -e /run/netns/$ns ]] || die "namespace $ns exists: another handplaced.sh is running, or remove it (ip netns del $ns)"
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCRIPT=$HERE/../../examples/replay_plan.py
WORK=$(mktemp -d /var/tmp/pipette-handplaced.XXXXXX)
MADE=()
PIDS=()
cleanup() {
	local rc=$?
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for ns in "${MADE[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	echo "handplaced: files kept in $WORK" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The bridges live in their own namespace; the root namespace gets nothing.
sw=${PREFIX}sw
ip netns add "$sw" && MADE+=("$sw")
ip -n "$sw" link set lo up
for i in A B; do ip -n "$sw" link add "br$i" type bridge && ip -n "$sw" link set "br$i" up; done
ip -n "$sw" link add upA type veth peer name upB
ip -n "$sw" link set upA master brA up
ip -n "$sw" link set upB master brB up
for d in upA upB; do # both directions
	ip netns exec "$sw" tc qdisc add dev "$d" root tbf rate "$INTER_RATE" burst 64kb latency 50ms
done
i=0
for h in "${HOST_ORDER[@]}"; do
	i=$((i + 1))
	ns=$PREFIX$h
	ip netns add "$ns" && MADE+=("$ns")
	ip link add "port$i" netns "$sw" type veth peer name eth0 netns "$ns"
	ip -n "$sw" link set "port$i" master "br${ISLAND[$h]}" up
	ip -n "$ns" addr add "${ADDR[$h]}/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
done

run() { # name host...  (one host per NPROC consecutive ranks)
	local name=$1
	shift
	local hosts=() h r
	for h in "$@"; do for ((r = 0; r < NPROC; r++)); do hosts+=("$h"); done; done
	local world=${#hosts[@]} master=${ADDR[$1]} pids=()
	echo "== $name: ranks on hosts ${hosts[*]}"
	for ((r = 0; r < world; r++)); do
		h=${hosts[$r]}
		# shellcheck disable=SC2086 # REPLAY_ARGS is meant to split
		ip netns exec "$PREFIX$h" unshare -u sh -c 'hostname "$0"; exec "$@"' "$h" \
			env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % NPROC)) MASTER_ADDR="$master" MASTER_PORT=29500 \
			GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 "$PYTHON" "$SCRIPT" $REPLAY_ARGS \
			--steps "$STEPS" --warmup "$WARMUP" --timeout-s 300 --json-out "$WORK/$name.json" \
			>"$WORK/$name.$r.log" 2>&1 &
		pids+=($!)
		PIDS+=($!)
	done
	local rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	cat "$WORK/$name".*.log >"$WORK/$name.log"
	((rc == 0)) || die "$name: a rank failed; see $WORK/$name.*.log"
	grep -E '^(step|\{)' "$WORK/$name.0.log"
}
run planned "${PLANNED[@]}"
run naive "${NAIVE[@]}"

islands=""
for h in "${HOST_ORDER[@]}"; do islands+="${islands:+,}$h=${ISLAND[$h]}"; done
echo "== result"
"$PYTHON" "$HERE/report.py" --islands "$islands" --min-ratio "$MIN_RATIO" \
	"planned=$WORK/planned.log:$WORK/planned.json" "naive=$WORK/naive.log:$WORK/naive.json"
