#!/bin/sh
# Scale benchmark of the built binary: `plan --model llama2-70b --top 1
# --global-batch-size 2048` on generated clusters, wall time and peak memory
# (/usr/bin/time -v) per size, and the fitted growth exponent (slope of
# log time over log GPUs, least squares over the sizes that finished).
#
# Usage: bench/scale/run.sh [OTHER_BINARY]
#   OTHER_BINARY: a second pipette-launch (say, built from an older commit)
#   timed side by side with this tree's, on the same files in the same run.
# Environment: KINDS (default "homogeneous three-islands"), HOSTS (default
#   "128 512 2048 8192"), TIMEOUT seconds per run (default 300; a run that
#   hits it is reported as "> TIMEOUT"), MEASURED_HOSTS (hosts for the
#   measured-matrix kind, default "128 512": its YAML grows as hosts^2).
set -eu
cd "$(dirname "$0")/../.."
KINDS=${KINDS:-"homogeneous three-islands"}
HOSTS=${HOSTS:-"128 512 2048 8192"}
MEASURED_HOSTS=${MEASURED_HOSTS-"128 512"}
TIMEOUT=${TIMEOUT:-300}
[ -x /usr/bin/time ] || { echo "run.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/new" ./cmd/pipette-launch
bins="new"
if [ $# -ge 1 ]; then
	cp "$1" "$dir/old"
	bins="old new"
fi
results="$dir/results"
: > "$results"
for kind in $KINDS measured-matrix; do
	hosts=$HOSTS
	if [ "$kind" = measured-matrix ]; then
		hosts=$MEASURED_HOSTS
	fi
	for h in $hosts; do
		go run ./bench/scale -out "$dir" -kind "$kind" -hosts "$h" > /dev/null
		f="$dir/$kind-$h.yaml"
		for b in $bins; do
			out="$dir/$b-$kind-$h.out"
			rc=0
			/usr/bin/time -v -o "$out.time" timeout "$TIMEOUT" "$dir/$b" plan --cluster "$f" --model llama2-70b \
				--top 1 --global-batch-size 2048 --json > "$out" 2>&1 || rc=$?
			wall=$(awk -F': ' '/Elapsed \(wall/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$out.time")
			rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2/1024}' "$out.time")
			iter=$(grep -m1 -o '"iteration_seconds": [0-9.e+-]*' "$out" | awk '{printf "%.3f", $2}')
			[ "$rc" = 0 ] || iter="-"
			[ "$rc" = 124 ] && wall="> $TIMEOUT"
			echo "$kind $h $b $rc ${iter:--} $rss $wall" >> "$results"
		done
	done
done
printf '%-16s %6s %7s %-4s %10s %9s %12s\n' kind hosts GPUs bin wall_s peak_MB iter_s
while read -r kind h b rc iter rss wall; do
	printf '%-16s %6s %7s %-4s %10s %9s %12s\n' "$kind" "$h" "$((h * 8))" "$b" "$wall" "$rss" "$iter"
done < "$results"
echo
echo "fitted growth exponent (time ~ GPUs^k, finished runs only):"
awk '$4 == 0 { k = $1 " " $3; n[k]++; x = log($2 * 8); y = log($7); sx[k] += x; sy[k] += y; sxx[k] += x * x; sxy[k] += x * y }
	END { for (k in n) if (n[k] >= 2) printf "  %-22s k = %.2f over %d sizes\n", k, (n[k] * sxy[k] - sx[k] * sy[k]) / (n[k] * sxx[k] - sx[k] * sx[k]), n[k] }' "$results" | sort
