#!/usr/bin/env python3
"""Measures what backward keeps of one GPT decoder layer on one TP rank.

The layer is Megatron-Core's local (non-Transformer-Engine) GPT layer,
rebuilt in plain PyTorch so that it runs on a CPU, with every step that
decides what autograd saves written as Megatron-LM core_v0.19.0 (commit
5be9626709af2722333bf54797c954c09edeada3) writes it:

  - LayerNorm (torch.nn.functional.layer_norm) before attention and MLP;
  - the QKV ColumnParallelLinear; with sequence parallelism it saves its
    local (pre-all-gather) input, as LinearWithGradAccumulationAndAsync-
    Communication does (core/tensor_parallel/layers.py: save_for_backward
    (input, weight) before the all-gather);
  - the split of the mixed QKV tensor and the query reshape of
    Attention.get_query_key_value_tensors (core/transformer/attention.py):
    with fewer KV groups than heads the reshape copies the query;
  - DotProductAttention (core/transformer/dot_product_attention.py): K and V
    repeat_interleave'd to all heads when grouped, Q K^T, the masked scaled
    softmax, attention dropout, probs x V, the context made contiguous;
  - the softmax as the fused kernel ScaledUpperTriangMaskedSoftmax saves it:
    its 16-bit (input-dtype) output only (core/fusions/fused_softmax.py);
  - the output RowParallelLinear (a reduce-scatter with sequence
    parallelism, an all-reduce without: neither saves anything);
  - bias-dropout-add (core/fusions/fused_bias_dropout.py): dropout then the
    residual add; dropout as a GPU runs it (see dropout below);
  - the MLP's fc1, the fused bias-GeLU (GeLUFunction saves its input,
    core/fusions/fused_bias_gelu.py) or SwiGLU (SwiGLUFunction saves its
    2*ffn-wide input, core/fusions/fused_bias_swiglu.py), fc2;
  - recompute: selective wraps the core attention and full the whole layer
    in tensor_parallel.checkpoint's CheckpointFunction, which saves its
    tensor arguments and runs the function without grad.

Tensor parallelism is simulated by sizes: one rank holds heads/TP heads,
groups/TP KV groups and ffn/TP MLP columns; the all-gather and the
reduce-scatter of sequence parallelism are stand-ins that save nothing,
as Megatron's do. The count is the bytes of the unique storages
(deduplicated by data pointer) of every tensor autograd saves during the
layer's forward (torch.autograd.graph.saved_tensors_hooks), less the
parameters (model states, counted elsewhere).

Run (prints the grid as TSV; the checked-in copy is testdata/saved_tensors.tsv):

    python3 planner/memory/testdata/saved_tensors.py > planner/memory/testdata/saved_tensors.tsv

With --point it measures the named points only (the Go test's live check).
"""

import argparse
import itertools
import sys

import torch
import torch.nn.functional as F

# DEVICE is where the layer runs: the CPU by default; --device cuda runs
# the same grid on a GPU, where dropout and the softmax run their own kernels.
DEVICE = "cpu"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
COLUMNS = ["hidden", "heads", "groups", "ffn", "swiglu", "seq", "mbs", "tp", "sp",
           "recompute", "dropout", "dtype", "saved_bytes"]


def storage_of(t):
    """(data pointer, bytes) of the storage under t, on torch 1.13 and 2.x."""
    if hasattr(t, "untyped_storage"):
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    s = t.storage()
    return s.data_ptr(), s.nbytes()


def dropout(x, p):
    """torch.nn.functional.dropout in training as it runs on a GPU
    (ATen's dropout: native_dropout, which keeps a 1-byte bool mask, when
    0 < p < 1; the input itself at p = 0). On the CPU, torch 1.13's
    dropout multiplies by an input-dtype noise tensor instead, which is not
    what a GPU run keeps, so native_dropout is called directly."""
    if p == 0:
        return x
    return torch.native_dropout(x, p, True)[0]


class CheckpointFunction(torch.autograd.Function):
    """Megatron's tensor_parallel.checkpoint without the RNG bookkeeping:
    the forward runs without grad and only the tensor arguments are kept."""

    @staticmethod
    def forward(ctx, fn, *args):
        ctx.fn = fn
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return fn(*args)

    @staticmethod
    def backward(ctx, *grads):  # not run: the measurement needs the forward only
        raise NotImplementedError


class GatherColumnLinear(torch.autograd.Function):
    """ColumnParallelLinear under sequence parallelism: all-gathers the
    sequence (a stand-in: the local shard repeated TP times) and keeps the
    local input, not the gathered one."""

    @staticmethod
    def forward(ctx, x, weight, tp):
        ctx.save_for_backward(x, weight)
        return F.linear(x.repeat(tp, 1, 1), weight)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError


