#!/usr/bin/python3
"""Replay one training plan's communication per step with torch.distributed (gloo, CPU).

The job stands in for a Megatron-LM training step, scaled down: no model, no
GPU, but the same process groups, the same message pattern and real data on
the wire, so that where ranks are placed on hosts decides how fast it runs.

Process groups follow Megatron's default rank order tp-cp-ep-dp-pp (the
leftmost axis has stride 1; cp must be 1 here):

    global = tp_rank + dp_rank*T + pp_rank*T*D

Every TP group and every DP group is created with dist.new_group, by every
rank, in the same order (gloo requires it); pipeline neighbours are found by
rank arithmetic (global +- T*D) and talk over the default group.

One step, per pipeline stage, is a 1F1B schedule over M micro-batches with the
real dependencies of Megatron's p2p_communication (send/recv pairs posted
together, so no stage can deadlock its neighbour):

  forward of a micro-batch : recv activation from stage s-1 (PP bytes),
                             sleep F/2, TP all-reduce, sleep F/2, TP all-reduce,
                             send activation to stage s+1
  backward of a micro-batch: recv gradient from stage s+1 (PP bytes),
                             sleep B/2, TP all-reduce, sleep B/2, TP all-reduce,
                             send gradient to stage s-1
  end of step              : DP all-reduce of DP bytes (gradient reduction)

Compute: --compute-ms C is the compute of ONE STAGE for the WHOLE STEP (all
micro-batches, forward and backward). Backward costs twice the forward, so
each micro-batch sleeps F = C/(3M) ms forward and B = 2C/(3M) ms backward.
A perfect pipeline with free communication therefore takes C*(1 + (P-1)/M)
per step, and never less than C.

--compute gemm instead runs the plan's real GEMMs on the CPU (float32, torch's
threads as OMP_NUM_THREADS sets them), from the Megatron flags: per
micro-batch and decoder layer of this stage the four GEMMs of a layer's TP
shard (QKV: tokens x h -> (h+2kv)/T, attention output: h/T -> h, MLP up:
h -> ffn/T (2 ffn/T with --swiglu), MLP down: ffn/T -> h; tokens =
seq_length x micro-batch), and on the last stage the output layer
(h -> vocab/T); backward runs each GEMM twice (data and weight gradients).
The stage's layers are num_layers/P, the remainder on the first stages.
Half the layers run before each of a pass's two TP all-reduces.

Each TP all-reduce carries --tp-bytes, each activation or gradient send
--pp-bytes, the DP all-reduce --dp-bytes (float32 tensors, numel = bytes/4
rounded up). --tp-bytes 0 or --dp-bytes 0 skips that traffic; --pp-bytes 0
still sends one float, because the pipeline's dependencies are what make the
bubble and must stay. There are 2 TP all-reduces per
micro-batch forward and 2 per backward, as Megatron without sequence
parallelism does per layer: a caller replaying L layers per stage folds them
into --tp-bytes.

Each step starts after a dist.barrier() and ends with one, timed with
time.perf_counter() on rank 0. Rank 0 prints each measured step and, last, one
JSON line {"median_step_seconds": ..., "steps": [...], "world": ..., ...},
also written to --json-out when given.

Megatron-LM's model, batch and plan flags (--num-layers, --hidden-size,
--micro-batch-size, --global-batch-size, --pipeline-model-parallel-layout,
--bf16, ...) are accepted and ignored, so that a launcher can plan this job
from the same arguments as the real training and append its plan's flags;
--tensor-model-parallel-size, --pipeline-model-parallel-size and
--context-parallel-size are aliases of --tp, --pp and --cp (the last one
given wins, as in argparse). Flags that change the rank order or add expert
parallelism are rejected.

Environment (torchrun / pipette-launch env://): RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT. gloo picks its interface from GLOO_SOCKET_IFNAME
itself when that is set. Runs on torch 1.13 (Debian's python3-torch).

Exit status: 0 on success, 2 on bad arguments or environment, 1 when a
self-check of the process groups fails.
"""

import argparse
import datetime
import json
import math
import os
import socket
import statistics
import sys
import time

USAGE_ERROR = 2


