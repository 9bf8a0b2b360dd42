#!/usr/bin/python3
"""Compare the planned and the naive replay runs of bench/crosscluster/run.sh.

Usage: report.py --islands a1=A,a2=A,b1=B,b2=B [--min-ratio R] [--placement FILE]
                 NAME=LOG:JSON NAME=LOG:JSON

The first run is the planned one, the second the baseline. For each run it
prints the median step time (rank 0's --json-out), which host each rank ran on
and how many TP groups, DP groups and pipeline links cross an island boundary
(from the "replay: rank=..." line every rank prints). Last it prints the ratio
baseline / planned; exit status 1 when it is below --min-ratio, 2 on unusable
input.
"""

import argparse
import json
import re
import sys

RANK_LINE = re.compile(r"replay: rank=(\d+) .*?host=(\S+) .*?tp_group=(\S+) dp_group=(\S+) "
                       r"pp_prev=\S+ pp_next=(\S+)")


def fail(msg):
    print("report.py: %s" % msg, file=sys.stderr)
    sys.exit(2)


def read_ranks(log):
    """rank -> (host, tp group, dp group, next pipeline rank or None)."""
    out = {}
    with open(log, errors="replace") as f:
        for line in f:
            m = RANK_LINE.search(line)
            if m:
                nxt = None if m[5] == "-" else int(m[5])
                out[int(m[1])] = (m[2], tuple(map(int, m[3].split(","))), tuple(map(int, m[4].split(","))), nxt)
    return out


def crossings(ranks, islands):
    """Counts TP groups, DP groups and pipeline links spanning two islands."""
    def island(r):
        host = ranks[r][0]
        if host not in islands:
            fail("rank %d ran on host %r, which --islands does not name" % (r, host))
        return islands[host]

    def spans(group):
        return len({island(r) for r in group}) > 1

    tp = {v[1] for v in ranks.values() if spans(v[1])}
    dp = {v[2] for v in ranks.values() if spans(v[2])}
    pp = [r for r, v in ranks.items() if v[3] is not None and island(r) != island(v[3])]
    return len(tp), len(dp), len(pp)


def parse_run(spec):
    name, sep, files = spec.partition("=")
    log, sep2, js = files.partition(":")
    if not (sep and sep2 and name and log and js):
        fail("run %r: want NAME=LOG:JSON" % spec)
    try:
        with open(js) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        fail("run %s: read %s: %s" % (name, js, e))
    ranks = read_ranks(log)
    if len(ranks) != result.get("world"):
        fail("run %s: %s has %d 'replay: rank=' lines, want world=%s" % (name, log, len(ranks), result.get("world")))
    return name, result, ranks


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--islands", required=True, help="host=island,... for every host")
    ap.add_argument("--min-ratio", type=float, default=2.0)
    ap.add_argument("--placement", help="'rank host' lines of the plan, checked against the planned run")
    ap.add_argument("runs", nargs=2, metavar="NAME=LOG:JSON")
    a = ap.parse_args(argv)
    try:
        islands = dict(kv.split("=", 1) for kv in a.islands.split(","))
    except ValueError:
        fail("--islands %r: want host=island,..." % a.islands)

    medians = []
    runs = [parse_run(s) for s in a.runs]
    for name, result, ranks in runs:
        ntp, ndp, npp = crossings(ranks, islands)
        medians.append(result["median_step_seconds"])
        print("%-8s median step %.3f s   steps %s" % (name, result["median_step_seconds"],
                                                      " ".join("%.3f" % x for x in result["steps"])))
        print("         rank:host %s" % " ".join("%d:%s" % (r, ranks[r][0]) for r in sorted(ranks)))
        print("         crossing islands: %d TP groups, %d DP groups, %d pipeline links" % (ntp, ndp, npp))

    if a.placement:
        with open(a.placement) as f:
            want = {int(r): h for r, h in (line.split() for line in f if line.strip())}
        got = {r: v[0] for r, v in runs[0][2].items()}
        if want and want != got:
            print("WARNING: the %s run's rank->host %s differs from the plan's placement %s"
                  % (runs[0][0], got, want))

    ratio = medians[1] / medians[0]
    verdict = "ok" if ratio >= a.min_ratio else "BELOW"
    print("ratio %s/%s: %.2fx (want >= %g: %s)" % (runs[1][0], runs[0][0], ratio, a.min_ratio, verdict))
    return 0 if ratio >= a.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
