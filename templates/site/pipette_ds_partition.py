"""Uneven pipeline layer splits for DeepSpeed's PipelineModule.

DeepSpeed v0.14.4's PipelineModule splits layers only by its partition_method
strings: "uniform", "parameters" or "type:REGEX" (the matching layers balanced
by count); none takes explicit boundaries (DeepSpeed issue #2974 asks for it),
and Megatron-DeepSpeed's GPTModelPipe hard-codes partition_method="type:transformer".
A plan for GPUs of different speeds gives the faster stages more layers, so
pipette-launch renders the split as PIPETTE_PIPELINE_LAYERS (decoder layers per
stage, first to last, e.g. "5,5,5,9") and puts this file and a sitecustomize.py
first on each rank's PYTHONPATH; sitecustomize.py calls install() when
deepspeed.runtime.pipe.module is imported, so the script needs no change. A
script started some other way can apply a split itself:

    import pipette_ds_partition
    pipette_ds_partition.install()   # before the PipelineModule is built

install() wraps PipelineModule._partition_layers. With PIPETTE_PIPELINE_LAYERS
set it sets the module's parts (the layer index where each stage starts, then
the number of layers: what DeepSpeed's own methods produce) so that stage s holds
the given number of the layers that the module's "type:REGEX" method counts
(REGEX "transformer" for the other methods, as Megatron-DeepSpeed's layers are
named). Layers that do not match stay where DeepSpeed's own balanced split of
those counts would put them: the ones before the first counted layer on the
first stage, the ones after the last on the last stage, and a layer between two
counted layers on the stage of the counted layer before it. Without the variable
DeepSpeed's own method runs unchanged.
"""
import os
import re

ENV = "PIPETTE_PIPELINE_LAYERS"


def stage_layers(env=None):
    """The split from PIPETTE_PIPELINE_LAYERS, or None when it is unset."""
    env = os.environ if env is None else env
    raw = env.get(ENV, "").strip()
    if not raw:
        return None
    try:
        counts = [int(x) for x in raw.split(",")]
    except ValueError:
        raise ValueError("%s=%r: want decoder layers per stage, comma-separated (e.g. 5,5,5,9)" % (ENV, raw))
    if any(n < 1 for n in counts):
        raise ValueError("%s=%r: every stage needs at least one layer" % (ENV, raw))
    return counts


def layer_name(spec):
    """The name DeepSpeed's _find_layer_type matches for one layer spec."""
    typename = getattr(spec, "typename", None)
    if typename is not None:  # LayerSpec / TiedLayerSpec
        return typename.__name__
    try:
        import torch.nn as nn

        if isinstance(spec, nn.Module):
            return spec.__class__.__name__
    except ImportError:
        pass
    return getattr(spec, "__name__", None)


def parts_for(specs, counts, pattern="transformer"):
    """DeepSpeed parts (len(counts)+1 boundaries over specs) that give stage s
    counts[s] of the specs whose name matches pattern (case-insensitive)."""
    rx = re.compile(pattern, re.IGNORECASE)
    matched = [i for i, s in enumerate(specs) if layer_name(s) is not None and rx.search(layer_name(s))]
    if sum(counts) != len(matched):
        raise ValueError("%s sums to %d layers but the module has %d layers matching %r: plan for this model"
                         % (ENV, sum(counts), len(matched), pattern))
    parts, seen = [0], 0
    for n in counts[:-1]:
        seen += n
        parts.append(matched[seen])  # a stage starts at its first counted layer
    parts.append(len(specs))
    return parts


def _pattern(method):
    method = (method or "").lower()
    return method.split(":", 1)[1] if method.startswith("type:") else "transformer"


def install(env=None):
    """Make every PipelineModule built after this call honour
    PIPETTE_PIPELINE_LAYERS. Returns the split it will apply, or None."""
    from deepspeed.runtime.pipe.module import PipelineModule

    counts = stage_layers(env)
    original = getattr(PipelineModule._partition_layers, "_pipette_original", PipelineModule._partition_layers)

    def _partition_layers(self, method="uniform"):
        if counts is None:
            return original(self, method=method)
        num_stages = self._topo.get_dim("pipe")
        if len(counts) != num_stages:
            raise ValueError("%s has %d stages, the pipeline %d" % (ENV, len(counts), num_stages))
        self.parts = parts_for(self._layer_specs, counts, _pattern(method))
        stage_id = self._topo.get_coord(self.global_rank).pipe
        if self.global_rank == 0:
            print("pipette_ds_partition: %s=%s, parts %s" % (ENV, ",".join(map(str, counts)), self.parts))
        self._set_bounds(start=self.parts[stage_id], stop=self.parts[stage_id + 1])

    _partition_layers._pipette_original = original
    PipelineModule._partition_layers = _partition_layers
    return counts
