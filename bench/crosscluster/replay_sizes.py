#!/usr/bin/python3
"""Turn one plan of `pipette-launch plan --json` into replay_plan.py arguments.

Usage: replay_sizes.py PLAN_JSON [--index N] [--scale S] [--max-micro M] [--compute-ms C]
                       [--placement-out FILE]

Prints one line of arguments for examples/replay_plan.py on stdout and what it
derived on stderr. Per message, from the plan and model.shape (bf16
activations, Megatron defaults):

  activation  act = seq_length * micro_batch_size * hidden_size * 2 bytes
  PP bytes    act * V        (act / tp with sequence parallelism: Megatron then
                              sends the sequence-scattered tensor; V = virtual
                              stages: interleaving crosses each boundary V
                              times, the replay's plain 1F1B once)
  TP bytes    act * L        (L = layers of the busiest pipeline rank, all its
                              virtual stages together: Megatron does 2
                              all-reduces of act per layer per pass; the replay
                              does 2 per pass, so each carries L layers' worth)
  DP bytes    parameters * L / num_layers / tp * 4
                             (this rank's share of the gradients, reduced in
                              fp32 as Megatron does under --bf16)

The line starts with the model and batch in Megatron-LM's flags
(--num-layers, --hidden-size, ..., --micro-batch-size, --global-batch-size)
and the plan's TP and PP as --tensor-model-parallel-size and
--pipeline-model-parallel-size: replay_plan.py ignores the shape, and
`pipette-launch run` plans from these flags exactly as for the real
training, with TP, PP, the micro-batch, virtual stages, sequence parallelism
and the distributed optimizer pinned to the replayed plan's.

The replay runs min(num_micro_batches, M) micro-batches; PP and TP messages
grow by num_micro_batches / replayed so each step still moves the plan's bytes.
Every size is then divided by S. Exit status 2 on unusable input.
"""

import argparse
import json
import sys


def fail(msg):
    print("replay_sizes.py: %s" % msg, file=sys.stderr)
    sys.exit(2)


def rank_layers(stage_layers, pp, vpp, layers):
    """Layers of the busiest pipeline rank: stage i = v*pp + rank, as in
    Megatron's layout, so a rank holds stages rank, rank+pp, ..."""
    if not stage_layers:
        return layers // pp
    if len(stage_layers) != pp * vpp:
        fail("plan has %d stage_layers, want pp*vpp = %d" % (len(stage_layers), pp * vpp))
    return max(sum(stage_layers[v * pp + r] for v in range(vpp)) for r in range(pp))


