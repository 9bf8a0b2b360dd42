#!/usr/bin/env python3
"""Scores a pipeline plan with Sailor's own simulator (eth-easl/sailor,
sailor/Planner/simulations/runtime_simulator.py), the way its artifact scores
its planners' plans: check_config_fits, then simulate_iteration_time, on the
first row of the heterogeneous trace (32 A100-40 + 96 V100-16, OPT-350,
global batch 1024, no --fp16, as run_het.sh runs it).

A plan is given as one stage per argument, GPU type and decoder layers:
    score.py --mbs 1 --dp 32 --tp 1 V100-16:5 V100-16:5 V100-16:5 A100-40:9
or as `pipette-launch plan --json` output (plan 1, or --plan N), each
replica's GPU type read from the host its ranks were placed on (hosts
a100-* are A100-40, v100-* V100-16, as in cluster.yaml; with --hosts, a
JSON object of host: [GPU type, zone], as clusters.py writes it, for any
row of Sailor's traces, zones included):
    score.py --plan-json plan.json [--hosts hosts.json]
Sailor's model has 26 layers: the embedding (0), 24 decoder layers, the head
(25). The first stage takes the embedding and the last the head, as in a
DeepSpeed PipelineModule whose layer list is [embedding, decoder x 24, head].

Needs SAILOR_PATH (a folder whose sailor/ is Sailor's checkout) and Sailor's
checkout plus its simulations folder on PYTHONPATH; see README.md.
"""
import argparse
import json
import os
import sys


HOST_GPU = {"a100": "A100-40", "v100": "V100-16"}


def stages_from_json(path, index, hostmap, zone):
    """Per stage (replica (GPU type, zone)s, decoder layers) and mbs, dp, tp
    of plan index (1-based) in pipette-launch plan --json output. DeepSpeed's
    and Megatron's rank order both put the pipeline stage outermost, then
    data parallel, then tensor parallel."""
    def where(h):
        if hostmap:
            return tuple(hostmap[h])
        return HOST_GPU[h.split("-")[0]], zone

    with open(path) as f:
        plan = json.load(f)["plans"][index - 1]
    tp, pp, dp = plan["tp"], plan["pp"], plan["dp"]
    if plan.get("cp", 1) != 1 or plan.get("vpp", 1) != 1:
        sys.exit("Sailor's simulator has no context parallelism or interleaved stages")
    host = {p["rank"]: p["host"] for p in plan["placement"]}
    stages = []
    for s in range(pp):
        gpus = []
        for d in range(dp):
            kinds = {where(host[(s * dp + d) * tp + t]) for t in range(tp)}
            if len(kinds) != 1:
                sys.exit("stage %d replica %d spans GPU kinds %s" % (s, d, kinds))
            gpus.append(kinds.pop())
        stages.append((gpus, plan["stage_layers"][s]))
    return stages, plan["micro_batch_size"], dp, tp


def build_plan(stages, mbs, dp, tp, zone, layers_total):
    """Sailor's plan dict; stages are (GPU type, or one (GPU type, zone) per
    replica, decoder layers); a bare GPU type is in zone."""
    decoder = sum(n for _, n in stages)
    if decoder + 2 != layers_total:
        sys.exit(f"stages hold {decoder} decoder layers; the model has {layers_total - 2}")
    layers, first = [], 0
    for i, (_, n) in enumerate(stages):
        count = n + (1 if i == 0 else 0) + (1 if i == len(stages) - 1 else 0)
        layers.append(list(range(first, first + count)))
        first += count
    per_replica = [g if isinstance(g, list) else [(g, zone)] * dp for g, _ in stages]
    tmp = [[([(gpu, tp, z)], tp) for gpu, z in gpus] for gpus in per_replica]
    used = {}
    for gpus in per_replica:
        for gpu, _ in gpus:
            used[gpu] = used.get(gpu, 0) + tp
    return {
        "pipeline_list": [{"num_stages": len(stages), "layers_per_stage": layers,
                           "tmp_per_stage": tmp, "dp": [dp] * len(stages)}],
        "mbs": mbs,
        "used_gpus": used,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mbs", type=int, help="micro-batch size")
    ap.add_argument("--dp", type=int, help="data-parallel replicas of every stage")
    ap.add_argument("--tp", type=int, default=1, help="tensor-parallel size of every replica")
    ap.add_argument("--plan-json", help="pipette-launch plan --json output to score instead")
    ap.add_argument("--plan", type=int, default=1, help="which plan of --plan-json (1-based)")
    ap.add_argument("--hosts", help="JSON object host: [GPU type, zone] for --plan-json (clusters.py's hosts.json)")
    ap.add_argument("stages", nargs="*", help="GPU:LAYERS per pipeline stage, first to last")
    args = ap.parse_args()
    home = os.environ["SAILOR_PATH"]
    sim_dir = f"{home}/sailor/sailor/Planner/simulations"
    from runtime_simulator import Simulator  # Sailor's simulator, unchanged

    with open(f"{sim_dir}/configs/training_config_opt_350.json") as f:
        training = json.load(f)
    with open(f"{sim_dir}/configs/basic_cluster_config.json") as f:
        zone = json.load(f)["zone"]
    with open(f"{home}/sailor/sailor/Planner/llm_info.json") as f:
        llm_info = json.load(f)
    with open(f"{sim_dir}/profiles_tmp.json") as f:
        profiles = json.load(f)
    if args.plan_json:
        hostmap = None
        if args.hosts:
            with open(args.hosts) as f:
                hostmap = json.load(f)
        stages, args.mbs, args.dp, args.tp = stages_from_json(args.plan_json, args.plan, hostmap, zone)
        args.stages = ["%s:%d" % ("+".join(sorted({"%s@%s" % gz for gz in g})), n) for g, n in stages]
    else:
        if not args.stages or args.mbs is None or args.dp is None:
            ap.error("give --plan-json, or --mbs, --dp and the stages")
        stages = []
        for s in args.stages:
            gpu, _, n = s.partition(":")
            stages.append((gpu, int(n)))

    sim = Simulator(home, training, llm_info, False, profiles, zone=zone)
    plan = build_plan(stages, args.mbs, args.dp, args.tp, zone, training["num_all_layers"])
    stdout = sys.stdout
    sys.stdout = sys.stderr  # the simulator prints its working; keep stdout for the result
    try:
        fits = sim.check_config_fits(plan)
        seconds = sim.simulate_iteration_time(plan)[0]
    finally:
        sys.stdout = stdout
    print(json.dumps({"stages": args.stages, "mbs": args.mbs, "dp": args.dp, "tp": args.tp,
                      "fits": fits, "iteration_seconds": round(seconds, 4)}))


if __name__ == "__main__":
    main()
