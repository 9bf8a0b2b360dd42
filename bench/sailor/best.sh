#!/bin/sh
# The best launchable layouts of OPT-350M on N A100-40 GPUs of one zone
# (Figure 7's rows), by Sailor's own simulator: every TP (1, 2, 4: inside a
# 4-GPU node), PP (1-4, even splits of the 24 decoder layers), micro-batch
# (1-16) with the largest DP whose micro-batch x DP divides the global batch
# of 1,024 (DeepSpeed's rule), scored by score.py. It bounds what any plan
# DeepSpeed or Megatron-LM can launch scores on such a row.
#
# Usage: bench/sailor/best.sh GPUS [TOP]   (e.g. 32, 80, 128; TOP default 5)
# Environment: as ours.sh (SAILOR_WORK, SAILOR_ARCHIVE, PYTHON).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/row.sh"
sailor_defaults
[ $# -ge 1 ] || { echo "usage: $0 GPUS [TOP]" >&2; exit 2; }
n=$1
sailor_tree "$archive" reuse
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for tp in 1 2 4; do
	for pp in 1 2 3 4; do
		st=$(for _ in $(seq "$pp"); do printf 'A100-40:%d ' $((24 / pp)); done)
		for mbs in 1 2 4 8 16; do
			dp=$((n / tp / pp))
			while [ "$dp" -gt 0 ] && [ $((1024 % (dp * mbs))) -ne 0 ]; do dp=$((dp - 1)); done
			[ "$dp" -gt 0 ] || continue
			# shellcheck disable=SC2086 # one argument per stage
			r=$("$py" "$here/score.py" --mbs "$mbs" --dp "$dp" --tp "$tp" $st 2>/dev/null) || continue
			printf 'TP%d PP%d DP%d mb%d %s\n' "$tp" "$pp" "$dp" "$mbs" "$r" >>"$out"
		done
	done
done
grep '"fits": true' "$out" | "$py" -c '
import json, sys
rows = sorted((json.loads(l.split(" ", 4)[4])["iteration_seconds"], " ".join(l.split(" ", 4)[:4])) for l in sys.stdin)
for s, layout in rows[:int(sys.argv[1])]:
    print("%-22s %.3f s" % (layout, s))' "${2:-5}"
