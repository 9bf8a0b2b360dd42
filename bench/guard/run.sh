#!/bin/sh
# Speed guard (issue 23): `pipette-launch plan` built from this tree against
# the same command built from a pinned reference commit (bench/guard/pin),
# side by side on the same machine in the same run, and the same for
# BenchmarkPlan1024GPUs. Each side runs GUARD_RUNS times, alternating, and
# its minimum CPU time (user + system) counts; the guard fails when this
# tree's minimum is more than GUARD_MAX_RATIO times the reference's on any
# case. It prints every ratio and the wall-time minima.
#
# A benchmark, not a timed test: it compares two builds on one machine, so a
# slow or busy machine slows both. Move the pin deliberately, in a commit of
# its own, when a speed-up lands (bench/guard/README.md).
#
# Usage: bench/guard/run.sh
# Environment: GUARD_PIN (commit; default: the pin file), GUARD_HEAD (a
#   commit to time instead of the work tree, to show the guard on an older
#   commit), GUARD_HOSTS (three-islands sizes, default "128 512 2048"),
#   GUARD_RUNS (default 5), GUARD_MAX_RATIO (default 1.5).
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)
GO=${GO:-go}
pin=${GUARD_PIN:-$(tr -d ' \n' < bench/guard/pin)}
hosts=${GUARD_HOSTS:-"128 512 2048"}
runs=${GUARD_RUNS:-5}
limit=${GUARD_MAX_RATIO:-1.5}
[ -x /usr/bin/time ] || { echo "speed guard: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
git cat-file -e "$pin^{commit}" 2>/dev/null || {
	echo "speed guard: pinned commit $pin is not in this clone (a shallow clone? git fetch --unshallow)" >&2
	exit 2
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# tree NAME COMMIT: a copy of COMMIT's files under $dir/NAME.
tree() {
	mkdir -p "$dir/$1"
	git archive "$2" | tar -x -C "$dir/$1"
}
# bench_pkg DIR: the package that holds BenchmarkPlan1024GPUs in that tree
# (it moves with the planner's layout).
bench_pkg() {
	f=$(cd "$1" && grep -rl --include='*_test.go' '^func BenchmarkPlan1024GPUs(' . | head -n 1)
	[ -n "$f" ] || { echo "speed guard: no BenchmarkPlan1024GPUs in $1" >&2; exit 2; }
	dirname "$f"
}

echo "speed guard: reference $(git rev-parse --short "$pin") vs ${GUARD_HEAD:-this tree}; min of $runs runs, fail above ${limit}x"
tree ref "$pin"
if [ -n "${GUARD_HEAD:-}" ]; then
	tree head "$GUARD_HEAD"
	headdir=$dir/head
else
	headdir=$root
fi
for side in ref head; do
	src=$dir/ref
	[ "$side" = head ] && src=$headdir
	pkg=$(bench_pkg "$src")
	echo "$src/$pkg" > "$dir/$side.pkgdir"
	(cd "$src" && $GO build -o "$dir/$side.bin" ./cmd/pipette-launch &&
		$GO test -c -o "$dir/$side.test" "./$pkg") || {
		echo "speed guard: building $side failed" >&2
		exit 2
	}
done
for h in $hosts; do
	$GO run ./bench/scale -out "$dir" -kind three-islands -hosts "$h" > /dev/null
done

# timed SIDE CASE CMD...: one run's CPU seconds (user + system, the
# process and its children) and wall seconds appended to $dir/SIDE-CASE.
timed() {
	t_side=$1 t_case=$2
	shift 2
	/usr/bin/time -f '%U %S %e' -o "$dir/t" "$@" > /dev/null 2> "$dir/err" || {
		echo "speed guard: $t_side $t_case failed:" >&2
		cat "$dir/err" >&2
		exit 2
	}
	awk '{ printf "%.2f %.2f\n", $1 + $2, $3 }' "$dir/t" >> "$dir/$t_side-$t_case"
}
cases=""
for h in $hosts; do
	c=plan-three-islands-$h
	cases="$cases $c"
	for i in $(seq "$runs"); do
		for side in ref head; do
			timed "$side" "$c" "$dir/$side.bin" plan --cluster "$dir/three-islands-$h.yaml" --model llama2-70b \
				--top 1 --global-batch-size 2048 --json
		done
	done
done
cases="$cases BenchmarkPlan1024GPUs"
for i in $(seq "$runs"); do
	for side in ref head; do
		# -benchtime 1x: one search per run (about a second), timed as a
		# process like the CLI, in its own package directory.
		timed "$side" BenchmarkPlan1024GPUs sh -c 'cd "$1" && exec "$2" -test.run "^\$" -test.bench "^BenchmarkPlan1024GPUs\$" -test.benchtime 1x' \
			sh "$(cat "$dir/$side.pkgdir")" "$dir/$side.test"
	done
done

fail=0
# The CPU time decides: on a busy machine (CI has 2 cores) it moves far
# less than the wall time, which is printed beside it.
printf '%-28s %12s %12s %7s   %s\n' case "ref cpu s" "head cpu s" ratio "(wall s min: ref, head)"
for c in $cases; do
	r=$(sort -n "$dir/ref-$c" | head -n 1 | cut -d' ' -f1)
	n=$(sort -n "$dir/head-$c" | head -n 1 | cut -d' ' -f1)
	rw=$(sort -n -k2 "$dir/ref-$c" | head -n 1 | cut -d' ' -f2)
	nw=$(sort -n -k2 "$dir/head-$c" | head -n 1 | cut -d' ' -f2)
	verdict=$(awk -v r="$r" -v n="$n" -v l="$limit" 'BEGIN { x = n / (r > 0.01 ? r : 0.01); printf "%.2f %s", x, (x > l ? "SLOWER" : "ok") }')
	printf '%-28s %12s %12s %7s   (%s, %s)\n' "$c" "$r" "$n" "$verdict" "$rw" "$nw"
	case $verdict in *SLOWER) fail=1 ;; esac
done
if [ "$fail" = 1 ]; then
	echo "speed guard: FAIL: this tree is more than ${limit}x slower than $(git rev-parse --short "$pin") on a case above" >&2
	exit 1
fi
echo "speed guard: ok"
