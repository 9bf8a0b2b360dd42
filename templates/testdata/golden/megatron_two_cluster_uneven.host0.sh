#!/bin/sh
# pipette-launch: ranks of job pipette on host a01 (node rank 0 of 4).
# Run it on that host (sh SCRIPT, or piped to sh -s). It starts every rank in
# its own session (process group) with its environment set on top of the
# inherited one and stdin from /dev/null, waits for all of them, and stops
# the others as soon as one fails, as torchrun's agent does: SIGTERM, then
# SIGKILL after PIPETTE_STOP_GRACE_S seconds (default 30: run's
# --stop-grace; torchrun's is 30).
# SIGTERM, SIGINT, SIGHUP or SIGQUIT to this script stops every rank the
# same way, each rank getting the signal the script got (as torchrun's agent
# passes it on), and what a rank leaves running in its session is stopped
# before the script ends. Exit status: 0 when every rank succeeded, else the status of the rank
# that failed first on its own (not one that was stopped), else 128+signal
# when the script was stopped by one.
# PIPETTE_RESTART_COUNT sets TORCHELASTIC_RESTART_COUNT (restarts are done by
# the launcher, across all hosts at once).
# `pipette-launch run` starts this same script with control lines in front
# (PIPETTE_CONTROL and the settings below). Then it reports on stdout, each
# line tagged with PIPETTE_CONTROL: its clock and process group first, each
# rank's output lines and exit (status, the host's clock, whether we had
# begun stopping), and "done" at the end; and a watchdog stops every rank
# when the launcher goes silent: EOF on stdin, or no heartbeat byte on it for
# PIPETTE_HEARTBEAT_S seconds (a network cut sends no EOF). The signal the
# ranks get is SIGTERM, or the last signal name (INT, HUP, USR1, ...) the
# launcher wrote on stdin before its EOF: the signal that stopped it. The launcher does
# not reach a host it lost again: once the watchdog has stopped the ranks,
# PIPETTE_REMOVE_FILES (a command) removes the job's files here (reported
# before "done" as "files-removed"), and the agent its own.
set -u
T=${PIPETTE_CONTROL:-}
G=${PIPETTE_STOP_GRACE_S:-30}
HB=${PIPETTE_HEARTBEAT_S:-0}
restart_count=${PIPETTE_RESTART_COUNT:-0}
RMF=${PIPETTE_REMOVE_FILES:-}
n_ranks=4
local_ranks=' 0 1 2 3'
say() { if [ -n "$T" ]; then echo "$T $*"; fi; }
# Under the launcher, stdin is the launcher's line (heartbeats, then EOF):
# only the watchdog reads it.
if [ -n "$T" ]; then exec 3<&0 </dev/null; fi
command -v setsid >/dev/null 2>&1 || { echo "pipette-launch: setsid (util-linux) is needed on $(uname -n)" >&2; exit 127; }
# Ranks start with SIGINT and SIGQUIT at their defaults, as under torchrun.
# A shell starts a background job with both ignored (POSIX, without job
# control), an ignored signal stays ignored across exec, and Python leaves
# an ignored SIGINT alone: a rank would never see a KeyboardInterrupt, nor
# stop on the SIGINT passed on to it. GNU env 8.31 and later sets them back
# ($DS); without it a stop by SIGINT or SIGQUIT sends the ranks SIGTERM.
DS=
if env --default-signal=INT true >/dev/null 2>&1; then DS=--default-signal=INT,QUIT; fi
if [ "$HB" -gt 0 ] && ! command -v timeout >/dev/null 2>&1; then
	echo "pipette-launch: timeout (coreutils) is needed on $(uname -n) for --heartbeat-timeout" >&2
	exit 95
fi
# Per rank, by its place I on this host: $S/I holds "STATUS NS STOPPED" once
# it ended, $S/I.pg its process group; $S/stopping exists once stopping has
# begun.
S=$(mktemp -d "${TMPDIR:-/tmp}/pipette-status.XXXXXX") || exit 98
say clock "$(date +%s%N)"
say pgid $$
PG=$$
P=
stopping=
killer=
WDP=

