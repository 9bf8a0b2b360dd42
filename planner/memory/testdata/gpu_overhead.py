#!/usr/bin/env python3
"""Measures, on one GPU, what a training process holds beyond its tensors.

The estimator prices a rank's tensors (weights, gradients, optimizer
states, activations) and adds one allowance for the rest
(planner/memory otherFixedBytes): the CUDA context, the libraries'
workspaces and kernels, NCCL's communicators, and what PyTorch's caching
allocator reserves but does not hand out. This script measures those parts
on the GPU it runs on, in fresh processes:

  fixed   the device memory a process holds after each start-up stage:
          the CUDA context, a cuBLAS GEMM, a flash-attention forward and
          backward, a one-rank NCCL communicator with an all-reduce, and
          three more communicators;
  step    four training steps of a GPT built the way Megatron-Core keeps
          its tensors (RMSNorm and SwiGLU keep their inputs and, as fused
          kernels, write only their outputs; flash attention keeps Q, K, V
          and its output, or Megatron's unfused DotProductAttention runs
          over its global buffer; bf16 weights with fp32 main gradients and
          fp32 Adam states; Megatron's cross entropy or a torch script's),
          or an fp32 GPT with plain torch.optim.Adam; per step it reports
          the tensors' peak (torch.cuda.max_memory_allocated), the
          allocator's peak (max_memory_reserved) and the process's device
          memory (NVML), and for the fourth step the peak of each phase
          (forward, loss, each layer's backward, the optimizer step).

saved_tensors.py --device cuda runs the saved-tensor grid on the GPU.

Device memory is read from NVML (nvidia-ml-py): the process's own entry
when the driver lists it, and the device's used memory less what was used
before the process started. One GPU holds one NCCL rank (NCCL refuses two
ranks on one GPU: "Duplicate GPU detected"), so communicators of several
ranks, whose buffers grow with the peers, are not measured here.

Run (on a GPU; the checked-in output is testdata/gpu_overhead_h200.jsonl):

    python3 planner/memory/testdata/gpu_overhead.py all > planner/memory/testdata/gpu_overhead_h200.jsonl
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

MiB = 1 << 20


def nvml_used():
    """(device used bytes, this process's bytes or -1) from NVML; (-1, -1)
    without NVML. NVML opens no CUDA context."""
    try:
        import pynvml
    except ImportError:
        return -1, -1
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    used = pynvml.nvmlDeviceGetMemoryInfo(h).used
    mine = -1
    try:
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid() and p.usedGpuMemory is not None:
                mine = p.usedGpuMemory
    except pynvml.NVMLError:
        pass
    return used, mine


def snapshot(stage, base):
    torch.cuda.synchronize()
    used, mine = nvml_used()
    return {"stage": stage, "device_used_mib": round((used - base) / MiB, 1) if used >= 0 else -1,
            "process_mib": round(mine / MiB, 1) if mine >= 0 else -1,
            "reserved_mib": round(torch.cuda.memory_reserved() / MiB, 1),
            "allocated_mib": round(torch.cuda.memory_allocated() / MiB, 1)}


def fixed(base):
    """The start-up stages, each after the one before, in this process."""
    rows = []
    torch.zeros(1, device="cuda")
    rows.append(snapshot("context", base))
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    rows.append(snapshot("cublas_gemm_bf16", base))
    q = torch.randn(1, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    del q
    rows.append(snapshot("flash_attention_fwd_bwd", base))
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    rows.append(snapshot("nccl_world1_allreduce", base))
    for i in range(3):
        g = dist.new_group([0])
        dist.all_reduce(t, group=g)
    rows.append(snapshot("nccl_plus3_communicators", base))
    dist.destroy_process_group()
    return rows


# --- the step model ---------------------------------------------------------


def up(t):
    """t in fp32 when it is 16-bit (the kernels' fp32 arithmetic), else t."""
    return t.float() if t.element_size() < 4 else t


# A fused kernel computes in fp32 in registers and writes only its output;
# PyTorch ops write every intermediate. CHUNK tokens at a time keeps those
# intermediates small beside the output, as the fused kernels' footprint.
CHUNK = 256


def chunks(n):
    return [slice(i, min(i + CHUNK, n)) for i in range(0, n, CHUNK)]


class RMSNorm(torch.autograd.Function):
    """A fused RMSNorm (TE's, Apex's): keeps its input and the fp32 inverse
    RMS; forward and backward write only their outputs."""

    @staticmethod
    def forward(ctx, x, w, eps):
        out = torch.empty_like(x)
        rstd = torch.empty(x.shape[:-1] + (1,), dtype=up(x[:1]).dtype, device=x.device)
        for c in chunks(x.shape[0]):
            xf = up(x[c])
            rstd[c] = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
            out[c] = (xf * rstd[c]).to(x.dtype) * w
        ctx.save_for_backward(x, w, rstd)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w, rstd = ctx.saved_tensors
        gx = torch.empty_like(x)
        gw = torch.zeros(w.shape, dtype=up(w).dtype, device=w.device)
        for c in chunks(x.shape[0]):
            n = up(x[c]) * rstd[c]
            gf = up(g[c])
            gw += (gf * n).sum(dim=tuple(range(g.dim() - 1)))
            gn = gf * up(w)
            gx[c] = (rstd[c] * (gn - n * (gn * n).mean(-1, keepdim=True))).to(x.dtype)
        return gx, gw.to(w.dtype), None


class SwiGLU(torch.autograd.Function):
    """Megatron's fused SwiGLU: keeps only its 2*ffn-wide input; backward
    writes only the input's gradient."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a, b = torch.chunk(x, 2, -1)
        return F.silu(a) * b

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = torch.empty_like(x)
        f = x.shape[-1] // 2
        for c in chunks(x.shape[0]):
            a, b = torch.chunk(up(x[c]), 2, -1)
            s = torch.sigmoid(a)
            gf = up(g[c])
            out[c, ..., :f] = (gf * b * s * (1 + a * (1 - s))).to(x.dtype)
            out[c, ..., f:] = (gf * a * s).to(x.dtype)
        return out


class CrossEntropy(torch.autograd.Function):
    """Megatron's VocabParallelCrossEntropy at TP 1: an fp32 copy of the
    logits becomes their softmax in place and is kept for backward, whose
    gradient is written in place of it."""

    @staticmethod
    def forward(ctx, logits, target):
        x = logits.float() if logits.element_size() < 4 else logits.clone()
        x.sub_(x.max(-1, keepdim=True)[0])
        x.exp_()
        sums = x.sum(-1, keepdim=True)
        picked = torch.gather(x, -1, target.unsqueeze(-1))
        loss = torch.log(sums) - torch.log(picked)
        x.div_(sums)
        ctx.save_for_backward(x, target)
        return loss.squeeze(-1)

    @staticmethod
    def backward(ctx, g):
        x, target = ctx.saved_tensors
        x.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(target, -1, dtype=x.dtype).unsqueeze(-1))
        x.mul_(g.unsqueeze(-1))
        return x, None


class Checkpoint(torch.autograd.Function):
    """Full recompute: keeps the layer's input, reruns it in backward."""

    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn = fn
        ctx.save_for_backward(x)
        with torch.no_grad():
            return fn(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            y = ctx.fn(x)
        torch.autograd.backward(y, g)
        return None, x.grad


# Megatron's global memory buffer ("mpu"): one scores-sized tensor, made
# by the first unfused attention and kept for the run.
BUFFER = {}


def unfused_attention(q, k, v, scale):
    """Megatron-Core's DotProductAttention (core_v0.19.0): Q K^T by
    torch.baddbmm with the global buffer as its (beta = 0) input, which
    returns new scores; the mask applied in place and the softmax (the
    torch path FusedScaleMaskSoftmax takes in fp32), whose output
    backward keeps; probs x V. q, k, v are [b, heads, s, d]."""
    b, a, s, d = q.shape
    rep = a // k.shape[1]
    if rep > 1:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    shape = (b * a, s, s)
    buf = BUFFER.get((shape, q.dtype))
    if buf is None:
        buf = BUFFER[(shape, q.dtype)] = torch.empty(shape, dtype=q.dtype, device=q.device)
    scores = torch.baddbmm(buf, q.reshape(b * a, s, d), k.reshape(b * a, s, d).transpose(1, 2), beta=0.0, alpha=scale)
    mask = BUFFER.get(("mask", s))  # one causal mask for every layer, as the data loader's attention_mask
    if mask is None:
        mask = BUFFER[("mask", s)] = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    probs = torch.softmax(scores.view(b, a, s, s).masked_fill_(mask, -10000.0), -1)
    return torch.bmm(probs.view(b * a, s, s), v.reshape(b * a, s, d)).view(b, a, s, d)


class Layer(torch.nn.Module):
    def __init__(self, c, dtype, device):
        super().__init__()
        h, a, g, f = c["hidden"], c["heads"], c["groups"], c["ffn"]
        self.c, self.d = c, h // a

        def p(*shape):
            return torch.nn.Parameter(torch.randn(*shape, dtype=dtype, device=device) * 0.02)

        self.n1, self.n2 = p(h), p(h)
        self.wqkv = p((a + 2 * g) * self.d, h)
        self.wo = p(h, a * self.d)
        self.w1 = p(2 * f if c["swiglu"] else f, h)
        self.w2 = p(h, f)

    def norm(self, x, w):
        if self.c["fp32"]:
            return F.layer_norm(x, (x.shape[-1],), w)  # saves input, mean, rstd
        return RMSNorm.apply(x, w, 1e-5)

    def attention(self, q, k, v):
        s, b = q.shape[0], q.shape[1]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, d] views
        if self.c["fp32"] or self.c.get("unfused"):  # no flash kernel takes fp32
            out = unfused_attention(q, k, v, self.d ** -0.5)
        else:  # flash attention (the memory-efficient kernel where flash refuses the shapes)
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                     enable_gqa=k.shape[1] != q.shape[1])
        return out.permute(2, 0, 1, 3).reshape(s, b, -1)

    phases = None  # set on the last layer of a step measured by phase

    def forward(self, x):
        c = self.c
        a, g = c["heads"], c["groups"]
        mixed = F.linear(self.norm(x, self.n1), self.wqkv)
        if self.phases:
            self.phases.on_grad(mixed, "backward last layer: core attention")
        s, b = mixed.shape[0], mixed.shape[1]
        mixed = mixed.view(s, b, g, (a // g + 2) * self.d)
        q, k, v = torch.split(mixed, [a // g * self.d, self.d, self.d], dim=3)
        q = q.reshape(s, b, a, self.d)
        ctx = self.attention(q, k, v)
        if self.phases:
            self.phases.on_grad(ctx, "backward last layer: MLP and output projection")
        x = x + F.linear(ctx, self.wo)
        y = F.linear(self.norm(x, self.n2), self.w1)
        y = SwiGLU.apply(y) if c["swiglu"] else F.gelu(y, approximate="tanh")
        return x + F.linear(y, self.w2)


class GPT(torch.nn.Module):
    def __init__(self, c, dtype, device):
        super().__init__()
        h, v = c["hidden"], c["vocab"]
        self.c = c
        self.emb = torch.nn.Parameter(torch.randn(v, h, dtype=dtype, device=device) * 0.02)
        self.layers = torch.nn.ModuleList(Layer(c, dtype, device) for _ in range(c["layers"]))
        self.norm = torch.nn.Parameter(torch.ones(h, dtype=dtype, device=device))
        self.out = torch.nn.Parameter(torch.randn(v, h, dtype=dtype, device=device) * 0.02)

    def forward(self, tokens, target, phases=None):
        x = F.embedding(tokens, self.emb)  # [s, b, h]
        for i, layer in enumerate(self.layers):
            layer.phases = phases if i == len(self.layers) - 1 else None
            if phases:
                phases.on_grad(x, f"backward layer {i}")  # its gradient: layer i's backward is done
            x = Checkpoint.apply(layer, x) if self.c["recompute"] == "full" else layer(x)
        if phases:
            phases.mark("forward layers")
            phases.on_grad(x, "backward loss and output layer")
        x = self.layers[0].norm(x, self.norm)
        logits = F.linear(x, self.out)
        if self.c["fp32"] or self.c.get("torch_loss"):
            # a plain PyTorch script's loss (Hugging Face's causal-LM loss
            # upcasts 16-bit logits to fp32 first)
            logits = logits.float()
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))
        else:
            loss = CrossEntropy.apply(logits, target).mean()
        if phases:
            phases.mark("forward loss")
        return loss


class Phases:
    """The peak of allocated memory in each phase of a step, and what was
    allocated as the phase ended: mark() closes a phase."""

    def __init__(self):
        self.rows = []
        torch.cuda.reset_peak_memory_stats()

    def mark(self, name):
        self.rows.append({"phase": name, "peak_mib": round(torch.cuda.max_memory_allocated() / MiB, 1),
                          "end_mib": round(torch.cuda.memory_allocated() / MiB, 1)})
        torch.cuda.reset_peak_memory_stats()

    def on_grad(self, t, name):
        if t.requires_grad:
            t.register_hook(lambda g: self.mark(name))


class MegatronAdam:
    """Megatron's mixed-precision optimizer without the distributed
    optimizer: fp32 main gradients (one flat buffer, filled as each
    parameter's gradient arrives), fp32 master weights and Adam moments,
    the bf16 weights copied back after each step."""

    def __init__(self, params):
        self.params = [p for p in params]
        n = sum(p.numel() for p in self.params)
        self.main_grad = torch.zeros(n, dtype=torch.float32, device=self.params[0].device)
        self.master = []
        off = 0
        for p in self.params:
            p.main_grad = self.main_grad[off:off + p.numel()].view_as(p)
            off += p.numel()
            m = p.detach().float().clone().requires_grad_(True)
            m.grad = p.main_grad
            self.master.append(m)
            p.register_post_accumulate_grad_hook(self.accumulate)
        self.opt = torch.optim.Adam(self.master, lr=1e-5, fused=True)

    @staticmethod
    def accumulate(p):
        p.main_grad.add_(p.grad)
        p.grad = None

    def step(self):
        self.opt.step()
        with torch.no_grad():
            for p, m in zip(self.params, self.master):
                p.copy_(m)
        self.main_grad.zero_()


def step_run(c, base):
    device = torch.device("cuda")
    dtype = torch.float32 if c["fp32"] else torch.bfloat16
    torch.manual_seed(0)
    model = GPT(c, dtype, device)
    params = list(model.parameters())
    if c["fp32"]:
        opt = torch.optim.Adam(params, lr=1e-5, fused=True)
        for p in params:  # gradients kept between steps, as the estimate counts them
            p.grad = torch.zeros_like(p)
    else:
        opt = MegatronAdam(params)
    tokens = torch.randint(0, c["vocab"], (c["seq"], c["mbs"]), device=device)
    target = torch.randint(0, c["vocab"], (c["seq"], c["mbs"]), device=device)
    rows = []
    phases = None
    for i in range(4):
        if i == 3:  # a fourth step, by phase (its hooks run on the host, between kernels)
            phases = Phases()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        model(tokens, target, phases).backward()
        if phases:
            phases.mark("backward embedding")
        opt.step()
        if c["fp32"]:
            for p in params:
                p.grad.zero_()
        if phases:
            phases.mark("optimizer step")
            break
        torch.cuda.synchronize()
        used, mine = nvml_used()
        rows.append({"step": i + 1, "seconds": round(time.perf_counter() - t0, 3),
                     "max_allocated_mib": round(torch.cuda.max_memory_allocated() / MiB, 1),
                     "max_reserved_mib": round(torch.cuda.max_memory_reserved() / MiB, 1),
                     "device_used_mib": round((used - base) / MiB, 1) if used >= 0 else -1,
                     "process_mib": round(mine / MiB, 1) if mine >= 0 else -1})
    return {"params": sum(p.numel() for p in params), "steps": rows, "phases": phases.rows,
            "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}


def configs():
    """The measured configurations: a Llama-like GPT in bf16 (flash
    attention, SwiGLU, untied embeddings) at three micro-batches, with GQA,
    with full recompute, with Megatron's unfused attention, and a larger
    one; an fp32 GPT (GeLU, unfused attention) as Sailor's runs were."""
    llama = {"hidden": 2048, "heads": 16, "groups": 16, "ffn": 5632, "swiglu": True, "layers": 16,
             "vocab": 32000, "seq": 4096, "mbs": 1, "recompute": "none", "fp32": False}
    out = []
    for mbs in (1, 2, 4):
        out.append(dict(llama, name=f"llama1b_mbs{mbs}", mbs=mbs))
    out.append(dict(llama, name="llama1b_gqa4_mbs2", groups=4, mbs=2))
    out.append(dict(llama, name="llama1b_full_mbs8", recompute="full", mbs=8))
    big = dict(llama, hidden=3072, heads=24, groups=24, ffn=8192, layers=26)
    out.append(dict(big, name="llama3b_mbs1", mbs=1))
    out.append(dict(big, name="llama3b_full_mbs4", mbs=4, recompute="full"))
    out.append(dict(llama, name="llama1b_unfused_mbs2", unfused=True, mbs=2))
    out.append(dict(llama, name="llama1b_unfused_mbs1", unfused=True, mbs=1))
    out.append(dict(llama, name="llama1b_torchloss_mbs2", torch_loss=True, mbs=2))
    opt = {"hidden": 1024, "heads": 16, "groups": 16, "ffn": 4096, "swiglu": False, "layers": 24,
           "vocab": 50272, "seq": 2048, "recompute": "none", "fp32": True}
    for mbs in (1, 4):
        out.append(dict(opt, name=f"opt350m_fp32_mbs{mbs}", mbs=mbs))
    return out


def child(mode, arg):
    base = int(os.environ["GPU_OVERHEAD_BASE"])
    if mode == "fixed":
        return fixed(base)
    return step_run(json.loads(arg), base)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["all", "fixed", "step"])
    ap.add_argument("config", nargs="?", default="")
    ap.add_argument("--only", default="", help="with all: these step configurations (comma-separated names), no start-up stages")
    a = ap.parse_args()
    if a.mode != "all":
        print(json.dumps(child(a.mode, a.config)), flush=True)
        return 0
    used, _ = nvml_used()
    print(json.dumps({"baseline_device_used_mib": round(used / MiB, 1)}), flush=True)
    only = set(filter(None, a.only.split(",")))
    runs = [] if only else [("fixed", "", {}), ("fixed", "", {"CUDA_MODULE_LOADING": "EAGER"})]
    runs += [("step", json.dumps(c), {}) for c in configs() if not only or c["name"] in only]
    for mode, arg, env in runs:
        used, _ = nvml_used()
        e = dict(os.environ, GPU_OVERHEAD_BASE=str(max(used, 0)), **env)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, __file__, mode] + ([arg] if arg else []), env=e,
                           capture_output=True, text=True, timeout=240)
        rec = {"mode": mode, "env": env, "config": json.loads(arg) if arg else None, "rc": p.returncode,
               "wall_s": round(time.perf_counter() - t0, 1)}
        if p.returncode == 0:
            rec["result"] = json.loads(p.stdout.strip().splitlines()[-1])
        else:
            rec["stderr_tail"] = p.stderr[-2000:]
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
