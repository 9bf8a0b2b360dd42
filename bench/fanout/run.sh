#!/bin/sh
# Fan-out benchmark: a trivial command on N test-bed hosts with pipette-launch
# (SSH pool, and full Launch) against pdsh -R ssh. Needs root, sshd, pdsh.
# Usage: bench/fanout/run.sh [HOSTS] [REPS]
set -eu
cd "$(dirname "$0")/../.."
exec go run ./bench/fanout -hosts "${1:-16}" -n "${2:-10}"
