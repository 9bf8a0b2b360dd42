#!/usr/bin/env python3
"""Writes one row of a Sailor trace (sailor/Planner/simulations/configs/
gpu_trace_*.csv) as a pipette-launch cluster file, with the network figures
Sailor's simulator prices that row with:

  - one island per trace column (GPU type in a zone), 4 GPUs per node as the
    artifact runs it (--gpus-per-node 4, basic_cluster_config.json);
  - each island's NIC rate and latency and the links between islands from
    sailor/providers/multizone_bandwidths_het.json, which Sailor measured
    with 1, 2 and 4 GPUs of a node sending at once: each curve (rate a
    polynomial in log2 of the message size) as the latency and rate of
    t = latency + bytes / rate fitted to it over 1 MB to 1 GB (alpha_beta),
    since the curve's rate falls for the small chunks a ring over many GPUs
    sends (A100 in us-central1-a, one GPU: 2.42 GB/s at its peak, 1.39 GB/s
    at 4 MB; fit 0.54 ms + 1.97 GB/s). The rate is the fit with all four
    GPUs sending (5.99 GB/s there), `senders` the fits with one and two
    (docs/cluster-format.md); the latency is one GPU's, what every
    all-reduce pays in runtime_simulator.py (sender_gpu_count = 1);
  - intra-host bandwidth from sailor/providers/intra_node_bandwidths.json (4 GPUs).

Usage: clusters.py SAILOR_TREE TRACE_CSV ROW OUTDIR
Writes OUTDIR/cluster.yaml and OUTDIR/hosts.json ({host: [GPU type, zone]},
what score.py needs to rebuild Sailor's plan from ours), and prints the row's
label ("32 A100-40", "32 A100-40 + 96 V100-16", "5 zones x 32 A100-40").
Only the standard library: it runs where Sailor's own dependencies do not.
"""
import csv
import json
import math
import os
import sys

GPUS_PER_NODE = 4
# Sailor's GPU names and the pipette-launch catalog's.
MODEL = {"A100-40": "A100-40GB-SXM", "V100-16": "V100-16GB-SXM2"}


def gbit(bytes_per_s):
    return round(bytes_per_s * 8 / 1e9, 3)


def curve_seconds(coef, x):
    """Seconds Sailor's simulator gives a message of x bytes on a fitted curve
    (sailor/providers/gcp/model_networking.py get_time_on_config): its rate
    in GB/s is a polynomial in log2 of the size in MB."""
    xm = math.log2(x / 1e6)
    return (x / 1e9) / sum(c * xm ** (len(coef) - i - 1) for i, c in enumerate(coef))


