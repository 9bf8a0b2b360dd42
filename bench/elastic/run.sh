#!/bin/sh
# Elastic recovery timeline on the test-bed (issue 30), as root: 4 hosts x 2
# ranks run examples/torch_elastic.py (gloo, checkpointing to a directory
# every host shares) under `--nnodes 2:4 --max-restarts 2 --heartbeat-timeout
# 3s --stop-grace 3s`; node2's network is cut once step 4 is saved. Prints
# the test's TIMELINE line: cut -> loss declared -> attempt 2 re-planned,
# probed and started -> its first rank up -> its first step, and the cut to
# the first step without the job's own start-up (python, torch and gloo
# coming up on the hosts). The test also checks the job resumed from its
# checkpoint on 3 hosts, finished, and left nothing on any host.
# Usage: sudo bench/elastic/run.sh [RUNS]
set -eu
cd "$(dirname "$0")/../.."
runs=${1:-1}
i=0
while [ "$i" -lt "$runs" ]; do
	go test ./cmd/internal/run -run 'TestElasticOnTestbed/lost_host' -count=1 -v -timeout 15m |
		grep -E 'TIMELINE|^(--- |ok|FAIL)'
	i=$((i + 1))
done