def fail_usage(msg):
    print("replay_plan.py: error: %s" % msg, file=sys.stderr)
    sys.exit(USAGE_ERROR)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Replay a training plan's TP/PP/DP communication with gloo.", allow_abbrev=False)
    # Megatron's spellings are aliases so that a launcher that reads a
    # script's Megatron flags as plan constraints sees the replayed sizes.
    p.add_argument("--tp", "--tensor-model-parallel-size", dest="tp", type=int, required=True,
                   help="tensor-parallel size T")
    p.add_argument("--pp", "--pipeline-model-parallel-size", dest="pp", type=int, required=True,
                   help="pipeline-parallel size P")
    p.add_argument("--dp", type=int, required=True, help="data-parallel size D")
    p.add_argument("--cp", "--context-parallel-size", dest="cp", type=int, default=1,
                   help="context-parallel size (only 1 is replayed)")
    p.add_argument("--micro-batches", type=int, required=True, help="micro-batches per step M")
    p.add_argument("--tp-bytes", type=int, required=True, help="bytes of each TP all-reduce")
    p.add_argument("--pp-bytes", type=int, required=True, help="bytes of each PP send (activation or gradient)")
    p.add_argument("--dp-bytes", type=int, required=True, help="bytes of the DP all-reduce per step")
    p.add_argument("--compute-ms", type=float,
                   help="compute of one stage for a whole step, in ms (slept; required with --compute sleep)")
    p.add_argument("--compute", choices=("sleep", "gemm"), default="sleep",
                   help="sleep --compute-ms, or run the plan's GEMMs from the Megatron flags")
    p.add_argument("--steps", type=int, required=True, help="measured steps N")
    p.add_argument("--warmup", type=int, required=True, help="unmeasured steps W run first")
    p.add_argument("--json-out", help="rank 0 writes the result JSON here too")
    p.add_argument("--timeout-s", type=float, default=600.0,
                   help="gloo timeout for any one operation (default 600)")
    add_megatron_flags(p)
    args = p.parse_args(argv)
    if args.expert_model_parallel_size not in (None, 1):
        fail_usage("--expert-model-parallel-size %d: expert parallelism is not replayed"
                   % args.expert_model_parallel_size)
    if args.use_tp_pp_dp_mapping:
        fail_usage("--use-tp-pp-dp-mapping: only Megatron's default order tp-cp-ep-dp-pp is replayed")
    for name in ("tp", "pp", "dp", "cp", "micro_batches", "steps"):
        if getattr(args, name) < 1:
            fail_usage("--%s must be at least 1, got %d" % (name.replace("_", "-"), getattr(args, name)))
    for name in ("tp_bytes", "pp_bytes", "dp_bytes", "warmup"):
        if getattr(args, name) < 0:
            fail_usage("--%s must not be negative, got %d" % (name.replace("_", "-"), getattr(args, name)))
    if args.cp != 1:
        fail_usage("--cp %d: only --cp 1 is replayed (context-parallel traffic is not modelled)" % args.cp)
    if args.compute == "sleep":
        if args.compute_ms is None:
            fail_usage("--compute-ms is required with --compute sleep")
        if not (args.compute_ms >= 0 and math.isfinite(args.compute_ms)):
            fail_usage("--compute-ms must be a finite number >= 0, got %r" % args.compute_ms)
    else:
        args.shape = gemm_shape(args)
    if args.timeout_s <= 0:
        fail_usage("--timeout-s must be positive, got %r" % args.timeout_s)
    return args


# Megatron-LM's own flags are accepted and ignored (the traffic comes from
# --tp-bytes and friends): a launcher reads the model shape and the pinned
# sizes from them to plan this job as it would plan the real training, and
# appends the flags of its plan when it renders a Megatron launch.
MEGATRON_VALUE_FLAGS = (
    "--num-layers", "--hidden-size", "--num-attention-heads", "--num-query-groups", "--ffn-hidden-size",
    "--seq-length", "--max-position-embeddings", "--vocab-size", "--tokenizer-type",
    "--micro-batch-size", "--global-batch-size",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--optimizer-offload-fraction", "--distributed-backend",
)
MEGATRON_SWITCHES = (
    "--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
    "--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--overlap-cpu-optimizer-d2h-h2d",
    "--bf16", "--fp16", "--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights",
)


def add_megatron_flags(p):
    g = p.add_argument_group("Megatron-LM flags (accepted, not replayed)")
    for f in MEGATRON_VALUE_FLAGS:
        g.add_argument(f, metavar="V", help=argparse.SUPPRESS)
    for f in MEGATRON_SWITCHES:
        g.add_argument(f, action="store_true", help=argparse.SUPPRESS)
    g.add_argument("--expert-model-parallel-size", type=int, help="must be 1")
    g.add_argument("--use-tp-pp-dp-mapping", action="store_true", help="rejected: another rank order")


