#!/usr/bin/env bash
# Proof for issue 11 items 3-4 (measure, then close the loop), on the
# test-bed, as root:
#   1. probe --measure: iperf3 matrix + torch GEMM sweep (the model's layer
#      shapes) + intra-host gloo all-reduce on every host;
#   2. two different plans (A and B) of the same model, each run through
#      pipette-launch run as a replay job that does the plan's real GEMMs on
#      the CPU and its real TP/PP/DP traffic over gloo (--log-dir kept);
#   3. B's prediction error on the measured-but-uncalibrated cluster file;
#   4. calibrate from A's logs only;
#   5. B's prediction error again (B's logs never went into the calibration).
# Prints both errors and the calibrated plan table.
#
# Usage: sudo bench/calibration/run.sh          (settings below, overridable by env)
set -euo pipefail

TB_NAME=${TB_NAME:-calibration}
TB_GROUPS=${TB_GROUPS:-A:2:eth}             # one island of two plain-Ethernet hosts
INTER_RATE=${INTER_RATE:-}                  # no shaping: one group
TB_PREFIX=${TB_PREFIX:-cal}
TB_STATE_ROOT=${TB_STATE_ROOT:-/var/lib/pipette-testbed}
NPROC=${NPROC:-2}                           # CPU "GPUs" per host
GLOBAL_BATCH=${GLOBAL_BATCH:-8}
PLAN_A=${PLAN_A:---tp 1 --pp 2 --dp 2 --micro-batch-size 1}   # calibrated from
PLAN_B=${PLAN_B:---tp 2 --pp 2 --dp 1 --micro-batch-size 1}   # held out
STEPS=${STEPS:-6}
WARMUP=${WARMUP:-1}
COMPUTE_SECONDS=${COMPUTE_SECONDS:-3}       # probe's GEMM sweep per host
PYTHON=${PYTHON:-/usr/bin/python3}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=../crosscluster/lib.sh
. "$REPO/bench/crosscluster/lib.sh"
cc_require
MODEL=$HERE/tiny.yaml
SCRIPT=$REPO/examples/replay_plan.py
# Outside /tmp: every test-bed host mounts a private /tmp.
WORK=${WORK:-$(mktemp -d /var/tmp/pipette-calibration.XXXXXX)}
mkdir -p "$WORK"
trap cc_tb_down EXIT
trap 'exit 130' INT TERM

cc_say "build into $WORK/bin"
(cd "$REPO" && go build -o "$WORK/bin/pipette-launch" ./cmd/pipette-launch &&
	go build -o "$WORK/bin/pipette-testbed" ./cmd/pipette-testbed)
PL=$WORK/bin/pipette-launch
TB=$WORK/bin/pipette-testbed

cc_tb_up
SSH=(--ssh-config "$TB_DIR/ssh_config" --known-hosts "$TB_DIR/known_hosts")
HOSTS="${TB_PREFIX}01,${TB_PREFIX}02"

cc_say "1. probe --measure (bandwidth, compute at the model's GEMM shapes, intra-host all-reduce)"
CLUSTER=$WORK/cluster.yaml
# Twice at most: on a heavily loaded machine an iperf3 server can give up.
for try in 1 2; do
	"$PL" probe --hosts "$HOSTS" "${SSH[@]}" --nproc-per-node "$NPROC" --measure --reprobe \
		--measure-compute-seconds "$COMPUTE_SECONDS" --model "$MODEL" --python "$PYTHON" -o "$CLUSTER" && break
	[[ $try == 2 ]] && cc_die "probe --measure failed twice"
done
cat "$CLUSTER"
cp "$CLUSTER" "$WORK/uncalibrated.yaml"

replay() { # name plan-flags
	local name=$1 flags=$2
	cc_say "2. plan $name ($flags) and its replay job"
	# shellcheck disable=SC2086 # plan flags are meant to split
	"$PL" plan --cluster "$CLUSTER" --model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --vpp 1 $flags --top 1
	# shellcheck disable=SC2086
	"$PL" plan --cluster "$CLUSTER" --model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --vpp 1 $flags --top 1 \
		--json >"$WORK/$name.plan.json"
	# Full-size messages, every micro-batch replayed.
	local args
	args=$("$PYTHON" "$REPO/bench/crosscluster/replay_sizes.py" "$WORK/$name.plan.json" --scale 1 --max-micro 1024)
	rm -rf "$WORK/$name.logs"
	# shellcheck disable=SC2086 # replay args are meant to split
	"$PL" run --cluster "$CLUSTER" "${SSH[@]}" --framework megatron --python "$PYTHON" --log-dir "$WORK/$name.logs" \
		"$SCRIPT" $args --compute gemm --steps "$STEPS" --warmup "$WARMUP" --json-out "$WORK/$name.json" \
		>"$WORK/$name.out" 2>&1 || { tail -30 "$WORK/$name.out"; cc_die "replay $name failed"; }
	grep -h "elapsed time per iteration" "$WORK/$name.logs"/*.log
}
replay A "$PLAN_A"
replay B "$PLAN_B"

cc_say "3. B's prediction on the measured, uncalibrated cluster file"
"$PL" calibrate --dry-run --cluster "$WORK/uncalibrated.yaml" --log-dir "$WORK/B.logs" |
	tee "$WORK/B.before.txt"
cc_say "4. calibrate from A's run only"
# What ran comes from the plan run left in its --log-dir (pipette-plan.json).
"$PL" calibrate --cluster "$CLUSTER" --log-dir "$WORK/A.logs" | tee "$WORK/A.calibrate.txt"
cc_say "5. B's prediction on the calibrated cluster file (B never went into the fit)"
"$PL" calibrate --dry-run --cluster "$CLUSTER" --log-dir "$WORK/B.logs" |
	tee "$WORK/B.after.txt"
# shellcheck disable=SC2086
"$PL" plan --cluster "$CLUSTER" --model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --vpp 1 $PLAN_B --top 1

before=$(sed -n 's/^predicted before: .*(error \(.*\))$/\1/p' "$WORK/B.before.txt")
after=$(sed -n 's/^predicted before: .*(error \(.*\))$/\1/p' "$WORK/B.after.txt")
cc_say "result: plan B's prediction error: uncalibrated $before, calibrated from plan A $after (files in $WORK)"