# alive G: a process of group G runs (zombies are dead, only not yet reaped).
# Kill takes "-SIG -PGID" (no "--": dash's kill rejects it).
alive() { ps -e -o pgid= -o stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ {f=1} END {exit !f}'; }
# alive_any G...: a process of any of these groups runs (one ps scan).
alive_any() { ps -e -o pgid= -o stat= | awk -v gs=" $* " '$2 !~ /^Z/ && index(gs, " " $1 " ") {f=1} END {exit !f}'; }
rank_groups() { cat "$S"/*.pg 2>/dev/null; }

if [ -n "$T" ]; then
	# Watchdog, in its own session so that stopping our group does not stop
	# it first. Without a heartbeat it waits with the read builtin (killing
	# it then leaves no child); with one, each read is under timeout
	# --foreground, which stays in the watchdog's group and dies with it.
	# A read takes every byte waiting (a block, not one byte): on a busy
	# host a loop turn can last longer than the launcher's beat, and a
	# backlog of beats would hide a silence for as long. Once it fires it
	# marks it ($3/released): the job's files go when the ranks are gone,
	# by the script at its end, or by the watchdog itself after its KILL
	# (then the script is gone too, and the watchdog removes the agent's
	# status directory ($3) and its own directory ($6) as the script would).
	setsid /bin/sh -c '
		alive() { ps -e -o pgid= -o stat= | awk -v g="$1" '"'"'$1 == g && $2 !~ /^Z/ {f=1} END {exit !f}'"'"'; }
		sig=TERM
		if [ "$4" -gt 0 ]; then
			# The block, and a dot: $(...) drops trailing newlines.
			while b=$(timeout --foreground "$4" dd bs=4096 count=1 2>/dev/null <&3; echo .) && [ "${#b}" -gt 1 ]; do
				for w in ${b%.}; do sig=$w; done
			done
		else
			while IFS= read -r w; do [ -z "$w" ] || sig=$w; done <&3
		fi
		case $sig in
		INT | QUIT) [ -n "$7" ] || sig=TERM ;;
		ALRM | HUP | INT | PWR | QUIT | TERM | USR1 | USR2 | VTALRM | XCPU | XFSZ) ;;
		*) sig=TERM ;;
		esac
		: >"$3/released"
		# The signal to each rank itself (the script, told so by the
		# stopping file, does not repeat it), then TERM to the script: not
		# a group leader when Slurm started it (a task), then its pid. The grace is timed
		# by the clock, in milliseconds (whole seconds would cut a 1 s grace
		# to anything from 0 to 1 s): a ps scan takes seconds on a busy host.
		: >"$3/stopping"
		for g in $(cat "$3"/*.pg 2>/dev/null); do kill -$sig -$g 2>/dev/null; done
		kill -TERM -$1 2>/dev/null || kill -TERM $1 2>/dev/null
		end=$(($(date +%s%N) / 1000000 + $2 * 1000))
		while alive "$1" && [ $(($(date +%s%N) / 1000000)) -lt "$end" ]; do sleep 0.1; done
		for g in $(cat "$3"/*.pg 2>/dev/null); do kill -KILL -$g 2>/dev/null; done
		# The script'"'"'s own killer (its session) would outlive it.
		for k in $(cat "$3/killer" 2>/dev/null); do kill -KILL -$k 2>/dev/null; kill -KILL $k 2>/dev/null; done
		kill -KILL -$1 2>/dev/null
		[ -z "$5" ] || /bin/sh -c "$5"
		rm -rf "$3"
		case "$6" in
		*/pipette-agent.??????/agent.sh) rm -rf "${6%/agent.sh}" ;;
		esac
	' pipette-watchdog "$PG" "$G" "$S" "$HB" "$RMF" "$0" "$DS" >/dev/null 2>&1 &
	WDP=$!
	exec 3<&-
	say wd "$WDP"
fi

# Runs one rank: $0 is this script's pid, $1 its status file, $2 1 when the
# rank's output goes to the reader (tagged), else 0, $3 env's option that
# sets SIGINT and SIGQUIT back to their defaults ($DS), the rest the argv. It
# leads the rank's session; its group lands in $1.pg before the rank
# starts, and a stop that came first is seen (each side writes before it
# reads the other's file). The rank's environment comes from $1.env
# (mode 0600 in the private status directory, removed once read), never
# from a command line, which anyone on the host can read in ps: secrets
# (tokens, keys, passwords) are among those variables. They may have any
# name, so nothing after they are read uses a variable of the wrapper's:
# the paths of rm, the file and env go in front of the argv (env's "--":
# a variable named -i is an assignment, not an option). It outlives any
# signal a stop sends (a trap, which exec resets for the rank) to record
# the status. Its own
# stderr is /dev/null (the rank's is restored in its subshell): the shell's
# "Terminated" is not the rank's output. Once the status is written it
# tells the reader through the output pipe (the ended marker): a child the
# rank left holding the pipe open must not hold back the exit report until
# it dies, behind the reports of the ranks that failed because of this one.
rank_wrapper='trap : ALRM HUP INT PWR QUIT TERM USR1 USR2 VTALRM XCPU XFSZ
exec 3>&2 2>/dev/null
f=$1 mark=$2 ds=$3; shift 3
echo $$ >"$f.pg"
if [ -e "${f%/*}/stopping" ]; then rc=143; else
	(exec 2>&3 3>&-
	set -- "$(command -v rm)" "$f.env" "$(command -v env)" ${ds:+"$ds"} -- "$@"
	. "$2"; "$1" -f "$2"; shift 2; exec "$@"); rc=$?
fi
by=0; [ -e "${f%/*}/stopping" ] && by=1
echo "$rc $(date +%s%N) $by" >"$f"
[ "$mark" = 1 ] && printf "pipette-ended:%s\\n" "$f"
[ "$rc" -eq 0 ] || [ "$by" -eq 1 ] || kill -USR1 "$0" 2>/dev/null
exit "$rc"'

# tagged prefixes each line with the rank, then reports the rank's exit from
# its status file once the wrapper's ended marker comes (after the rank's
# last line, even one without a final newline), or else at the end of its
# output. A marker before the status file exists is output like any other.
tagged() {
	mk="pipette-ended:$2" sent=
	while IFS= read -r l || [ -n "$l" ]; do
		case "$l" in
		*"$mk")
			if [ -z "$sent" ] && [ -s "$2" ]; then
				[ "$l" = "$mk" ] || printf '%s %s\n' "$1" "${l%"$mk"}"
				printf '%s %s exit %s %s\n' "$1" "$T" "$1" "$(cat "$2")"
				sent=1
				continue
			fi
			;;
		esac
		printf '%s %s\n' "$1" "$l"
	done
	[ -n "$sent" ] || printf '%s %s exit %s %s\n' "$1" "$T" "$1" "$(cat "$2" 2>/dev/null || echo 255)"
}