def sizes(result, index, scale, max_micro):
    plans = result.get("plans") or []
    if not 0 <= index < len(plans):
        fail("plan index %d: the JSON has %d plans" % (index, len(plans)))
    plan = plans[index]
    model = result.get("model") or {}
    shape = model.get("shape")
    if not shape:
        fail("plan JSON has no model.shape (num_layers, hidden_size, seq_length): "
             "use a pipette-launch whose plan --json prints it")
    try:
        t, p, d = plan["tp"], plan["pp"], plan["dp"]
        s, h, layers = shape["seq_length"], shape["hidden_size"], shape["num_layers"]
        b, m = plan["micro_batch_size"], plan["num_micro_batches"]
        params = model["parameters"]
    except KeyError as e:
        fail("plan JSON lacks %s" % e)
    if plan.get("cp", 1) != 1:
        fail("plan has cp=%d; replay_plan.py replays cp=1 only" % plan["cp"])
    vpp = max(1, plan.get("vpp") or 1)
    stage_layers = rank_layers(plan.get("stage_layers"), p, vpp, layers)
    act = s * b * h * 2
    # Interleaved 1F1B sends each micro-batch across every rank's boundary
    # once per virtual stage; the replay's plain 1F1B sends it once.
    pp_bytes = (act // t if plan.get("sequence_parallel") else act) * vpp
    tp_bytes = act * stage_layers if t > 1 else 0
    dp_bytes = params * stage_layers // layers // t * 4 if d > 1 else 0
    replayed = min(m, max_micro)
    keep = m / replayed
    out = {
        "tp": t, "pp": p, "dp": d, "micro_batches": replayed,
        "tp_bytes": int(tp_bytes * keep / scale),
        "pp_bytes": int(pp_bytes * keep / scale),
        "dp_bytes": int(dp_bytes / scale),
    }
    info = ("plan %d: tp=%d pp=%d dp=%d micro_batch_size=%d num_micro_batches=%d stage_layers=%s; "
            "plan bytes per message tp=%d pp=%d dp=%d; replayed %d micro-batches, sizes / %g"
            % (index, t, p, d, b, m, plan.get("stage_layers"), tp_bytes, pp_bytes, dp_bytes, replayed, scale))
    return out, info, plan.get("placement") or []


def megatron_shape_args(result, plan):
    """The model and batch as Megatron-LM flags (what run plans from)."""
    sh = result["model"]["shape"]
    a = ["--num-layers", sh["num_layers"], "--hidden-size", sh["hidden_size"],
         "--num-attention-heads", sh["num_attention_heads"]]
    groups = sh.get("num_query_groups") or 0
    if groups and groups != sh["num_attention_heads"]:
        a += ["--group-query-attention", "--num-query-groups", groups]
    if sh.get("ffn_hidden_size"):
        a += ["--ffn-hidden-size", sh["ffn_hidden_size"]]
    if sh.get("swiglu"):
        a.append("--swiglu")
    a += ["--seq-length", sh["seq_length"], "--vocab-size", sh["vocab_size"]]
    if sh.get("max_position_embeddings"):
        a += ["--max-position-embeddings", sh["max_position_embeddings"]]
    if sh.get("untie_embeddings_and_output_weights"):
        a.append("--untie-embeddings-and-output-weights")
    a += ["--micro-batch-size", plan["micro_batch_size"], "--global-batch-size", plan["global_batch_size"]]
    # Pinned too, so run's search lands on the replayed plan's shape.
    if (plan.get("vpp") or 1) > 1:
        a += ["--num-virtual-stages-per-pipeline-rank", plan["vpp"]]
    if plan.get("sequence_parallel"):
        a.append("--sequence-parallel")
    if plan.get("distributed_optimizer"):
        a.append("--use-distributed-optimizer")
    return " ".join(str(x) for x in a)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan_json")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--scale", type=float, default=64)
    ap.add_argument("--max-micro", type=int, default=8)
    ap.add_argument("--compute-ms", type=float, default=300)
    ap.add_argument("--placement-out")
    a = ap.parse_args(argv)
    if a.scale <= 0 or a.max_micro < 1:
        fail("--scale must be > 0 and --max-micro >= 1")
    try:
        with open(a.plan_json) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        fail("read %s: %s" % (a.plan_json, e))
    out, info, placement = sizes(result, a.index, a.scale, a.max_micro)
    print("replay_sizes.py: " + info, file=sys.stderr)
    # Megatron's spellings for TP and PP, so a launcher that reads them as
    # plan constraints places the sizes that are replayed.
    try:
        shape_args = megatron_shape_args(result, result["plans"][a.index])
    except KeyError as e:
        fail("plan JSON lacks %s" % e)
    print(shape_args + " --tensor-model-parallel-size %d --pipeline-model-parallel-size %d --dp %d --micro-batches %d "
          "--tp-bytes %d --pp-bytes %d --dp-bytes %d --compute-ms %g"
          % (out["tp"], out["pp"], out["dp"], out["micro_batches"], out["tp_bytes"], out["pp_bytes"],
             out["dp_bytes"], a.compute_ms))
    if a.placement_out:
        with open(a.placement_out, "w") as f:
            for r in placement:
                f.write("%d %s\n" % (r["rank"], r["host"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
