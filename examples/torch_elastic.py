#!/usr/bin/env python3
"""A real torch.distributed (gloo, CPU) training loop that checkpoints and
resumes, for pipette-launch's elastic tests and demos.

Every step all-reduces a small "gradient" and updates a weight; rank 0
saves {step, weight} to CKPT_DIR/ckpt.pt every --save-every steps
(written to a temporary file, then renamed, so a cut mid-save leaves the
last one whole) and every rank resumes from it when it exists: the way a
Megatron-LM or DeepSpeed job resumes through --load, with the directory
on storage every host shares.

  --ckpt-dir DIR      where the checkpoint lives (shared by every host)
  --steps N           train until step N (default 20)
  --save-every K      rank 0 saves every K steps (default 2)
  --step-time S       seconds each step takes (default 0.5)
  --bug-at-step K     every rank raises ValueError at step K: a script bug,
                      the same on every attempt
  --hang-at-step K    every rank stops at step K and waits forever, printing
                      nothing more: a hang (pipette-launch's --progress-timeout)
  --hang-restarts N   hang only in the first N attempts (TORCHELASTIC_RESTART_COUNT
                      below N; default: every attempt), as a transient hang does
  --timeout S         gloo's collective timeout (default 120)
"""
import argparse
import datetime
import os
import socket
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--save-every", type=int, default=2)
    p.add_argument("--step-time", type=float, default=0.5)
    p.add_argument("--bug-at-step", type=int, default=-1)
    p.add_argument("--hang-at-step", type=int, default=-1)
    p.add_argument("--hang-restarts", type=int, default=-1)
    p.add_argument("--timeout", type=float, default=120.0)
    a = p.parse_args()

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    path = os.path.join(a.ckpt_dir, "ckpt.pt")
    step, w = 0, torch.zeros(1)
    if os.path.exists(path):
        ck = torch.load(path)
        step, w = ck["step"], ck["w"]
        print(f"RESUMED from step {step} world {world} restart {restart} host {socket.gethostname()}", flush=True)
    else:
        print(f"STARTED at step 0 world {world} restart {restart} host {socket.gethostname()}", flush=True)
    while step < a.steps:
        if step == a.bug_at_step:
            raise ValueError(f"bad batch at step {step}")
        if step == a.hang_at_step and (a.hang_restarts < 0 or int(restart) < a.hang_restarts):
            print(f"HANGING at step {step}", flush=True)
            while True:
                time.sleep(3600)
        g = torch.ones(1)
        dist.all_reduce(g)
        w += g / world  # the same update on any world size
        step += 1
        time.sleep(a.step_time)
        print(f"iteration {step}/{a.steps} world {world}", flush=True)
        if rank == 0 and step % a.save_every == 0:
            tmp = path + ".tmp"
            torch.save({"step": step, "w": w}, tmp)
            os.replace(tmp, path)
            print(f"SAVED step {step}", flush=True)
    dist.barrier()
    print(f"DONE step {step} w {w.item():g} world {world}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