# start_rank RANK PLACE STDOUT_LOG STDERR_LOG ARGV... (the environment is
# in $S/PLACE.env)
start_rank() {
	r=$1 l=$2 o=$3 e=$4
	shift 4
	if [ -n "$T" ]; then
		# Only the rank takes SIGTERM: the reader ignores it, so on a
		# graceful stop the rank's last lines still arrive (no EPIPE
		# while it checkpoints).
		setsid /bin/sh -c "$rank_wrapper" "$$" "$S/$l" 1 "$DS" "$@" </dev/null 2>&1 | { trap '' TERM; tagged "$r" "$S/$l"; } &
	elif [ -n "$o" ]; then
		setsid /bin/sh -c "$rank_wrapper" "$$" "$S/$l" 0 "$DS" "$@" </dev/null >"$o" 2>"$e" &
	else
		setsid /bin/sh -c "$rank_wrapper" "$$" "$S/$l" 0 "$DS" "$@" </dev/null &
	fi
	P="$P $!"
}

# stop_ranks SIG: SIG (default TERM) to every rank, KILL after the grace.
stop_ranks() {
	[ -n "$stopping" ] && return
	stopping=1
	# The watchdog may have signalled them already: once is enough (a
	# rank's shutdown handler must not run twice).
	if [ ! -e "$S/stopping" ]; then
		: >"$S/stopping"
		for g in $(rank_groups); do kill -"${1:-TERM}" -"$g" 2>/dev/null; done
	fi
	# KILL after the grace period, from its own session with fds closed: a
	# pending SIGKILL must neither keep the caller's pipes (an SSH session)
	# open nor outlive this script. Our group last on its command line: a
	# launcher that lost the line naming the killer (the session dropped)
	# finds it by that.
	setsid /bin/sh -c 'sleep "$1"; for g in $(cat "$2"/*.pg 2>/dev/null); do kill -KILL -"$g" 2>/dev/null; done' \
		pipette-killer "$G" "$S" "$PG" </dev/null >/dev/null 2>&1 &
	killer=$!
	# Known to the watchdog (and the launcher): if this script is killed
	# before it ends the killer itself, they do.
	echo "$killer" >"$S/killer"
	say killer "$killer"
}
interrupted=
# A signal this script gets goes on to the ranks; a rank's own failure
# (USR1 from its wrapper) stops the others with TERM, as torchrun's agent.
# Without $DS the ranks ignore INT and QUIT: they get TERM.
sig_int=TERM sig_quit=TERM
if [ -n "$DS" ]; then sig_int=INT sig_quit=QUIT; fi
trap 'stop_ranks TERM' USR1
trap 'interrupted=143; stop_ranks TERM' TERM
trap 'interrupted=130; stop_ranks $sig_int' INT
trap 'interrupted=129; stop_ranks HUP' HUP
trap 'interrupted=131; stop_ranks $sig_quit' QUIT

