#!/bin/sh
# pipette-launch: ranks of job pipette on host w1 (node rank 0 of 2).
# Starts every rank in its own session (process group) with its environment
# set on top of the inherited one and stdin from /dev/null (explicit, though
# POSIX shells do it for background jobs: the script may itself arrive on
# stdin, `ssh host sh -s < script`), waits for all of them, and stops the
# others as soon as one fails, as torchrun's agent does. Exit status: 0 when
# every rank succeeded, else the first failing rank's own status.
# PIPETTE_RESTART_COUNT sets TORCHELASTIC_RESTART_COUNT (restarts are done by
# the launcher, across all hosts at once); PIPETTE_STOP_GRACE_S is how long
# ranks get between SIGTERM and SIGKILL (default 30, as torchrun).
set -u
command -v setsid >/dev/null 2>&1 || { echo "pipette-launch: setsid (util-linux) is needed on $(uname -n)" >&2; exit 127; }
cd '/srv/job dir' || exit 1
mkdir -p logs || exit 1
restart_count=${PIPETTE_RESTART_COUNT:-0}
grace=${PIPETTE_STOP_GRACE_S:-30}
pids=
killers=
stopping=
# Each rank's exit status lands in a file: the shell's own job table cannot
# be trusted for it once a trap has interrupted wait.
statusdir=$(mktemp -d "${TMPDIR:-/tmp}/pipette.XXXXXX") || exit 1

# Runs one rank: $0 is this script's pid, $1 the status file, the rest the
# env assignments and argv. The TERM trap (reset by exec, unlike an ignored
# signal) lets it outlive its rank long enough to record the status.
rank_wrapper='trap : TERM INT HUP; f=$1; shift; env "$@"; rc=$?; echo "$rc" >"$f"; [ "$rc" -eq 0 ] || kill -USR1 "$0" 2>/dev/null; exit "$rc"'

stop_ranks() {
	stopping=1
	[ -z "$pids" ] && return
	for p in $pids; do kill -TERM "-$p" 2>/dev/null; done
	# Its own session, fds closed: a pending SIGKILL must neither keep the
	# caller's pipes (an SSH session) open nor outlive this script.
	setsid sh -c 'sleep "$0"; for p; do kill -KILL "-$p" 2>/dev/null; done' "$grace" $pids </dev/null >/dev/null 2>&1 &
	killers="$killers $!"
}
trap stop_ranks USR1 TERM INT HUP

# rank 0, local rank 0
setsid sh -c "$rank_wrapper" "$$" "$statusdir/0" \
	CUDA_DEVICE_ORDER=PCI_BUS_ID \
	CUDA_VISIBLE_DEVICES=0,1,2,3 \
	GLOO_SOCKET_IFNAME=eth0 \
	GROUP_RANK=0 \
	GROUP_WORLD_SIZE=2 \
	LOCAL_RANK=0 \
	LOCAL_WORLD_SIZE=4 \
	MASTER_ADDR=198.18.0.10 \
	MASTER_PORT=29500 \
	NCCL_IB_DISABLE=1 \
	NCCL_NSOCKS_PERTHREAD=8 \
	NCCL_SOCKET_IFNAME==eth0 \
	NCCL_SOCKET_NTHREADS=4 \
	OMP_NUM_THREADS=1 \
	RANK=0 \
	ROLE_NAME=default \
	ROLE_RANK=0 \
	ROLE_WORLD_SIZE=8 \
	TORCHELASTIC_MAX_RESTARTS=0 \
	"TORCHELASTIC_RESTART_COUNT=$restart_count" \
	TORCHELASTIC_RUN_ID=pipette \
	TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
	WORLD_SIZE=8 \
	python3 -u train.py --epochs 3 \
	</dev/null >logs/rank0.stdout.log 2>logs/rank0.stderr.log &
pids="$pids $!"
# rank 1, local rank 1
setsid sh -c "$rank_wrapper" "$$" "$statusdir/1" \
	CUDA_DEVICE_ORDER=PCI_BUS_ID \
	CUDA_VISIBLE_DEVICES=0,1,2,3 \
	GLOO_SOCKET_IFNAME=eth0 \
	GROUP_RANK=0 \
	GROUP_WORLD_SIZE=2 \
	LOCAL_RANK=1 \
	LOCAL_WORLD_SIZE=4 \
	MASTER_ADDR=198.18.0.10 \
	MASTER_PORT=29500 \
	NCCL_IB_DISABLE=1 \
	NCCL_NSOCKS_PERTHREAD=8 \
	NCCL_SOCKET_IFNAME==eth0 \
	NCCL_SOCKET_NTHREADS=4 \
	OMP_NUM_THREADS=1 \
	RANK=1 \
	ROLE_NAME=default \
	ROLE_RANK=1 \
	ROLE_WORLD_SIZE=8 \
	TORCHELASTIC_MAX_RESTARTS=0 \
	"TORCHELASTIC_RESTART_COUNT=$restart_count" \
	TORCHELASTIC_RUN_ID=pipette \
	TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
	WORLD_SIZE=8 \
	python3 -u train.py --epochs 3 \
	</dev/null >logs/rank1.stdout.log 2>logs/rank1.stderr.log &
