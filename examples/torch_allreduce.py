#!/usr/bin/env python3
"""A real torch.distributed (gloo, CPU) job for pipette-launch tests and demos.

Every rank prints what the launcher gave it (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, its
hostname), joins the process group, and all-reduces (rank + 1): the sum must
be WORLD_SIZE*(WORLD_SIZE+1)/2, else it exits 1.

  --fail-rank R --exit-code C   rank R exits with code C after the all_reduce
  --fail-restarts K             ... only while TORCHELASTIC_RESTART_COUNT < K
                                (so --max-restarts K recovers)
  --sleep S                     every rank sleeps S seconds before finishing
                                (a long run to interrupt)
  --hang-in-barrier             the other ranks wait in dist.barrier(), which
                                rank R never joins: blocked in a collective,
                                as NCCL jobs are when a peer dies (R fails
                                one second later, once they are waiting;
                                they exit 1 as soon as the barrier fails)
  --linger S                    the failing rank leaves a child that ignores
                                SIGTERM holding its output open for S
                                seconds (as helpers a rank spawned do), so
                                its exit is reported late, after the ranks
                                that failed because of it
  --expect-world N              exit 1 unless WORLD_SIZE == N
"""
import argparse
import os
import socket
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--exit-code", type=int, default=3)
    p.add_argument("--fail-restarts", type=int, default=-1)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--expect-world", type=int, default=0)
    p.add_argument("--hang-in-barrier", action="store_true")
    p.add_argument("--linger", type=float, default=0.0)
    p.add_argument("--timeout", type=float, default=120.0)
    a = p.parse_args()

    env = {k: os.environ.get(k, "") for k in (
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")}
    print("ENV " + " ".join(f"{k}={v}" for k, v in env.items())
          + f" HOST={socket.gethostname()}", flush=True)
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    if a.expect_world and world != a.expect_world:
        print(f"WORLD_SIZE {world} != expected {a.expect_world}", file=sys.stderr, flush=True)
        return 1

    import datetime
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    want = world * (world + 1) / 2
    got = t.item()
    if got != want:
        print(f"ALLREDUCE MISMATCH rank={rank} got={got} want={want}", file=sys.stderr, flush=True)
        return 1
    print(f"ALLREDUCE OK rank={rank} sum={got:g}", flush=True)

    restart = int(env["TORCHELASTIC_RESTART_COUNT"] or 0)
    if rank == a.fail_rank and (a.fail_restarts < 0 or restart < a.fail_restarts):
        if a.hang_in_barrier:
            time.sleep(1)
        if a.linger > 0:
            import subprocess
            # It ignores SIGTERM, as a helper busy flushing might: only
            # the KILL after the stop grace ends it.
            subprocess.Popen(["/bin/sh", "-c", f"trap '' TERM; exec sleep {a.linger:g}"])
        print(f"rank {rank}: failing on purpose with exit code {a.exit_code}", file=sys.stderr, flush=True)
        os._exit(a.exit_code)
    if a.hang_in_barrier:
        print(f"rank {rank}: waiting in barrier", flush=True)
        try:
            dist.barrier()
        except RuntimeError as e:
            # Exit at once, as NCCL's async error handling aborts a rank
            # whose peer died (an interpreter exit can hang on gloo).
            print(f"rank {rank}: barrier failed: {e}", file=sys.stderr, flush=True)
            os._exit(1)
    if a.sleep > 0:
        print(f"rank {rank}: sleeping {a.sleep:g}s", flush=True)
        time.sleep(a.sleep)
    dist.destroy_process_group()
    print(f"DONE rank={rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
