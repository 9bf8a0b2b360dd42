# shellcheck shell=bash
# Shared by run.sh and handplaced.sh (sourced): checks, the test-bed's
# instance directory and addresses, and the report. Callers set PYTHON, WORK,
# TB_STATE_ROOT, TB_NAME, HOST_ORDER and HOST_ISLAND.

cc_say() { printf '\n== %s\n' "$*"; }
cc_die() {
	printf '%s: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

# cc_require: root (namespaces, sshd), Go, and Debian's torch with gloo.
cc_require() {
	[[ $(id -u) == 0 ]] || cc_die "run as root: the test-bed makes network namespaces and starts sshd"
	command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
	command -v go >/dev/null || cc_die "go not found (install Go or put /usr/local/go/bin on PATH)"
	"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
		cc_die "$PYTHON cannot import torch.distributed with gloo: apt-get install python3-torch"
}

# cc_tb_up: brings the test-bed up; TB_UP=1 only once it is ours, so the
# EXIT trap never removes a same-named instance that was there before (a
# failed up removes what it made itself).
cc_tb_up() {
	cc_say "test-bed $TB_NAME: groups $TB_GROUPS, $INTER_RATE between groups"
	"$TB" up --name "$TB_NAME" --groups "$TB_GROUPS" --shape "$INTER_RATE" --prefix "$TB_PREFIX" \
		--state-root "$TB_STATE_ROOT" ${TB_HOST_SHAPE:+--host-shape "$TB_HOST_SHAPE"}
	TB_UP=1
	# The instance's files, from its state record (testbed/state.go keeps
	# one directory per instance) rather than from up's printed text.
	TB_DIR=$("$PYTHON" - "$TB_STATE_ROOT" "$TB_NAME" <<'EOF'
import json, os, sys
root, name = sys.argv[1], sys.argv[2]
found = []
for d in sorted(os.listdir(root)):
    try:
        st = json.load(open(os.path.join(root, d, "state.json")))
    except (OSError, ValueError):
        continue
    if st.get("name") == name and st.get("ready"):
        found.append(os.path.join(root, d))
if len(found) != 1:
    sys.exit("want exactly one ready test-bed named %r under %s, found %d" % (name, root, len(found)))
print(found[0])
EOF
	)
}

# cc_tb_down: the EXIT trap's half; keeps the caller's exit status.
cc_tb_down() {
	if [[ ${TB_UP:-0} == 1 ]]; then
		"$TB" down --name "$TB_NAME" --state-root "$TB_STATE_ROOT" ||
			echo "$(basename "$0"): pipette-testbed down failed; run it by hand" >&2
	fi
	echo "$(basename "$0"): files kept in $WORK" >&2
}

# cc_stop: the EXIT trap of scripts that start ranks over ssh: ends the
# ssh clients in PIDS, then the test-bed (which also ends every process
# left in the hosts' namespaces); keeps the exit status.
cc_stop() {
	local rc=$? p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	cc_tb_down
	exit "$rc"
}

# cc_tb_addr HOST: the address the other hosts reach HOST on.
cc_tb_addr() {
	"$PYTHON" - "$TB_DIR/state.json" "$1" <<'EOF'
import json, sys
hosts = {h["name"]: h["addr"] for h in json.load(open(sys.argv[1]))["hosts"]}
if sys.argv[2] not in hosts:
    sys.exit("no test-bed host %r (have %s)" % (sys.argv[2], ", ".join(sorted(hosts))))
print(hosts[sys.argv[2]])
EOF
}

# cc_report PLACEMENT_FILE: planned against naive, exit 1 below MIN_RATIO.
cc_report() {
	local islands="" h
	for h in "${HOST_ORDER[@]}"; do islands+="${islands:+,}$h=${HOST_ISLAND[$h]}"; done
	cc_say "result"
	"$PYTHON" "$HERE/report.py" --islands "$islands" --min-ratio "$MIN_RATIO" ${1:+--placement "$1"} \
		"planned=$WORK/planned.log:$WORK/planned.json" "naive=$WORK/naive.log:$WORK/naive.json"
}

# cc_squote WORD: WORD in POSIX single quotes for the remote shell.
cc_squote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# cc_run_placed NAME HOST...: one replay run over plain ssh, NPROC
# consecutive ranks per listed host (rank r on host r/NPROC); rank 0's
# result in $WORK/NAME.json, every rank's output in $WORK/NAME.log. Callers
# set SCRIPT, REPLAY_ARGS, STEPS, WARMUP and append to PIDS.
cc_run_placed() {
	local name=$1
	shift
	local hosts=() h r
	for h in "$@"; do for ((r = 0; r < NPROC; r++)); do hosts+=("$h"); done; done
	local world=${#hosts[@]} master pids=() line a p
	master=$(cc_tb_addr "$1")
	cc_say "$name: ranks on hosts ${hosts[*]}"
	for ((r = 0; r < world; r++)); do
		line="env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % NPROC)) MASTER_ADDR=$master MASTER_PORT=29500"
		line+=" GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 $(cc_squote "$PYTHON") $(cc_squote "$SCRIPT")"
		for a in $REPLAY_ARGS --steps "$STEPS" --warmup "$WARMUP" --timeout-s "${REPLAY_TIMEOUT_S:-300}" --json-out "$WORK/$name.json"; do
			line+=" $(cc_squote "$a")"
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
