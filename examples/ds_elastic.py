#!/usr/bin/env python3
"""A real DeepSpeed training job that checkpoints and resumes through
DeepSpeed's own engine.save_checkpoint / engine.load_checkpoint, for
pipette-launch's elastic tests (DeepSpeed v0.14.4 on the CPU with gloo:
../shared/frameworks/deepspeed).

A 2-layer MLP on random data; every rank resumes from --ckpt-dir when a
checkpoint is there (the tag DeepSpeed's 'latest' file names, or
'latest_universal' when the config has "checkpoint": {"load_universal":
true}), and every rank calls save_checkpoint every --save-every steps (a
collective in DeepSpeed). With --universal, rank 0 then converts the saved
tag with DeepSpeed's own deepspeed/checkpoint/ds_to_universal.py (the one
way v0.14.4 loads a ZeRO checkpoint at another data-parallel size) and
writes 'latest_universal'.

It prints, on every rank:
  RESUMED from step N world W restart R   (or STARTED at step 0 ...)
  DS_BATCH {"rank", "world_size", "dp_world_size", "loaded_step", "train_batch_size",
            "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_stage"}
  iteration N/M world W                    (one per optimizer step)
  SAVED step N                             (rank 0, after each save)
  DONE step N world W
"""
import argparse
import json
import os
import sys
import time

import torch
import deepspeed
from deepspeed.accelerator import get_accelerator


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def to_universal(ckpt_dir, tag):
    """DeepSpeed's ds_to_universal.py on one saved tag, as its own command line runs it."""
    from types import SimpleNamespace
    from deepspeed.checkpoint import ds_to_universal
    out = os.path.join(ckpt_dir, tag + "_universal")
    args = SimpleNamespace(input_folder=os.path.join(ckpt_dir, tag), output_folder=out, num_extract_workers=1,
                           num_merge_workers=1, keep_temp_folder=False, strict=True)
    ds_to_universal.args = args  # its helpers read the module's args, as under __main__
    ds_to_universal.main(args)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--local_rank", "--local-rank", type=int, default=-1)
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--save-every", type=int, default=2)
    p.add_argument("--step-time", type=float, default=0.0)
    p.add_argument("--universal", action="store_true",
                   help="convert each save to a universal checkpoint (DeepSpeed's ds_to_universal)")
    p = deepspeed.add_config_arguments(p)
    a = p.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    # torch 1.13's gloo lacks _allgather_base: DeepSpeed's own fallback (see the kit's example_train.py).
    from deepspeed.comm import comm as ds_comm
    ds_comm.cdb.all_gather_function = None
    ds_comm.cdb.reduce_scatter_function = None

    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    engine, _, _, _ = deepspeed.initialize(args=a, model=model, model_parameters=model.parameters())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")

    universal = bool(engine._config.load_universal_checkpoint)
    latest = os.path.join(a.ckpt_dir, "latest_universal" if universal else "latest")
    loaded = 0
    if os.path.isfile(latest):
        path, _ = engine.load_checkpoint(a.ckpt_dir)
        if path is None:
            raise RuntimeError(f"DeepSpeed loaded no checkpoint from {a.ckpt_dir}")
        loaded = engine.global_steps
        say(f"RESUMED from step {loaded} world {world} restart {restart}")
    else:
        say(f"STARTED at step 0 world {world} restart {restart}")
    micro, gas = engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps()
    say("DS_BATCH " + json.dumps({
        "rank": rank, "world_size": world, "dp_world_size": engine.dp_world_size, "loaded_step": loaded,
        "train_batch_size": engine.train_batch_size(), "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gas, "zero_stage": engine.zero_optimization_stage(),
        "load_universal": universal}, sort_keys=True))

    gen = torch.Generator().manual_seed(42 + rank)
    w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
    while engine.global_steps < a.steps:
        for _ in range(gas):
            x = torch.randn(micro, 16, generator=gen)
            loss = torch.nn.functional.mse_loss(engine(x), x @ w_true)
            engine.backward(loss)
            engine.step()
        step = engine.global_steps
        time.sleep(a.step_time)
        say(f"iteration {step}/{a.steps} world {world}")
        if step % a.save_every == 0:
            tag = f"global_step{step}"
            # The client state ds_to_universal requires (Megatron-DeepSpeed saves it too).
            engine.save_checkpoint(a.ckpt_dir, tag=tag, client_state={"universal_checkpoint_info": {}})
            if a.universal and rank == 0:
                to_universal(a.ckpt_dir, tag)
            deepspeed.comm.barrier()
            if rank == 0:
                say(f"SAVED step {step}")
    deepspeed.comm.barrier()
    say(f"DONE step {engine.global_steps} world {world}")
    # Tear the process group down before the interpreter exits: left to
    # exit, a rank aborted once in CI with "terminate called without an
    # active exception" (exit 134) after its DONE line.
    deepspeed.comm.destroy_process_group()


if __name__ == "__main__":
    main()