# rank 0, local rank 0: its environment (printf is a
# builtin: no command line shows it), then the rank
(umask 077 && printf '%s\n' \
	'export CUDA_DEVICE_MAX_CONNECTIONS=1' \
	'export CUDA_DEVICE_ORDER=PCI_BUS_ID' \
	'export CUDA_VISIBLE_DEVICES=0,1,2,3' \
	'export GLOO_SOCKET_IFNAME=eno1' \
	'export GROUP_RANK=0' \
	'export GROUP_WORLD_SIZE=4' \
	'export LOCAL_RANK=0' \
	'export LOCAL_WORLD_SIZE=4' \
	'export MASTER_ADDR=198.18.0.10' \
	'export MASTER_PORT=29500' \
	'export NCCL_IB_DISABLE=1' \
	'export NCCL_NSOCKS_PERTHREAD=8' \
	'export NCCL_SOCKET_IFNAME==eno1' \
	'export NCCL_SOCKET_NTHREADS=4' \
	'export OMP_NUM_THREADS=1' \
	'export RANK=0' \
	'export ROLE_NAME=default' \
	'export ROLE_RANK=0' \
	'export ROLE_WORLD_SIZE=16' \
	'export TORCHELASTIC_MAX_RESTARTS=0' \
	"export TORCHELASTIC_RESTART_COUNT=$restart_count" \
	'export TORCHELASTIC_RUN_ID=pipette' \
	'export TORCH_NCCL_ASYNC_ERROR_HANDLING=1' \
	'export WORLD_SIZE=16' \
	>"$S/0.env") || exit 98
start_rank 0 0 '' '' \
	/usr/bin/python3 -u pretrain_gpt.py --num-layers 48 --hidden-size 6144 --num-attention-heads 48 --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --bf16 --swiglu --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --context-parallel-size 1 --sequence-parallel --decoder-first-pipeline-num-layers 26 --decoder-last-pipeline-num-layers 22 --micro-batch-size 1 --global-batch-size 128 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
# rank 1, local rank 1: its environment (printf is a
# builtin: no command line shows it), then the rank
(umask 077 && printf '%s\n' \
	'export CUDA_DEVICE_MAX_CONNECTIONS=1' \
	'export CUDA_DEVICE_ORDER=PCI_BUS_ID' \
	'export CUDA_VISIBLE_DEVICES=0,1,2,3' \
	'export GLOO_SOCKET_IFNAME=eno1' \
	'export GROUP_RANK=0' \
	'export GROUP_WORLD_SIZE=4' \
	'export LOCAL_RANK=1' \
	'export LOCAL_WORLD_SIZE=4' \
	'export MASTER_ADDR=198.18.0.10' \
	'export MASTER_PORT=29500' \
	'export NCCL_IB_DISABLE=1' \
	'export NCCL_NSOCKS_PERTHREAD=8' \
	'export NCCL_SOCKET_IFNAME==eno1' \
	'export NCCL_SOCKET_NTHREADS=4' \
	'export OMP_NUM_THREADS=1' \
	'export RANK=1' \
	'export ROLE_NAME=default' \
	'export ROLE_RANK=1' \
	'export ROLE_WORLD_SIZE=16' \
	'export TORCHELASTIC_MAX_RESTARTS=0' \
	"export TORCHELASTIC_RESTART_COUNT=$restart_count" \
	'export TORCHELASTIC_RUN_ID=pipette' \
	'export TORCH_NCCL_ASYNC_ERROR_HANDLING=1' \
	'export WORLD_SIZE=16' \
	>"$S/1.env") || exit 98
