#!/usr/bin/env bash
# Sets up the DeepSpeed and Megatron kits of $PIPETTE_FRAMEWORKS for make conformance, overlapping them:
# the Megatron kit (debootstrap, ~2.5 min) starts once the DeepSpeed kit is past its apt-get step (both
# would take the dpkg lock), and builds while DeepSpeed compiles its ops (~3 min). A second run only checks.
set -euo pipefail
fw=${PIPETTE_FRAMEWORKS:?set PIPETTE_FRAMEWORKS to the folder holding deepspeed/ and megatron/}
logs=${1:-.}
"$fw/deepspeed/setup.sh" > "$logs/conformance-deepspeed-setup.log" 2>&1 &
dpid=$!
while kill -0 "$dpid" 2>/dev/null && ! grep -q 'extracted' "$logs/conformance-deepspeed-setup.log"; do
  sleep 2
done
"$fw/megatron/setup.sh" > "$logs/conformance-megatron-setup.log" 2>&1 &
mpid=$!
rc=0
wait "$dpid" || { echo "conformance: DeepSpeed kit set-up failed:" >&2; tail -20 "$logs/conformance-deepspeed-setup.log" >&2; rc=1; }
# A debootstrap can fail beside the DeepSpeed build (once: "Failure while unpacking required packages", then
# its partial tree still being written as the script removed it); the DeepSpeed set-up is over by now, so the
# Megatron one is tried once more, alone, and the first attempt's log kept.
if ! wait "$mpid"; then
  mv "$logs/conformance-megatron-setup.log" "$logs/conformance-megatron-setup.first.log"
  echo "conformance: Megatron kit set-up failed; trying it once more, alone (first attempt: $logs/conformance-megatron-setup.first.log):" >&2
  tail -5 "$logs/conformance-megatron-setup.first.log" >&2
  "$fw/megatron/setup.sh" > "$logs/conformance-megatron-setup.log" 2>&1 ||
    { echo "conformance: Megatron kit set-up failed again:" >&2; tail -20 "$logs/conformance-megatron-setup.log" >&2; rc=1; }
fi
exit $rc
