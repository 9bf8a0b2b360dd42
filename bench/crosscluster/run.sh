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

# Host order of the hostfile: it interleaves the islands on purpose (see README).
HOST_ORDER=(a1 b1 a2 b2)
declare -A HOST_ISLAND=([a1]=A [a2]=A [b1]=B [b2]=B)
declare -A HOST_RDMA=([a1]=infiniband [a2]=infiniband [b1]= [b2]=)

# ---- CLI spellings (assumed; the CLIs were written in parallel) ------------
# pipette-testbed: `up` with one --host NAME:GROUP[:RDMA] per host and the
# rate of links between groups; `down --name`.
TB_HOST_FLAG=${TB_HOST_FLAG:---host}
TB_SHAPE_FLAG=${TB_SHAPE_FLAG:---group-shape}
TB_NAME_FLAG=${TB_NAME_FLAG:---name}
TB_STATE_ROOT=${TB_STATE_ROOT:-/var/lib/pipette-testbed}   # testbed.DefaultStateRoot
# pipette-launch: how it is told the test-bed's ssh_config (which also names
# the key and known_hosts), the hostfile, and the switches used below.
PL_SSH_FLAGS_TMPL=${PL_SSH_FLAGS_TMPL:---ssh-config {ssh_config}}
PL_HOSTFILE_FLAG=${PL_HOSTFILE_FLAG:---hostfile}
PL_MEASURE_FLAG=${PL_MEASURE_FLAG:---measure}
PL_OUT_FLAG=${PL_OUT_FLAG:--o}
PL_NPROC_FLAG=${PL_NPROC_FLAG:---nproc-per-node}
PL_IGNORE_ISLANDS_FLAG=${PL_IGNORE_ISLANDS_FLAG:---ignore-islands}
PL_PLAN_FLAGS=(--model "$MODEL" --global-batch-size "$GLOBAL_BATCH" --seq-length "$SEQ_LENGTH")
PL_EXTRA_PROBE_FLAGS=${PL_EXTRA_PROBE_FLAGS:-}
PL_EXTRA_RUN_FLAGS=${PL_EXTRA_RUN_FLAGS:-}

# ---- helpers ---------------------------------------------------------------
say() { printf '\n== %s\n' "$*"; }
die() { printf 'crosscluster: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "run as root: the test-bed makes network namespaces and starts sshd"
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "go not found (install Go or put /usr/local/go/bin on PATH)"
"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
	die "$PYTHON cannot import torch.distributed with gloo: apt-get install python3-torch"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SCRIPT=$REPO/examples/replay_plan.py
# Outside /tmp: every test-bed host mounts a private /tmp, and rank 0 (on
# some test-bed host) writes its result file here.
WORK=$(mktemp -d /var/tmp/pipette-crosscluster.XXXXXX)
TB_UP=0
cleanup() {
	local rc=$?
	if [[ $TB_UP == 1 ]]; then
		"$WORK/bin/pipette-testbed" down "$TB_NAME_FLAG" "$TB_NAME" || echo "crosscluster: pipette-testbed down failed; run it by hand" >&2
	fi
	echo "crosscluster: files kept in $WORK" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. build --------------------------------------------------------------
say "build pipette-launch and pipette-testbed into $WORK/bin"
(cd "$REPO" && go build -o "$WORK/bin/pipette-launch" ./cmd/pipette-launch &&
	go build -o "$WORK/bin/pipette-testbed" ./cmd/pipette-testbed)
PL=$WORK/bin/pipette-launch
TB=$WORK/bin/pipette-testbed

# ---- 2. test-bed -----------------------------------------------------------
say "test-bed $TB_NAME: hosts ${HOST_ORDER[*]} (A=InfiniBand, B=Ethernet), $INTER_RATE between islands"
up_args=(up "$TB_NAME_FLAG" "$TB_NAME" "$TB_SHAPE_FLAG" "$INTER_RATE")
for h in "${HOST_ORDER[@]}"; do
	spec=$h:${HOST_ISLAND[$h]}
	[[ -n ${HOST_RDMA[$h]} ]] && spec+=:${HOST_RDMA[$h]}
	up_args+=("$TB_HOST_FLAG" "$spec")
done
TB_UP=1 # down is harmless if up failed before making anything
"$TB" "${up_args[@]}"

# Find the instance's files from its state record rather than from up's
# printed text: testbed/state.go keeps one directory per instance.
TB_DIR=$("$PYTHON" - "$TB_STATE_ROOT" "$TB_NAME" <<'EOF'
import json, os, sys
root, name = sys.argv[1], sys.argv[2]
found = []
for d in sorted(os.listdir(root)):
    p = os.path.join(root, d, "state.json")
    try:
        st = json.load(open(p))
    except (OSError, ValueError):
        continue
    if st.get("name") == name and st.get("ready"):
        found.append(os.path.join(root, d))
if len(found) != 1:
    sys.exit("crosscluster: want exactly one ready test-bed named %r under %s, found %d" % (name, root, len(found)))
print(found[0])
EOF
)
SSH_CONFIG=$TB_DIR/ssh_config
HOSTFILE=$WORK/hostfile
printf '%s\n' "${HOST_ORDER[@]}" >"$HOSTFILE" # the order is the point: not the test-bed's own list
read -r -a PL_SSH_FLAGS <<<"${PL_SSH_FLAGS_TMPL//\{ssh_config\}/$SSH_CONFIG}"
echo "test-bed state: $TB_DIR; hostfile order: $(tr '\n' ' ' <"$HOSTFILE")"

# ---- 3. probe --measure ----------------------------------------------------
say "probe --measure"
CLUSTER=$WORK/cluster.yaml
# shellcheck disable=SC2086 # extra flags are meant to split
"$PL" probe "$PL_HOSTFILE_FLAG" "$HOSTFILE" "${PL_SSH_FLAGS[@]}" "$PL_NPROC_FLAG" "$NPROC" \
	"$PL_MEASURE_FLAG" $PL_EXTRA_PROBE_FLAGS "$PL_OUT_FLAG" "$CLUSTER"
echo "--- $CLUSTER"
cat "$CLUSTER"

# ---- 4. plan ---------------------------------------------------------------
say "plan (with islands, and ignoring them for comparison)"
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
	say "run: $name"
	# shellcheck disable=SC2086 # REPLAY_ARGS and extra flags are meant to split
	"$PL" run --cluster "$CLUSTER" "${PL_SSH_FLAGS[@]}" --framework torch --python "$PYTHON" \
		"$PL_NPROC_FLAG" "$NPROC" "${PL_PLAN_FLAGS[@]}" "$@" $PL_EXTRA_RUN_FLAGS \
		"$SCRIPT" $REPLAY_ARGS --steps "$STEPS" --warmup "$WARMUP" --json-out "$WORK/$name.json" \
		2>&1 | tee "$WORK/$name.log"
	[[ -s $WORK/$name.json ]] || die "$name: rank 0 wrote no $WORK/$name.json (see $WORK/$name.log)"
}
run_replay planned
run_replay naive "$PL_IGNORE_ISLANDS_FLAG"

# ---- 6. report -------------------------------------------------------------
say "result"
islands=""
for h in "${HOST_ORDER[@]}"; do islands+="${islands:+,}$h=${HOST_ISLAND[$h]}"; done
"$PYTHON" "$HERE/report.py" --islands "$islands" --min-ratio "$MIN_RATIO" --placement "$WORK/plan.placement" \
	"planned=$WORK/planned.log:$WORK/planned.json" "naive=$WORK/naive.log:$WORK/naive.json"