start_rank 1 1 '' '' \
	/usr/bin/python3 -u pretrain_gpt.py --num-layers 48 --hidden-size 6144 --num-attention-heads 48 --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --bf16 --swiglu --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --context-parallel-size 1 --sequence-parallel --decoder-first-pipeline-num-layers 26 --decoder-last-pipeline-num-layers 22 --micro-batch-size 1 --global-batch-size 128 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
# rank 2, local rank 2: its environment (printf is a
# builtin: no command line shows it), then the rank
(umask 077 && printf '%s\n' \
	'export CUDA_DEVICE_MAX_CONNECTIONS=1' \
	'export CUDA_DEVICE_ORDER=PCI_BUS_ID' \
	'export CUDA_VISIBLE_DEVICES=0,1,2,3' \
	'export GLOO_SOCKET_IFNAME=eno1' \
	'export GROUP_RANK=0' \
	'export GROUP_WORLD_SIZE=4' \
	'export LOCAL_RANK=2' \
	'export LOCAL_WORLD_SIZE=4' \
	'export MASTER_ADDR=198.18.0.10' \
	'export MASTER_PORT=29500' \
	'export NCCL_IB_DISABLE=1' \
	'export NCCL_NSOCKS_PERTHREAD=8' \
	'export NCCL_SOCKET_IFNAME==eno1' \
	'export NCCL_SOCKET_NTHREADS=4' \
	'export OMP_NUM_THREADS=1' \
	'export RANK=2' \
	'export ROLE_NAME=default' \
	'export ROLE_RANK=2' \
	'export ROLE_WORLD_SIZE=16' \
	'export TORCHELASTIC_MAX_RESTARTS=0' \
	"export TORCHELASTIC_RESTART_COUNT=$restart_count" \
	'export TORCHELASTIC_RUN_ID=pipette' \
	'export TORCH_NCCL_ASYNC_ERROR_HANDLING=1' \
	'export WORLD_SIZE=16' \
	>"$S/2.env") || exit 98
start_rank 2 2 '' '' \
	/usr/bin/python3 -u pretrain_gpt.py --num-layers 48 --hidden-size 6144 --num-attention-heads 48 --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --bf16 --swiglu --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --context-parallel-size 1 --sequence-parallel --decoder-first-pipeline-num-layers 26 --decoder-last-pipeline-num-layers 22 --micro-batch-size 1 --global-batch-size 128 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
# rank 3, local rank 3: its environment (printf is a
# builtin: no command line shows it), then the rank
(umask 077 && printf '%s\n' \
	'export CUDA_DEVICE_MAX_CONNECTIONS=1' \
	'export CUDA_DEVICE_ORDER=PCI_BUS_ID' \
	'export CUDA_VISIBLE_DEVICES=0,1,2,3' \
	'export GLOO_SOCKET_IFNAME=eno1' \
	'export GROUP_RANK=0' \
	'export GROUP_WORLD_SIZE=4' \
	'export LOCAL_RANK=3' \
	'export LOCAL_WORLD_SIZE=4' \
	'export MASTER_ADDR=198.18.0.10' \
	'export MASTER_PORT=29500' \
	'export NCCL_IB_DISABLE=1' \
	'export NCCL_NSOCKS_PERTHREAD=8' \
	'export NCCL_SOCKET_IFNAME==eno1' \
	'export NCCL_SOCKET_NTHREADS=4' \
	'export OMP_NUM_THREADS=1' \
	'export RANK=3' \
	'export ROLE_NAME=default' \
	'export ROLE_RANK=3' \
	'export ROLE_WORLD_SIZE=16' \
	'export TORCHELASTIC_MAX_RESTARTS=0' \
	"export TORCHELASTIC_RESTART_COUNT=$restart_count" \
	'export TORCHELASTIC_RUN_ID=pipette' \
	'export TORCH_NCCL_ASYNC_ERROR_HANDLING=1' \
	'export WORLD_SIZE=16' \
	>"$S/3.env") || exit 98
