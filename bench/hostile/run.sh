#!/usr/bin/env bash
# Peak memory and time of pipette-launch on the worst inputs of issue 10,
# measured with /usr/bin/time -v. Each must be refused (exit 2) in under
# 1 s with a peak RSS under 100 MB. Usage: bench/hostile/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v /usr/bin/time >/dev/null || { echo "needs GNU time: apt-get install time" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/pipette-launch" ./cmd/pipette-launch
touch "$work/train.py"
printf 'w1 slots=99999999\n' >"$work/hostfile"
cluster() { # $1 file, $2 hosts, $3 gpus_per_host
	printf 'clusters:\n  - name: a\n    hosts: %s\n    gpus_per_host: %s\n    gpu: {model: H100}\n    nics: [{type: infiniband, count: 8, rate_gbit_per_s: 400}]\n' "$2" "$3" >"$1"
}
cluster "$work/c20000.yaml" 'node[1-20000]' 8
cluster "$work/cprod.yaml" 'rack[1-1000]-node[1-1000]' 8
cluster "$work/cgpus.yaml" 'node[1-2]' 99999999999

pl="$work/pipette-launch"
fail=0
printf '%-34s %5s %8s %10s\n' input exit seconds peak_MB
measure() { # name, expected exit, args...
	local name=$1 want=$2
	shift 2
	local code=0
	(cd "$work" && /usr/bin/time -v -o "$work/time.txt" "$pl" "$@" >/dev/null 2>"$work/err.txt") || code=$?
	local kb secs
	kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
	secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt" | awk -F: '{print ($1*60)+$2}')
	printf '%-34s %5s %8s %10.1f\n' "$name" "$code" "$secs" "$(echo "$kb/1024" | bc -l)"
	if [ "$code" != "$want" ] || [ "$kb" -gt 102400 ] || [ "$(echo "$secs >= 1" | bc -l)" = 1 ]; then
		echo "  FAIL: want exit $want, < 100 MB, < 1 s; stderr: $(head -c 300 "$work/err.txt")" >&2
		fail=1
	fi
}
measure "hostfile slots=99999999" 2 run --dry-run --hostfile hostfile train.py
measure "--hosts w[1-100000] x8" 2 run --dry-run --hosts 'w[1-100000]' --nproc-per-node 8 train.py
measure "--nproc-per-node 99999999" 2 run --dry-run --hosts w1 --nproc-per-node 99999999 train.py
measure "--hosts rack[1-1000]-node[1-1000]" 2 run --dry-run --hosts 'rack[1-1000]-node[1-1000]' train.py
measure "cluster node[1-20000]" 2 plan --cluster c20000.yaml --model llama2-7b --global-batch-size 64
measure "cluster rack x node product" 2 plan --cluster cprod.yaml --model llama2-7b --global-batch-size 64
measure "cluster gpus_per_host 99999999999" 2 plan --cluster cgpus.yaml --model llama2-7b --global-batch-size 64
measure "plan --tp 3" 2 plan --model llama2-7b --global-batch-size 64 --tp 3
exit $fail
