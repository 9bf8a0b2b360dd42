"""Megatron-LM's own checks on many ranks in one process, inside the Megatron kit's root file system.

make conformance copies this file beside the kit's inner.py (/opt/pipette-megatron in the root) and runs it
under chroot. Input (stdin): one JSON request per line, inner.py's format plus "id". Output: one JSON result
per line (inner.py's, plus "id"). Importing torch and Megatron takes ~5 s; it is paid once here, and each
request runs the kit's unchanged inner.py in a forked child, so that no request sees another's environment
or parsed arguments.

A request with "parallel_state": true goes one start-up step further when inner.py says OK: Megatron's own
parallel_state.initialize_model_parallel, called with the arguments initialize_megatron's
_initialize_distributed gives it (megatron/training/initialize.py), on torch's fake process group (what
Megatron's own --fake-process-group uses), for the rank's world size. It builds every process group
(TP, PP, CP, DP, EP, expert-TP/DP) and raises where the world size does not divide them, e.g. "world_size
(8) is not divisible by expert_tensor_model_pipeline_parallel size (32)": validate_args does not check the
expert grid, so such a line passes inner.py and dies at start-up on every rank. Stage "parallel_state".
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



def parallel_state(req):
    """Megatron's initialize_model_parallel for the request's rank (inner.py has set its environment and
    found its arguments valid). Returns None, or the error as Megatron raises it."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from megatron.core import parallel_state as mpu

    log = io.StringIO()
    sys.argv = [req.get("script") or "pretrain_gpt.py"] + [str(a) for a in req["argv"]]
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        args = arguments.parse_args(None)
        arguments.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            dist.init_process_group("fake", store=FakeStore(), rank=args.rank, world_size=args.world_size)
            # The keyword arguments of initialize.py's _initialize_distributed, from the same args.
            mpu.initialize_model_parallel(
                args.tensor_model_parallel_size,
                args.pipeline_model_parallel_size,
                args.virtual_pipeline_model_parallel_size,
                pipeline_model_parallel_comm_backend=args.pipeline_model_parallel_comm_backend,
                use_sharp=args.use_sharp,
                gtp_remat_size=args.gtp_weight_remat_size,
                expert_gtp_remat_size=args.expert_gtp_weight_remat_size,
                context_parallel_size=args.context_parallel_size,
                hierarchical_context_parallel_sizes=args.hierarchical_context_parallel_sizes,
                hybrid_context_parallel=args.hybrid_context_parallel,
                expert_model_parallel_size=args.expert_model_parallel_size,
                num_distributed_optimizer_instances=args.num_distributed_optimizer_instances,
                expert_tensor_parallel_size=args.expert_tensor_parallel_size,
                distributed_timeout_minutes=args.distributed_timeout_minutes,
                nccl_communicator_config_path=args.nccl_communicator_config_path,
                order='tp-cp-ep-dp-pp' if not args.use_tp_pp_dp_mapping else 'tp-cp-ep-pp-dp',
                # Gloo groups need a real store; the fake one only answers NCCL-style groups.
                create_gloo_process_groups=False,
                high_priority_stream_groups=args.high_priority_stream_groups,
                sharp_enabled_group=args.sharp_enabled_group,
            )
    except BaseException as e:  # RuntimeError, AssertionError, ... exactly as Megatron raises it
        return f"{type(e).__name__}: {e}"
    return None


for req in reqs:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        sys.stdin = io.StringIO(json.dumps(req))
        inner_out = io.StringIO()
        sys.stdout = inner_out
        try:
            runpy.run_path(os.path.join(KIT, "inner.py"), run_name="__main__")
        except SystemExit:
            pass
        out = inner_out.getvalue()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if lines and req.get("parallel_state"):
            res = json.loads(lines[-1])
            if res.get("ok"):
                try:
                    err = parallel_state(req)
                except BaseException as e:
                    err = f"driver: {type(e).__name__}: {e}"
                if err:
                    res.update(ok=False, stage="parallel_state", error=err)
                else:
                    res["stage"] = res.get("stage", "") + "+parallel_state"
                out += "\n" + json.dumps(res, default=str)
        with os.fdopen(w, "w") as f:
            f.write(out)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    results = [line for line in out.splitlines() if line.startswith("{")]
    res = json.loads(results[-1]) if results else {"ok": False, "stage": "driver", "error": "no result: " + out[-500:]}
    res["id"] = req.get("id")
    print(json.dumps(res, default=str), flush=True)