start_rank 3 3 '' '' \
	/usr/bin/python3 -u pretrain_gpt.py --num-layers 48 --hidden-size 6144 --num-attention-heads 48 --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --bf16 --swiglu --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --context-parallel-size 1 --sequence-parallel --decoder-first-pipeline-num-layers 26 --decoder-last-pipeline-num-layers 22 --micro-batch-size 1 --global-batch-size 128 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
if [ -n "$T" ]; then
	# Each wrapper writes its group as it starts: report them all.
	i=0
	while [ "$(ls "$S" | grep -c '[.]pg$')" -lt "$n_ranks" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	say ranks $(rank_groups)
fi

for p in $P; do
	wait "$p"
	# A trapped signal interrupts wait while the rank still runs: wait
	# again until it has really ended.
	while [ $? -gt 128 ] && kill -0 "$p" 2>/dev/null; do wait "$p"; done
done

# What the ranks left running in their sessions (daemonised children):
# TERM, then KILL after the grace period.
left=
for g in $(rank_groups); do alive "$g" && left="$left $g"; done
if [ -n "$left" ]; then
	for g in $left; do kill -TERM -"$g" 2>/dev/null; done
	end=$(($(date +%s%N) / 1000000 + G * 1000))
	while [ $(($(date +%s%N) / 1000000)) -lt "$end" ]; do
		any=
		for g in $left; do alive "$g" && any=1; done
		[ -z "$any" ] && break
		sleep 0.1
	done
	for g in $left; do kill -KILL -"$g" 2>/dev/null; done
fi
# End our helpers (by group and by pid, in case one has not reached its
# setsid yet) and reap them, so nothing of ours outlives the script.
for k in $killer $WDP; do
	kill -KILL -"$k" 2>/dev/null
	kill -KILL "$k" 2>/dev/null
	wait "$k" 2>/dev/null
done
# A KILLed process still has to run to die (a while on a busy host): end
# only once nothing of the ranks' sessions and our helpers' is left, so that
# "done" means gone (bounded: 10 s, then say what is left).
gone_groups="$(rank_groups) $killer $WDP"
if [ -n "${gone_groups# }" ]; then
	end=$(($(date +%s%N) / 1000000 + 10000))
	while alive_any $gone_groups && [ $(($(date +%s%N) / 1000000)) -lt "$end" ]; do sleep 0.1; done
	alive_any $gone_groups && say left $gone_groups
fi

# The status: the earliest own failure (by the host's clock), else the
# first stopped rank's.
status=0
best=
l=0
for lr in $local_ranks; do
	rc=255 ns=0 by=1
	[ -s "$S/$l" ] && read -r rc ns by <"$S/$l"
	if [ "$rc" -ne 0 ]; then
		[ -n "$T" ] || echo "pipette-launch: $(uname -n): local rank $lr exited with status $rc" >&2
		if [ -z "$best" ] || { [ "$best" = stopped ] && [ "$by" = 0 ]; } || { [ "$by" = 0 ] && [ "$ns" -lt "$best_ns" ]; }; then
			status=$rc best_ns=$ns
			best=own
			[ "$by" = 0 ] || best=stopped
		fi
	fi
	l=$((l + 1))
done
# Stopped by the watchdog (the launcher stopped the job or went silent):
# the job's files go too, whether or not the launcher can still reach us
# (one that can is told: it need not remove them itself).
if [ -n "$RMF" ] && [ -e "$S/released" ] && /bin/sh -c "$RMF"; then say files-removed; fi
rm -rf "$S"
if [ -n "$T" ]; then
	say done
	# The private directory the launcher started us from; only a path of
	# exactly that shape is removed.
	case "$0" in
	*/pipette-agent.??????/agent.sh) rm -rf "${0%/agent.sh}" ;;
	esac
	exit 0
fi
# Stopped by a signal with every rank ending well (a graceful shutdown) is
# still not a success.
if [ "$status" -eq 0 ] && [ -n "$interrupted" ]; then status=$interrupted; fi
exit "$status"