class ScatterRowLinear(torch.autograd.Function):
    """RowParallelLinear under sequence parallelism: the partial output is
    reduce-scattered over the sequence (a stand-in: the rank's slice)."""

    @staticmethod
    def forward(ctx, x, weight, tp):
        ctx.save_for_backward(x, weight)
        out = F.linear(x, weight)
        return out[: out.shape[0] // tp].clone()

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError


class UpperTriangSoftmax(torch.autograd.Function):
    """ScaledUpperTriangMaskedSoftmax: causal mask and scale inside the
    kernel (computed in fp32), the output in the input's dtype is saved."""

    @staticmethod
    def forward(ctx, scores, scale):
        s = scores.shape[-1]
        causal = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1)
        x = (scores.float() * scale).masked_fill(causal, float("-inf"))
        probs = torch.softmax(x, dim=-1).to(scores.dtype)
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError


class GeLUFunction(torch.autograd.Function):
    """Megatron's fused bias-GeLU: keeps its input (and the bias)."""

    @staticmethod
    def forward(ctx, x, bias):
        ctx.save_for_backward(x, bias)
        return F.gelu(x + bias, approximate="tanh")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError


class SwiGLUFunction(torch.autograd.Function):
    """Megatron's fused SwiGLU: keeps only its 2*ffn-wide input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a, b = torch.chunk(x, 2, -1)
        return F.silu(a) * b

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError


class Layer:
    """One TP rank's share of a GPT layer; forward(x) with x [s_local, b, h]."""

    def __init__(self, p, dtype):
        self.p = p
        h, tp = p["hidden"], p["tp"]
        self.hn = h // p["heads"]
        self.np, self.ng = p["heads"] // tp, p["groups"] // tp
        self.ffn = p["ffn"] // tp
        bias = not p["swiglu"]  # GPT keeps linear biases; Llama turns them off

        def param(*shape):
            return torch.randn(*shape, dtype=dtype, device=DEVICE, requires_grad=True)

        self.ln1 = (param(h), param(h))
        self.ln2 = (param(h), param(h))
        self.wqkv = param((self.np + 2 * self.ng) * self.hn, h)
        self.wo = param(h, self.np * self.hn)
        fc1 = 2 * self.ffn if p["swiglu"] else self.ffn
        self.w1 = param(fc1, h)
        self.b1 = param(fc1) if bias else None
        self.w2 = param(h, self.ffn)
        self.bo = param(h) if bias else None
        self.b2 = param(h) if bias else None
        self.params = [t for t in vars(self).values() if isinstance(t, torch.Tensor)]
        self.params += [t for pair in (self.ln1, self.ln2) for t in pair]

    def column(self, x, w):
        if self.p["sp"]:
            return GatherColumnLinear.apply(x, w, self.p["tp"])
        return F.linear(x, w)

    def row(self, x, w):
        if self.p["sp"]:
            return ScatterRowLinear.apply(x, w, self.p["tp"])
        return F.linear(x, w)  # then an all-reduce

    def bias_dropout_add(self, x, bias, residual):
        if bias is not None:
            x = x + bias
        return residual + dropout(x, self.p["dropout"])

    def core_attention(self, q, k, v):
        s, b = q.shape[0], q.shape[1]
        if self.np // self.ng > 1:
            k = k.repeat_interleave(self.np // self.ng, dim=2)
            v = v.repeat_interleave(self.np // self.ng, dim=2)
        q = q.reshape(s, b * self.np, self.hn)
        k = k.view(s, b * self.np, self.hn)
        scores = torch.bmm(q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2))
        probs = UpperTriangSoftmax.apply(scores.view(b, self.np, s, s), self.hn ** -0.5)
        probs = dropout(probs, self.p["dropout"])
        v = v.view(s, b * self.np, self.hn)
        ctx = torch.bmm(probs.view(b * self.np, s, s), v.transpose(0, 1))
        ctx = ctx.view(b, self.np, s, self.hn).permute(2, 0, 1, 3).contiguous()
        return ctx.view(s, b, self.np * self.hn)

    def forward(self, x):
        h = self.p["hidden"]
        ln = F.layer_norm(x, (h,), *self.ln1)
        mixed = self.column(ln, self.wqkv)
        s, b = mixed.shape[0], mixed.shape[1]
        per_group = self.np // self.ng
        mixed = mixed.view(s, b, self.ng, (per_group + 2) * self.hn)
        q, k, v = torch.split(mixed, [per_group * self.hn, self.hn, self.hn], dim=3)
        q = q.reshape(s, b, -1, self.hn)
        if self.p["recompute"] == "selective":
            ctx = CheckpointFunction.apply(self.core_attention, q, k, v)
        else:
            ctx = self.core_attention(q, k, v)
        x = self.bias_dropout_add(self.row(ctx, self.wo), self.bo, x)
        ln = F.layer_norm(x, (h,), *self.ln2)
        y = self.column(ln, self.w1)
        if self.p["swiglu"]:
            y = SwiGLUFunction.apply(y)
        else:
            y = GeLUFunction.apply(y, self.b1)
        return self.bias_dropout_add(self.row(y, self.w2), self.b2, x)


def measure(p):
    """Unique saved-storage bytes of one forward of the layer described by p."""
    torch.manual_seed(0)
    dtype = DTYPES[p["dtype"]]
    layer = Layer(p, dtype)
    s_local = p["seq"] // p["tp"] if p["sp"] else p["seq"]
    x = torch.randn(s_local, p["mbs"], p["hidden"], dtype=dtype, device=DEVICE, requires_grad=True)
    skip = {storage_of(t)[0] for t in layer.params}
    seen = {}

    def pack(t):
        ptr, n = storage_of(t)
        if ptr not in skip:
            seen[ptr] = n
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if p["recompute"] == "full":
            out = CheckpointFunction.apply(layer.forward, x)
        else:
            out = layer.forward(x)
    assert out.shape == x.shape, (out.shape, x.shape)
    return sum(seen.values())


def grid():
    """The measured grid: two model shapes x parallelism x recompute x
    dropout x dtype x (micro-batch, sequence)."""
    models = [
        # hidden, heads, groups, ffn, swiglu: GPT (MHA, GeLU, f = 4h) and a
        # Llama-like (GQA, SwiGLU, ffn as Megatron derives it for h = 256)
        (256, 16, 16, 1024, False),
        (256, 16, 8, 1024, True),
        (256, 16, 8, 1024, False),
        (256, 16, 16, 640, True),
    ]
    tpsp = [(1, False), (2, False), (2, True), (4, False), (4, True), (8, False), (8, True)]
    for (h, a, g, f, swiglu), (tp, sp), rc, drop, dt, (b, s) in itertools.product(
            models, tpsp, ["none", "selective", "full"], [0.1, 0.0], list(DTYPES),
            [(1, 512), (4, 128)]):
        yield {"hidden": h, "heads": a, "groups": g, "ffn": f, "swiglu": swiglu, "seq": s, "mbs": b,
               "tp": tp, "sp": sp, "recompute": rc, "dropout": drop, "dtype": dt}


def dtype_unsupported(dt):
    """Why the layer cannot run in dtype dt here ("" if it can): torch
    1.13's CPU kernels have no float16 LayerNorm, GEMM or GeLU."""
    try:
        measure({"hidden": 64, "heads": 4, "groups": 4, "ffn": 256, "swiglu": False, "seq": 8, "mbs": 1,
                 "tp": 1, "sp": False, "recompute": "none", "dropout": 0.1, "dtype": dt})
    except RuntimeError as e:
        return str(e)
    return ""


def row(p):
    return "\t".join(str(int(v) if isinstance(v, bool) else v) for v in [p[c] for c in COLUMNS])


def parse_point(text):
    """A --point is one grid row without saved_bytes, tab or space separated."""
    f = text.split()
    if len(f) != len(COLUMNS) - 1:
        raise SystemExit(f"--point {text!r}: want {len(COLUMNS) - 1} fields ({' '.join(COLUMNS[:-1])})")
    p = dict(zip(COLUMNS, f))
    for c in ["hidden", "heads", "groups", "ffn", "seq", "mbs", "tp"]:
        p[c] = int(p[c])
    p["swiglu"], p["sp"] = p["swiglu"] == "1", p["sp"] == "1"
    p["dropout"] = float(p["dropout"])
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--point", action="append", default=[], help="measure only this point (repeatable)")
    ap.add_argument("--device", default="cpu", help="where the layer runs (cpu, cuda)")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    points = [parse_point(t) for t in args.point] or list(grid())
    if not args.point:
        print(f"# torch {torch.__version__} on {DEVICE}; regenerate: python3 planner/memory/testdata/saved_tensors.py"
              " > planner/memory/testdata/saved_tensors.tsv")
        unsupported = {dt: why for dt in DTYPES if (why := dtype_unsupported(dt))}
        for dt, why in unsupported.items():
            print(f"# {dt}: not measured, this torch's CPU kernels refuse it: {why}")
        points = [p for p in points if p["dtype"] not in unsupported]
        print("\t".join(COLUMNS))
    for p in points:
        p["saved_bytes"] = measure(p)
        print(row(p), flush=True)


if __name__ == "__main__":
    sys.exit(main())