pids="$pids $!"
# rank 2, local rank 2
setsid sh -c "$rank_wrapper" "$$" "$statusdir/2" \
	CUDA_DEVICE_ORDER=PCI_BUS_ID \
	CUDA_VISIBLE_DEVICES=0,1,2,3 \
	GLOO_SOCKET_IFNAME=eth0 \
	GROUP_RANK=0 \
	GROUP_WORLD_SIZE=2 \
	LOCAL_RANK=2 \
	LOCAL_WORLD_SIZE=4 \
	MASTER_ADDR=198.18.0.10 \
	MASTER_PORT=29500 \
	NCCL_IB_DISABLE=1 \
	NCCL_NSOCKS_PERTHREAD=8 \
	NCCL_SOCKET_IFNAME==eth0 \
	NCCL_SOCKET_NTHREADS=4 \
	OMP_NUM_THREADS=1 \
	RANK=2 \
	ROLE_NAME=default \
	ROLE_RANK=2 \
	ROLE_WORLD_SIZE=8 \
	TORCHELASTIC_MAX_RESTARTS=0 \
	"TORCHELASTIC_RESTART_COUNT=$restart_count" \
	TORCHELASTIC_RUN_ID=pipette \
	TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
	WORLD_SIZE=8 \
	python3 -u train.py --epochs 3 \
	</dev/null >logs/rank2.stdout.log 2>logs/rank2.stderr.log &
pids="$pids $!"
# rank 3, local rank 3
setsid sh -c "$rank_wrapper" "$$" "$statusdir/3" \
	CUDA_DEVICE_ORDER=PCI_BUS_ID \
	CUDA_VISIBLE_DEVICES=0,1,2,3 \
	GLOO_SOCKET_IFNAME=eth0 \
	GROUP_RANK=0 \
	GROUP_WORLD_SIZE=2 \
	LOCAL_RANK=3 \
	LOCAL_WORLD_SIZE=4 \
	MASTER_ADDR=198.18.0.10 \
	MASTER_PORT=29500 \
	NCCL_IB_DISABLE=1 \
	NCCL_NSOCKS_PERTHREAD=8 \
	NCCL_SOCKET_IFNAME==eth0 \
	NCCL_SOCKET_NTHREADS=4 \
	OMP_NUM_THREADS=1 \
	RANK=3 \
	ROLE_NAME=default \
	ROLE_RANK=3 \
	ROLE_WORLD_SIZE=8 \
	TORCHELASTIC_MAX_RESTARTS=0 \
	"TORCHELASTIC_RESTART_COUNT=$restart_count" \
	TORCHELASTIC_RUN_ID=pipette \
	TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
	WORLD_SIZE=8 \
	python3 -u train.py --epochs 3 \
	</dev/null >logs/rank3.stdout.log 2>logs/rank3.stderr.log &
pids="$pids $!"
# A signal that came while ranks were starting missed the later ones.
[ -n "$stopping" ] && stop_ranks

status=0
rank=0
for p in $pids; do
	wait "$p"
	rc=$?
	# A trapped signal interrupts wait with a status above 128 while the
	# rank still runs: wait again until it has really exited.
	while [ "$rc" -gt 128 ] && kill -0 "$p" 2>/dev/null; do
		wait "$p"
		rc=$?
	done
	[ -s "$statusdir/$rank" ] && rc=$(cat "$statusdir/$rank")
	if [ "$rc" -ne 0 ]; then
		echo "pipette-launch: $(uname -n): local rank $rank exited with status $rc" >&2
		# Prefer a rank's own failure over the SIGTERM/SIGKILL we sent.
		if [ "$status" -eq 0 ] || { [ "$status" -gt 128 ] && [ "$rc" -le 128 ]; }; then status=$rc; fi
		[ -n "$stopping" ] || stop_ranks
	fi
	rank=$((rank + 1))
done
for k in $killers; do kill -TERM "-$k" 2>/dev/null; done
rm -rf "$statusdir"
exit "$status"
