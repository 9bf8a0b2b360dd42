"""DeepSpeed's own config class on DeepSpeed config files, on the CPU (the DeepSpeed kit's environment).

Input (stdin): one JSON request per line: {"id": ..., "path": FILE, "dp": data-parallel ranks}. Output: one
JSON line per request: {"id", "ok", "error"} or the values DeepSpeed derived: train_batch_size,
train_micro_batch_size_per_gpu, gradient_accumulation_steps, zero_stage, offload_optimizer, offload_param,
and "set": which of those the file itself names (as DeepSpeed read it; the rest DeepSpeed derived or defaulted).
The data-parallel size reaches DeepSpeedConfig through its mpu argument, as Megatron-DeepSpeed passes it.
"""
import json
import os
import socket
import sys

import deepspeed
from deepspeed.runtime.config import DeepSpeedConfig

# DeepSpeedConfig asks deepspeed.comm for the rank (and falls back to world size 1 without it): a
# one-process gloo group on loopback answers, and the mpu argument gives the data-parallel size.
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
deepspeed.init_distributed(dist_backend="gloo")


class DataParallel:
    def __init__(self, n):
        self.n = n

    def get_data_parallel_world_size(self):
        return self.n


def device(off):
    if off is None:
        return "none"
    d = getattr(off, "device", None)
    return str(getattr(d, "value", d) or "none")


def named(d):
    """The derived values the config file names itself (legacy cpu_offload counts as offload_optimizer)."""
    z = d.get("zero_optimization") or {}
    if not isinstance(z, dict):
        z = {}
    keys = [k for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps") if d.get(k) is not None]
    keys += [name for name, spellings in (("zero_stage", ("stage",)), ("offload_optimizer", ("offload_optimizer", "cpu_offload")),
                                          ("offload_param", ("offload_param", "cpu_offload_params")))
             if any(k in z for k in spellings)]
    return keys


for line in sys.stdin:
    if not line.strip():
        continue
    req = json.loads(line)
    out = {"id": req.get("id"), "path": req["path"]}
    try:
        c = DeepSpeedConfig(req["path"], mpu=DataParallel(int(req.get("dp") or 1)))
        out.update(ok=True, train_batch_size=c.train_batch_size,
                   train_micro_batch_size_per_gpu=c.train_micro_batch_size_per_gpu,
                   gradient_accumulation_steps=c.gradient_accumulation_steps,
                   zero_stage=int(c.zero_optimization_stage),
                   offload_optimizer=device(c.zero_config.offload_optimizer),
                   offload_param=device(c.zero_config.offload_param),
                   set=named(c._param_dict))
    except BaseException as e:  # DeepSpeed's own refusal, word for word
        out.update(ok=False, error=f"{type(e).__name__}: {e}")
    print(json.dumps(out), flush=True)
