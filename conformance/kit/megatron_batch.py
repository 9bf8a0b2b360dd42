"""Megatron-LM's own checks on many ranks in one process, inside the Megatron kit's root file system.

make conformance copies this file beside the kit's inner.py (/opt/pipette-megatron in the root) and runs it
under chroot. Input (stdin): one JSON request per line, inner.py's format plus "id". Output: one JSON result
per line (inner.py's, plus "id"). Importing torch and Megatron takes ~5 s; it is paid once here, and each
request runs the kit's unchanged inner.py in a forked child, so that no request sees another's environment
or parsed arguments.
"""
import contextlib
import io
import json
import os
import runpy
import sys
import warnings

KIT = os.path.dirname(os.path.abspath(__file__))
reqs = [json.loads(line) for line in sys.stdin if line.strip()]
if not reqs:
    sys.exit(0)
sys.path.insert(0, reqs[0]["megatron"])
sys.path.insert(0, KIT)

import stubs  # noqa: E402  (the kit's triton placeholder, as inner.py installs it)

stubs.install(("triton",))
import torch  # noqa: E402,F401

warnings.simplefilter("ignore")
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    from megatron.training import arguments  # noqa: F401
    try:
        from megatron.training import training  # noqa: F401
    except BaseException:  # inner.py reports it per request
        pass

for req in reqs:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        sys.stdin = io.StringIO(json.dumps(req))
        sys.stdout = os.fdopen(w, "w")
        try:
            runpy.run_path(os.path.join(KIT, "inner.py"), run_name="__main__")
        except SystemExit:
            pass
        sys.stdout.flush()
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    results = [line for line in out.splitlines() if line.startswith("{")]
    res = json.loads(results[-1]) if results else {"ok": False, "stage": "driver", "error": "no result: " + out[-500:]}
    res["id"] = req.get("id")
    print(json.dumps(res, default=str), flush=True)
