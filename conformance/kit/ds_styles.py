"""The two other ways scripts give DeepSpeed its config, for make conformance's real jobs (DeepSpeed kit, CPU).

--style hf: HF Trainer's way. The script takes --deepspeed FILE (a path, not DeepSpeed's own --deepspeed flag),
fills the "auto" values from its own arguments as transformers' HfTrainerDeepSpeedConfig does (micro batch from
--per_device_train_batch_size, accumulation from --gradient_accumulation_steps, train_batch_size = micro x
accumulation x world size) and hands DeepSpeed the dict: deepspeed.initialize(config=...).
--style config: DeepSpeed-Chat's and cifar's way. The script adds DeepSpeed's arguments
(deepspeed.add_config_arguments, so --deepspeed_config exists) but passes its own config:
deepspeed.initialize(args=args, config=...); DeepSpeed asserts when both are given.

Each rank prints DS_ENGINE {json} like the kit's example_train.py: what the engine used.
"""
import argparse
import json
import os
import sys

import torch
import deepspeed


def fill_auto(cfg, micro, gas, world):
    values = {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": gas,
              "train_batch_size": micro * gas * world}
    for k, v in values.items():
        if cfg.get(k) == "auto":
            cfg[k] = v
    return cfg


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=["hf", "config"], required=True)
    p.add_argument("--local_rank", "--local-rank", type=int, default=-1)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--per_device_train_batch_size", type=int, default=2)
    p.add_argument("--gradient_accumulation_steps", type=int, default=1)
    p.add_argument("--ds-file", help="--style config: the script's own config file")
    args, rest = p.parse_known_args()
    if args.style == "hf":
        hp = argparse.ArgumentParser()
        hp.add_argument("--deepspeed", required=True, help="HF TrainingArguments: the DeepSpeed config file")
        hargs = hp.parse_args(rest)
        cfg_path = hargs.deepspeed
    else:
        dp = deepspeed.add_config_arguments(argparse.ArgumentParser())
        dargs = dp.parse_args(rest)
        cfg_path = args.ds_file
    world = int(os.environ["WORLD_SIZE"])
    with open(cfg_path) as f:
        cfg = json.load(f)
    if args.style == "hf":
        cfg = fill_auto(cfg, args.per_device_train_batch_size, args.gradient_accumulation_steps, world)

    deepspeed.init_distributed(dist_backend="gloo")
    from deepspeed.comm import comm as ds_comm  # gloo on torch 1.13: see the kit's example_train.py
    ds_comm.cdb.all_gather_function = None
    ds_comm.cdb.reduce_scatter_function = None
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    if args.style == "hf":
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    else:
        engine, _, _, _ = deepspeed.initialize(args=dargs, model=model, model_parameters=model.parameters(),
                                               config=cfg)
    micro, gas = engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps()
    for _ in range(args.steps):
        for _ in range(gas):
            x = torch.randn(micro, 16)
            engine.backward(torch.nn.functional.mse_loss(engine(x), x.sum(1, keepdim=True)))
            engine.step()

    def device(off):
        return "none" if off is None else str(getattr(off.device, "value", off.device))

    report = {"rank": int(os.environ.get("RANK", "-1")), "world_size": world, "style": args.style,
              "train_batch_size": engine.train_batch_size(), "train_micro_batch_size_per_gpu": micro,
              "gradient_accumulation_steps": gas, "zero_stage": engine.zero_optimization_stage(),
              "offload_optimizer_device": device(engine.zero_offload_optimizer()),
              "global_steps": engine.global_steps, "argv": sys.argv[1:]}
    sys.stdout.write("DS_ENGINE " + json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    deepspeed.comm.barrier()


if __name__ == "__main__":
    main()