def alpha_beta(coef):
    """latency (s) and rate (bytes/s) of t = latency + x / rate fitted to the
    curve over 1 MB to 1 GB (log-spaced, least squares on relative error):
    the per-message cost a ring pays on each of its steps, which the curve's
    falling rate for small messages stands for."""
    sw = swx = swxx = sy = sxy = 0.0
    for k in range(41):
        x = 1e6 * 2 ** (k / 4)
        w = 1 / curve_seconds(coef, x)  # relative error: weight 1/t
        sw, swx, swxx, sy, sxy = sw + w * w, swx + w * w * x, swxx + w * w * x * x, sy + w, sxy + w * x
    det = sw * swxx - swx * swx
    a, b = (sy * swxx - swx * sxy) / det, (sw * sxy - swx * sy) / det
    return max(a, 0.0), 1 / b


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    tree, trace, row, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(trace) as f:
        rows = list(csv.DictReader(f))
    counts = {k: int(v) for k, v in rows[row].items() if k not in ("", "Timestamp") and int(v) > 0}
    with open(os.path.join(tree, "sailor/providers/multizone_bandwidths_het.json")) as f:
        inter = json.load(f)
    with open(os.path.join(tree, "sailor/providers/intra_node_bandwidths.json")) as f:
        intra = json.load(f)

    def fit(a, b, senders):  # latency (s) and rate (bytes/s) with `senders` GPUs of a node sending at once
        (ga, za), (gb, zb) = a, b
        return alpha_beta(inter[za][ga][senders][zb][gb][senders][0])

    def sender_counts(a, b):  # the numbers of sending GPUs Sailor measured for a -> b, rising
        (ga, za), (gb, zb) = a, b
        return sorted((k for k in inter[za][ga] if k in inter[za][ga][k][zb][gb]), key=int)

    def rates(a, b):
        """The whole rate (all a node's GPUs sending: the largest count
        measured) and the senders table below it, the slower direction of
        each (the simulator prices each transfer by its sender)."""
        counts = sender_counts(a, b)
        r = {k: min(fit(a, b, k)[1], fit(b, a, k)[1]) for k in counts if k in sender_counts(b, a)}
        whole = r[counts[-1]]
        table = ", ".join(f"{{gpus: {k}, rate_gbit_per_s: {gbit(min(r[k], whole))}}}" for k in counts[:-1] if k in r)
        return whole, (f", senders: [{table}]" if table else "")

    def latency_us(a, b):  # one GPU's per-message cost, what each step of a ring pays
        return round(max(fit(a, b, "1")[0], fit(b, a, "1")[0]) * 1e6, 1)

    islands, hosts = [], {}
    for col, n in counts.items():
        gpu, zone = col.split("_")
        if n % GPUS_PER_NODE:
            sys.exit(f"{col}: {n} GPUs are not whole nodes of {GPUS_PER_NODE}")
        name = f"{gpu.lower()}-{zone}"
        nodes = n // GPUS_PER_NODE
        for i in range(nodes):
            hosts[f"{name}-{i + 1:02d}"] = [gpu, zone]
        islands.append((name, gpu, zone, nodes))
    lines = ["# Row %d of Sailor's %s (cf2c8e3), written by bench/sailor/clusters.py:" % (row, os.path.basename(trace)),
             "# NIC and link rates and latencies: multizone_bandwidths_het.json, latency + bytes/rate fitted to each",
             "# curve: the rate when all 4 GPUs of a node send at once, senders: when 1 or 2 do (one GPU's is what",
             "# runtime_simulator.py prices every all-reduce with); latency: one GPU's.",
             "clusters:"]
    for name, gpu, zone, nodes in islands:
        lines += [f"  - name: {name}",
                  f"    hosts: {name}-[01-{nodes:02d}]",
                  f"    gpus_per_host: {GPUS_PER_NODE}",
                  f"    gpu: {{model: {MODEL[gpu]}}}",
                  f"    intra_host: {{type: nvlink, bandwidth_gbyte_per_s: {round(intra[gpu][str(GPUS_PER_NODE)][1] / 1e9, 1)}}}",
                  f"    nics: [{{type: ethernet, count: 1, rate_gbit_per_s: {gbit(rates((gpu, zone), (gpu, zone))[0])}, "
                  f"latency_us: {latency_us((gpu, zone), (gpu, zone))}{rates((gpu, zone), (gpu, zone))[1]}}}]"]
    pairs = [(a, b) for i, a in enumerate(islands) for b in islands[i + 1:]]
    if pairs:
        lines.append("links:")
        for a, b in pairs:
            bw, table = rates(a[1:3], b[1:3])
            lines.append(f"  - {{between: [{a[0]}, {b[0]}], type: ethernet, bandwidth_gbit_per_s: {gbit(bw)}, "
                         f"latency_us: {latency_us(a[1:3], b[1:3])}{table}}}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cluster.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "hosts.json"), "w") as f:
        json.dump(hosts, f, indent=1)
    zones = sorted({z for _, _, z, _ in islands})
    per = [f"{n * GPUS_PER_NODE} {g}" for _, g, _, n in islands]
    if len(zones) > 1 and len(set(per)) == 1:
        print(f"{len(zones)} zones x {per[0]}")
    else:
        print(" + ".join(per))


if __name__ == "__main__":
    main()
