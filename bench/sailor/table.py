#!/usr/bin/env python3
"""all.sh's bookkeeping: one JSON line per trace row, then the table.

  table.py row FIG ROW LABEL RESDIR ROWDIR END START
      RESDIR holds simulator.py's {PLANNER}_OPT-350.json results (one entry
      per trace row: throughput in iterations/s of the first plan that
      passed check_config_fits, 0 when none did; search_time); ROWDIR our
      score.txt (score.py's lines, the last the plan scored); END - START
      our planning seconds.
  table.py print ROWS WORKDIR
      prints the table; exit status 1 when our plan is slower than Sailor's,
      or fails Sailor's memory check, on any row.
"""
import json
import os
import sys

PLANNERS = ["SAILOR", "Varuna", "Piper", "AMP", "Galvatron", "DTFM", "Aceso", "FlashFlex", "Metis"]
FIGURE_PLANNERS = {  # run_all_sim.py's --baselines, as ae_scripts/planner/run_*.sh pass it
    "7": ["Varuna", "Piper", "AMP", "Galvatron", "DTFM", "Aceso", "FlashFlex", "Metis", "SAILOR"],
    "8b": ["AMP", "FlashFlex", "Metis", "SAILOR"],
    "10": ["DTFM", "SAILOR"],
}
# Why a planner the artifact runs may not run here (Debian 12's packages).
KNOWN = {
    "Galvatron": "needs a newer torch than Debian's 1.13 on Python 3.11",
    "FlashFlex": "needs pymetis (Debian has only libmetis5)",
    "Aceso": "its archive lacks two files (SOURCES.md)",
}


def row(fig, r, label, resdir, rowdir, end, start):
    out = {"figure": fig, "row": int(r), "label": label, "planners": {}}
    for p in FIGURE_PLANNERS[fig]:
        path = os.path.join(resdir, f"{p}_OPT-350.json")
        if not os.path.exists(path):
            out["planners"][p] = {"ran": False, "why": KNOWN.get(p, "no result: see the figure's log")}
            continue
        with open(path) as f:
            res = json.load(f)[int(r)]
        thr = res["throughput"]
        out["planners"][p] = {"ran": True, "fits": thr > 0, "seconds": 1 / thr if thr > 0 else None,
                              "plan_seconds": res["search_time"]}
    lines = [l for l in open(os.path.join(rowdir, "score.txt")) if l.strip()]
    ours = json.loads(lines[-1]) if lines else {"fits": False, "iteration_seconds": None}
    out["ours"] = {"fits": ours["fits"], "seconds": ours["iteration_seconds"], "plan_seconds": float(end) - float(start),
                   "plan_index": len(lines), "tp": ours.get("tp"), "dp": ours.get("dp"), "mbs": ours.get("mbs"),
                   "stages": ours.get("stages")}
    print(json.dumps(out))


def cell(p):
    if not p.get("ran", True):
        return "not run"
    if not p["fits"] or p["seconds"] is None:
        return "no plan fits"
    return "%.3f" % p["seconds"]


def show(rows_path, work):
    rows = [json.loads(l) for l in open(rows_path) if l.strip()]
    print("Sailor's simulator (cf2c8e3, unchanged), OPT-350M, global batch 1024, fp32 as the artifact runs it; our plans:")
    print("pipette-launch plan --framework deepspeed --precision fp32 --recompute none, the first of its plans that passes")
    print("Sailor's check_config_fits (ours: plan N of its ranking). Seconds per iteration; planning seconds in brackets.")
    print()
    losses = 0
    ratios = []
    for fig in sorted({r["figure"] for r in rows}, key=lambda f: ["7", "8b", "10"].index(f)):
        fr = [r for r in rows if r["figure"] == fig]
        base = [p for p in FIGURE_PLANNERS[fig] if p != "SAILOR"]
        head = ["row", "Sailor"] + base + ["ours", "ours/Sailor", "ours: plan"]
        print("Figure %s" % fig)
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        for r in fr:
            s, o = r["planners"]["SAILOR"], r["ours"]
            ratio = o["seconds"] / s["seconds"] if s.get("ran") and s["fits"] and o["fits"] else None
            if ratio is None or ratio > 1:
                losses += 1
            if ratio:
                ratios.append(ratio)
            cells = [r["label"], "%s (%.2f s)" % (cell(s), s["plan_seconds"]) if s.get("ran") else "not run"]
            for p in base:
                b = r["planners"][p]
                cells.append("%s (%.2f s)" % (cell(b), b["plan_seconds"]) if b.get("ran") else "not run")
            ours = "%.3f (%.2f s)" % (o["seconds"], o["plan_seconds"]) if o["fits"] else "no plan fits"
            cells += [ours, "%.3f" % ratio if ratio else "-",
                      "%d: TP%s DP%s mb%s, %d stages" % (o["plan_index"], o["tp"], o["dp"], o["mbs"], len(o["stages"] or []))]
            print("| " + " | ".join(cells) + " |")
        print()
    not_run = sorted({(p, v["why"]) for r in rows for p, v in r["planners"].items() if not v.get("ran", True)})
    for p, why in not_run:
        print("%s: not run: %s" % (p, why))
    if ratios:
        g = 1.0
        for x in ratios:
            g *= x
        print("geometric mean ours/Sailor: %.3f over %d rows" % (g ** (1 / len(ratios)), len(ratios)))
    print("work folder (logs, plans, scores): %s" % work)
    if losses:
        print("sailor: ours is slower than Sailor's plan (or none fits) on %d of %d rows" % (losses, len(rows)), file=sys.stderr)
        sys.exit(1)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "row" and len(sys.argv) == 9:
        row(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "print":
        show(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
