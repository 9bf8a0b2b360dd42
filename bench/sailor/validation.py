#!/usr/bin/env python3
"""Scores Sailor's own simulator on Sailor's own measured GH200 runs: the runs
behind planner/search/testdata/published/sailor_gh200_*.tsv, each a plan
file of sailor/Planner/simulations/validation/clariden/{OPT-350,GPT-NEO}/ with
its measured iteration time (`real`). Each plan is priced by
runtime_simulator.Simulator.simulate_iteration_time, unchanged, with the
per-layer GH200 profiles Sailor's artifact validates with
(sailor/Planner/simulations/profiles_tmp.json: fp32 forward, backward and
update seconds per layer, measured in Sailor's training code on that
cluster) and the model's training config with the plan's global batch, as
sailor/Planner/simulations/validation/validate.py does for --simulator SAILOR.

Usage: validation.py SAILOR_CHECKOUT
Prints one line per run (with the run's measured gradient reduction,
`red_grads`, beside the simulator's all-reduce term T_sync) and each model's
mean absolute percentage error, with
and without GPT-NEO/N4/plan_config_N4_D4.json, the run our tables leave out
(planner/search/testdata/published/unverified/sailor_gh200_gptneo27_n4d4.tsv
says why). Needs Debian's python3 with numpy and pandas; reads the checkout,
changes nothing in it.
"""
import contextlib
import glob
import io
import json
import os
import re
import sys
import tempfile

UNVERIFIED = "GPT-NEO/N4/plan_config_N4_D4.json"
MODELS = [("OPT-350", "training_config_opt_350.json"), ("GPT-NEO", "training_config_gpt_neo27.json")]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: validation.py SAILOR_CHECKOUT")
    src = os.path.abspath(sys.argv[1])
    planner = os.path.join(src, "sailor", "Planner")
    if not os.path.isfile(os.path.join(planner, "simulations", "runtime_simulator.py")):
        sys.exit(f"{src}: not a Sailor checkout (no sailor/Planner/simulations/runtime_simulator.py)")
    home = tempfile.mkdtemp()  # Sailor reads its files under $SAILOR_PATH/sailor/
    os.symlink(src, os.path.join(home, "sailor"))
    os.environ["SAILOR_PATH"] = home
    sys.path[:0] = [src, os.path.join(planner, "simulations")]
    from runtime_simulator import Simulator  # Sailor's simulator, unchanged

    sims = os.path.join(planner, "simulations")
    with open(os.path.join(planner, "llm_info.json")) as f:
        llm_info = json.load(f)
    with open(os.path.join(sims, "profiles_tmp.json")) as f:
        profiles = json.load(f)
    runs = os.path.join(sims, "validation", "clariden")
    for model, config in MODELS:
        errs = {}
        for path in sorted(glob.glob(os.path.join(runs, model, "*", "*.json"))):
            name = os.path.relpath(path, runs)
            with open(path) as f:
                plan = json.load(f)
            with open(os.path.join(sims, "configs", config)) as f:
                training = json.load(f)
            training["global_batch_size"] = plan["gbs"]
            p = plan["pipeline_list"][0]
            sim_plan = {"pipeline_list": [{k: p[k] for k in ("num_stages", "layers_per_stage", "tmp_per_stage", "dp")}],
                        "mbs": plan["mbs"]}
            working = io.StringIO()
            with contextlib.redirect_stdout(working):  # the simulator prints its working
                seconds = Simulator(home, training, llm_info, False, profiles, plan["zone"]).simulate_iteration_time(sim_plan)[0]
            errs[name] = seconds / plan["real"] - 1
            # Its gradient all-reduce term, from the working it prints, beside
            # the run's measured gradient reduction (`red_grads`).
            t_sync = re.findall(r"T_sync is ([0-9.eE+-]+)", working.getvalue())[-1]
            print(f"{name:42s} measured {plan['real']:8.4f} s  Sailor's simulator {seconds:8.4f} s  {100 * errs[name]:+6.1f}%"
                  f"  | gradient reduction measured {plan['red_grads']:.4f} s, simulator's T_sync {float(t_sync):.4f} s")
        scored = {n: e for n, e in errs.items() if n != UNVERIFIED}
        worst = max(scored, key=lambda n: abs(scored[n]))
        print(f"{model}: MAPE {100 * sum(map(abs, scored.values())) / len(scored):.1f}% over {len(scored)} runs "
              f"(worst {worst} {100 * scored[worst]:+.1f}%)"
              + (f"; {100 * sum(map(abs, errs.values())) / len(errs):.1f}% with {UNVERIFIED}" if UNVERIFIED in errs else ""))


if __name__ == "__main__":
    main()
