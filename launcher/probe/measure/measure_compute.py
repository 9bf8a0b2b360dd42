# One worker of `pipette-launch probe --measure`'s compute sweep (embedded in
# the Go binary, run as `python3 -c SCRIPT CONFIG_JSON WORKER`). Every worker
# of a host runs at once, one per GPU (or CPU process slot), as training
# would: each times torch.matmul at the given shapes and precisions until its
# time budget is spent, then all of them time an all-reduce among themselves
# (NCCL on CUDA, gloo on CPU; a FileStore, so no port is needed). Prints one
# line "::pipette-compute:: {json}". Usage: CONFIG_JSON WORKER STORE_FILE.
import json
import os
import sys
import time


def timed(fn, sync, min_s):
    """Median seconds of one call: a warm-up, then 3 trials of r calls with
    r chosen so that a trial lasts about min_s."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = int(max(1, min(200, min_s / one)))
    trials = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        trials.append((time.perf_counter() - t0) / reps)
    trials.sort()
    return trials[1]


def main():
    cfg = json.loads(sys.argv[1])
    worker = int(sys.argv[2])
    import torch
    cuda = bool(cfg.get("cuda")) and torch.cuda.is_available() and torch.cuda.device_count() > 0
    if cuda:
        dev = torch.device("cuda", worker % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        sync = torch.cuda.synchronize
        name = "cuda: " + torch.cuda.get_device_name(dev)
        min_s = 0.02
    else:
        dev = torch.device("cpu")
        torch.set_num_threads(max(1, int(cfg.get("threads") or 1)))
        sync = lambda: None
        name = "cpu"
        min_s = 0.05
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    out = {"worker": worker, "device": name, "torch": torch.__version__, "threads": torch.get_num_threads(),
           "gemm": []}
    budget = float(cfg.get("budget_s") or 3)
    deadline = time.perf_counter() + budget
    rate = 0.0  # last measured flop/s
    for prec in cfg["precisions"]:
        for m, n, k in cfg["shapes"]:
            left = deadline - time.perf_counter()
            # Shapes come smallest first: stop before one that would not fit.
            # A shape costs about 5 calls (warm-up, one, 3 trials of at least
            # one) or 4 trials of min_s, whichever is longer.
            if left <= 0 or (rate > 0 and max(5 * 2.0 * m * n * k / rate, 4 * min_s) > left):
                break
            a = torch.randn(m, k, device=dev).to(dtypes[prec])
            b = torch.randn(k, n, device=dev).to(dtypes[prec])
            s = timed(lambda: torch.matmul(a, b), sync, min_s)
            rate = 2.0 * m * n * k / s
            out["gemm"].append({"precision": prec, "m": m, "n": n, "k": k, "tflops": rate / 1e12})
            del a, b
    workers = int(cfg.get("workers") or 1)
    nbytes = int(cfg.get("allreduce_bytes") or 0)
    if workers > 1 and nbytes > 0:
        import datetime
        import torch.distributed as dist
        dist.init_process_group("nccl" if cuda else "gloo", init_method="file://" + sys.argv[3], rank=worker,
                                world_size=workers, timeout=datetime.timedelta(seconds=60))
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=dev)
        # A fixed count: every rank must make the same calls.
        for _ in range(2):
            dist.all_reduce(t)
        sync()
        dist.barrier()
        iters = 5
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        sync()
        s = (time.perf_counter() - t0) / iters
        out["allreduce_bytes"] = t.numel() * 4
        out["allreduce_bus_gbyte_per_s"] = 2.0 * (workers - 1) / workers * t.numel() * 4 / s / 1e9
        dist.barrier()
        dist.destroy_process_group()
    print("::pipette-compute:: " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
