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
		--state-root "$TB_STATE_ROOT"
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