def gemm_shape(args):
    """The layer shape --compute gemm needs, from the Megatron flags."""
    def need(flag):
        v = getattr(args, flag.lstrip("-").replace("-", "_"))
        if v is None:
            fail_usage("--compute gemm needs %s" % flag)
        try:
            v = int(v)
        except ValueError:
            fail_usage("%s %r is not an integer" % (flag, v))
        if v < 1:
            fail_usage("%s must be at least 1, got %d" % (flag, v))
        return v
    h, heads = need("--hidden-size"), need("--num-attention-heads")
    layers, seq, mbs = need("--num-layers"), need("--seq-length"), need("--micro-batch-size")
    vocab = need("--vocab-size")
    groups = int(args.num_query_groups) if args.num_query_groups else heads
    if args.ffn_hidden_size:
        ffn = int(args.ffn_hidden_size)
    elif args.swiglu:
        ffn = 4 * h * 2 // 3 // 64 * 64
    else:
        ffn = 4 * h
    t = args.tp
    if h % heads or heads % t or ffn % t or (h // heads * groups) % t:
        fail_usage("--compute gemm: hidden %d, heads %d, ffn %d do not split over TP %d" % (h, heads, ffn, t))
    return {"hidden": h, "kv": h // heads * groups, "ffn": ffn, "up": 2 * ffn if args.swiglu else ffn,
            "tokens": seq * mbs, "layers": layers, "vocab": vocab}


def stage_layers(layers, pp, stage):
    return layers // pp + (1 if stage < layers % pp else 0)


class GemmCompute:
    """The GEMMs of one stage's layers for one micro-batch (see the doc)."""

    def __init__(self, torch, shape, tp, pp, stage):
        self.torch = torch
        h, t = shape["hidden"], tp
        n = shape["tokens"]
        r = lambda *s: torch.randn(*s, dtype=torch.float32) * 0.01
        self.x, self.attn, self.mlp = r(n, h), r(n, h // t), r(n, shape["ffn"] // t)
        self.w = [r(h, (h + 2 * shape["kv"]) // t), r(h // t, h), r(h, shape["up"] // t), r(shape["ffn"] // t, h)]
        self.outs = [torch.empty(n, w.shape[1]) for w in self.w]
        self.ins = [self.x, self.attn, self.x, self.mlp]
        self.layers = stage_layers(shape["layers"], pp, stage)
        self.logits = None
        if stage == pp - 1:
            self.logits = (r(h, max(1, shape["vocab"] // t)), torch.empty(n, max(1, shape["vocab"] // t)))

    def layer(self, times):
        mm = self.torch.matmul
        for _ in range(times):
            for a, w, o in zip(self.ins, self.w, self.outs):
                mm(a, w, out=o)

    def run(self, times, tp_allreduce):
        first = self.layers // 2
        for _ in range(first):
            self.layer(times)
        tp_allreduce()
        for _ in range(self.layers - first):
            self.layer(times)
        if self.logits is not None:
            for _ in range(times):
                self.torch.matmul(self.x, self.logits[0], out=self.logits[1])
        tp_allreduce()


def env_int(name):
    val = os.environ.get(name)
    if val is None or val == "":
        fail_usage("environment variable %s is not set; start this script with torchrun or "
                   "pipette-launch (or set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)" % name)
    try:
        return int(val)
    except ValueError:
        fail_usage("environment variable %s=%r is not an integer" % (name, val))


def read_env(args):
    rank = env_int("RANK")
    world = env_int("WORLD_SIZE")
    local_rank = env_int("LOCAL_RANK")
    env_int("MASTER_PORT")
    if not os.environ.get("MASTER_ADDR"):
        fail_usage("environment variable MASTER_ADDR is not set")
    want = args.tp * args.pp * args.dp * args.cp
    if world != want:
        fail_usage("WORLD_SIZE=%d but --tp %d x --pp %d x --dp %d x --cp %d = %d; start %d processes "
                   "or change the sizes" % (world, args.tp, args.pp, args.dp, args.cp, want, want))
    if not 0 <= rank < world:
        fail_usage("RANK=%d is outside 0..WORLD_SIZE-1 (%d)" % (rank, world - 1))
    return rank, world, local_rank


class Layout:
    """Megatron's default order tp-cp-ep-dp-pp with cp = ep = 1."""

    def __init__(self, tp, pp, dp):
        self.tp, self.pp, self.dp = tp, pp, dp

    def rank(self, tp_rank, dp_rank, pp_rank):
        return tp_rank + dp_rank * self.tp + pp_rank * self.tp * self.dp

    def coords(self, rank):
        return rank % self.tp, (rank // self.tp) % self.dp, rank // (self.tp * self.dp)

    def tp_groups(self):
        return [[self.rank(t, d, p) for t in range(self.tp)]
                for p in range(self.pp) for d in range(self.dp)]

    def dp_groups(self):
        return [[self.rank(t, d, p) for d in range(self.dp)]
                for p in range(self.pp) for t in range(self.tp)]


def build_groups(dist, ranks_list, rank, timeout):
    """Calls new_group for every group (all ranks, same order) and returns
    this rank's (group, members), or (None, [rank]) for a group of one."""
    mine = (None, [rank])
    for ranks in ranks_list:
        if len(ranks) == 1:
            continue  # same on every rank, so the new_group order stays aligned
        g = dist.new_group(ranks=ranks, timeout=timeout)
        if rank in ranks:
            mine = (g, ranks)
    return mine


def buffer(torch, nbytes):
    return torch.ones(max(1, (nbytes + 3) // 4), dtype=torch.float32)


class Replayer:
    def __init__(self, torch, dist, args, rank, layout, tp_group, dp_group):
        self.torch, self.dist, self.args = torch, dist, args
        self.rank = rank
        _, _, self.stage = layout.coords(rank)
        stride = layout.tp * layout.dp
        self.prev = rank - stride if self.stage > 0 else None
        self.next = rank + stride if self.stage < layout.pp - 1 else None
        self.tp_group, self.dp_group = tp_group, dp_group
        m = args.micro_batches
        self.gemm = None
        if args.compute == "gemm":
            self.gemm = GemmCompute(torch, args.shape, layout.tp, layout.pp, self.stage)
            self.fwd_s = self.bwd_s = 0.0
        else:
            self.fwd_s = args.compute_ms / 1000.0 / (3 * m)
            self.bwd_s = 2 * self.fwd_s
        self.act_out = buffer(torch, args.pp_bytes)
        self.act_in = buffer(torch, args.pp_bytes)
        self.grad_out = buffer(torch, args.pp_bytes)
        self.grad_in = buffer(torch, args.pp_bytes)
        self.tp_buf = buffer(torch, args.tp_bytes) if args.tp_bytes > 0 and tp_group else None
        self.dp_buf = buffer(torch, args.dp_bytes) if args.dp_bytes > 0 and dp_group else None

    # Pipeline p2p: ops of one call are posted together and then waited on,
    # like Megatron's p2p_communication, so paired neighbours cannot deadlock.
    def p2p(self, send_next=False, recv_next=False, send_prev=False, recv_prev=False):
        d = self.dist
        reqs = []
        if send_next and self.next is not None:
            reqs.append(d.isend(self.act_out, self.next))
        if recv_prev and self.prev is not None:
            reqs.append(d.irecv(self.act_in, self.prev))
        if send_prev and self.prev is not None:
            reqs.append(d.isend(self.grad_out, self.prev))
        if recv_next and self.next is not None:
            reqs.append(d.irecv(self.grad_in, self.next))
        for r in reqs:
            r.wait()

    def tp_allreduce(self):
        if self.tp_buf is not None:
            self.dist.all_reduce(self.tp_buf, group=self.tp_group)

    def compute(self, seconds):
        # Two halves with a TP all-reduce after each: attention and MLP.
        time.sleep(seconds / 2)
        self.tp_allreduce()
        time.sleep(seconds / 2)
        self.tp_allreduce()

    def forward(self):
        if self.gemm is not None:
            self.gemm.run(1, self.tp_allreduce)
        else:
            self.compute(self.fwd_s)

    def backward(self):
        if self.gemm is not None:
            self.gemm.run(2, self.tp_allreduce)
        else:
            self.compute(self.bwd_s)

    def step(self):
        """One 1F1B step (Megatron's forward_backward_pipelining_without_interleaving)."""
        m = self.args.micro_batches
        warmup = min(self.args.pp - self.stage - 1, m)
        remaining = m - warmup
        for _ in range(warmup):
            self.p2p(recv_prev=True)
            self.forward()
            self.p2p(send_next=True)
        if remaining > 0:
            self.p2p(recv_prev=True)
        for i in range(remaining):
            self.forward()
            self.p2p(send_next=True, recv_next=True)
            self.backward()
            if i == remaining - 1:
                self.p2p(send_prev=True)
            else:
                self.p2p(send_prev=True, recv_prev=True)
        for _ in range(warmup):
            self.p2p(recv_next=True)
            self.backward()
            self.p2p(send_prev=True)
        if self.dp_buf is not None:
            self.dist.all_reduce(self.dp_buf, group=self.dp_group)


def self_check(torch, dist, rank, layout, tp, dp, prev, nxt):
    """Proves the groups are the ones Megatron would build: a wrong group
    sums the wrong ranks, a wrong neighbour sends the wrong rank."""
    for name, (group, members) in (("TP", tp), ("DP", dp)):
        if group is None:
            continue
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=group)
        if int(t.item()) != sum(members):
            print("replay_plan.py: rank %d: %s all-reduce over %s summed to %d, want %d"
                  % (rank, name, members, int(t.item()), sum(members)), file=sys.stderr)
            sys.exit(1)
    reqs = []
    got = torch.tensor([-1.0])
    if nxt is not None:
        reqs.append(dist.isend(torch.tensor([float(rank)]), nxt))
    if prev is not None:
        reqs.append(dist.irecv(got, prev))
    for r in reqs:
        r.wait()
    if prev is not None and int(got.item()) != prev:
        print("replay_plan.py: rank %d: pipeline recv from %d got %d" % (rank, prev, int(got.item())),
              file=sys.stderr)
        sys.exit(1)


def main(argv):
    args = parse_args(argv)
    rank, world, local_rank = read_env(args)

    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        print("replay_plan.py: this torch has no gloo backend (install Debian's python3-torch)", file=sys.stderr)
        return 1
    timeout = datetime.timedelta(seconds=args.timeout_s)
    dist.init_process_group(backend="gloo", init_method="env://", timeout=timeout)
    layout = Layout(args.tp, args.pp, args.dp)
    tp = build_groups(dist, layout.tp_groups(), rank, timeout)
    dp = build_groups(dist, layout.dp_groups(), rank, timeout)
    rep = Replayer(torch, dist, args, rank, layout, tp[0], dp[0])
    t_rank, d_rank, p_rank = layout.coords(rank)
    # One line per rank: where it runs and whom it talks to (tests parse it).
    print("replay: rank=%d local_rank=%d host=%s tp_rank=%d dp_rank=%d pp_rank=%d tp_group=%s dp_group=%s "
          "pp_prev=%s pp_next=%s gloo_socket_ifname=%s"
          % (rank, local_rank, socket.gethostname(), t_rank, d_rank, p_rank,
             ",".join(map(str, tp[1])), ",".join(map(str, dp[1])),
             "-" if rep.prev is None else rep.prev, "-" if rep.next is None else rep.next,
             os.environ.get("GLOO_SOCKET_IFNAME") or "-"), flush=True)
    self_check(torch, dist, rank, layout, tp, dp, rep.prev, rep.next)

    times = []
    for i in range(args.warmup + args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        rep.step()
        dist.barrier()
        dt = time.perf_counter() - t0
        if i >= args.warmup:
            times.append(dt)
            if rank == 0:
                print("step %d/%d: %.4f s" % (i - args.warmup + 1, args.steps, dt), flush=True)
                # Megatron-LM's training_log format, so `pipette-launch
                # calibrate` reads this job's log as it reads Megatron's.
                print(" iteration %8d/%8d | elapsed time per iteration (ms): %.1f |"
                      % (i - args.warmup + 1, args.steps, dt * 1000), flush=True)
        elif rank == 0:
            print("warmup %d/%d: %.4f s" % (i + 1, args.warmup, dt), flush=True)

    if rank == 0:
        result = {
            "median_step_seconds": statistics.median(times),
            "steps": times,
            "world": world,
            "tp": args.tp,
            "pp": args.pp,
            "dp": args.dp,
            "cp": args.cp,
            "micro_batches": args.micro_batches,
            "tp_bytes": args.tp_bytes,
            "pp_bytes": args.pp_bytes,
            "dp_bytes": args.dp_bytes,
            "compute_ms": args.compute_ms,
            "compute": args.compute,
            "warmup": args.warmup,
        }
        line = json.dumps(result)
        if args.json_out:
            with open(args.json_out, "w") as f:
                f.write(line + "\n")
        print(line, flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
