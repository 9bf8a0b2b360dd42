#!/bin/sh
# Copies a Sailor checkout (github.com/eth-easl/sailor, tested at cf2c8e3)
# to WORK/home/sailor and makes the four changes README.md lists, so that
# its planner and simulator run on Debian 12: run.sh and all.sh start here.
#
# Usage: bench/sailor/prepare.sh SAILOR_CHECKOUT WORK
# Environment: PYTHON (default /usr/bin/python3).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 SAILOR_CHECKOUT WORK" >&2; exit 2; }
src=$(cd "$1" && pwd)
[ -f "$src/sailor/Planner/simulations/simulator.py" ] || { echo "$src: not a Sailor checkout (no sailor/Planner/simulations/simulator.py)" >&2; exit 2; }
py=${PYTHON:-/usr/bin/python3}
work=$2
home=$work/home            # Sailor reads its files under $SAILOR_PATH/sailor/
S=$home/sailor
mkdir -p "$home"
rm -rf "$S"
cp -a "$src" "$S"
cpp=$S/sailor/Planner/sailor_planner/cpp_src
sim=$S/sailor/Planner/simulations

# 1. The Makefile: Python 3.11's headers, Debian's pybind11 (already on the include path), `uname -m`
#    (Debian's `uname -p` says "unknown"), so the module is built as libplanner.cpython-311-x86_64-linux-gnu.so.
sed -i 's#/usr/include/python3\.10#/usr/include/python3.11#g; s#cpython-310#cpython-311#g; s#\$(python3 -m pybind11 --includes)##; s/uname -p/uname -m/' "$cpp/Makefile"
# 2. Build it once and put it where simulator.py imports it from.
make -C "$cpp" clean >/dev/null
make -C "$cpp" libplanner.so >"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 1; }
cp "$cpp"/libplanner.cpython-311-*.so "$sim/"
# 3. planner.py's three lines that delete and rebuild a cpython-310 module on every run: commented out.
sed -i -E 's/^( +)(os\.system\(f"(rm|cd|cp) \{)/\1# \2/' "$cpp/planner.py"
[ "$(grep -c '# os.system(f"' "$cpp/planner.py")" -eq 3 ] || { echo "planner.py: expected 3 os.system lines to comment out" >&2; exit 1; }
# 4. Stand-ins for the baseline planners this scenario does not run that import torch or einops:
#    each `from sailor.Planner.baselines... import X` in simulator.py becomes try/except ImportError: X = None.
"$py" - "$sim/simulator.py" <<'PYEOF'
import re, sys
p = sys.argv[1]
out = []
for line in open(p).read().split("\n"):
    m = re.match(r"^from (sailor\.Planner\.baselines\.\S+) import (\w+)$", line)
    out.append("try:\n    %s\nexcept ImportError:  # stand-in: this baseline needs torch or einops\n    %s = None" % (line, m.group(2)) if m else line)
open(p, "w").write("\n".join(out))
PYEOF

