"""A real DeepSpeed PipelineModule (DeepSpeed kit, CPU, gloo) split by templates/site/pipette_ds_partition.py.

The layer list is Megatron-DeepSpeed's GPTModelPipe shape: an embedding, N layers named like its
ParallelTransformerLayerPipe, a final norm and the head, partitioned with partition_method="type:transformer"
as GPTModelPipe does. --install applies pipette_ds_partition.install() first (PIPETTE_PIPELINE_LAYERS from the
environment); without it DeepSpeed's own method runs, unless the job's sitecustomize.py is first on PYTHONPATH. Every rank prints
DS_PARTITION {"rank", "stage", "parts", "start", "stop", "transformer_layers"}: what the real module built.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import deepspeed
from deepspeed.pipe import LayerSpec, PipelineModule
from deepspeed.runtime.pipe.topology import PipeDataParallelTopology


class EmbeddingPipe(nn.Linear):
    pass


class ParallelTransformerLayerPipe(nn.Linear):
    pass


class MixedFusedLayerNorm(nn.LayerNorm):
    pass


class LMHeadPipe(nn.Linear):
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, required=True, help="transformer layers")
    ap.add_argument("--pp", type=int, required=True)
    ap.add_argument("--install", action="store_true", help="apply pipette_ds_partition first")
    ap.add_argument("--helper-dir", required=True, help="folder of pipette_ds_partition.py")
    args = ap.parse_args()
    if args.install:
        sys.path.insert(0, args.helper_dir)
        import pipette_ds_partition

        pipette_ds_partition.install()
    deepspeed.init_distributed(dist_backend="gloo")
    world = torch.distributed.get_world_size()
    specs = [LayerSpec(EmbeddingPipe, 4, 4)]
    specs += [LayerSpec(ParallelTransformerLayerPipe, 4, 4) for _ in range(args.layers)]
    specs += [LayerSpec(MixedFusedLayerNorm, 4), LayerSpec(LMHeadPipe, 4, 4)]
    topo = PipeDataParallelTopology(num_pp=args.pp, num_dp=world // args.pp)
    module = PipelineModule(layers=specs, topology=topo, loss_fn=nn.MSELoss(), partition_method="type:transformer")
    rank = torch.distributed.get_rank()
    local = specs[module._local_start:module._local_stop]
    report = {"rank": rank, "stage": module.stage_id, "parts": [int(p) for p in module.parts],
              "start": int(module._local_start), "stop": int(module._local_stop),
              "transformer_layers": sum(1 for s in local if s.typename is ParallelTransformerLayerPipe)}
    print("DS_PARTITION " + json.dumps(report), flush=True)
    torch.distributed.barrier()


if __name__ == "__main__":
    main()
