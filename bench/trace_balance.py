#!/usr/bin/env python3
"""trace_balance.py — whether a task's duration is a property of the worker (SM) that runs it.

    python3 bench/trace_balance.py TRACE.json [--min-tasks N]

For every layer instance (a layer in one step) with at least N tasks (default 100: the GEMV
layers of a 132-worker kernel), each task's duration over the instance's mean; per worker, the
mean of that ratio over the first and over the second half of the instances. Prints per layer
kind: the correlation between the two halves (near 1: the same workers are slow every time), the
smallest and largest per-worker mean, and the slowest workers. A layer's span is its slowest
task's, so a systematic spread is time a static share per worker could win back.
"""
import argparse
import collections
import json
import re
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--min-tasks", type=int, default=100)
    a = ap.parse_args()
    with open(a.trace) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    inst = collections.defaultdict(list)
    for e in ev:
        layer = e["name"].rsplit(".", 1)[0] + ">" + str(e["args"].get("out"))
        inst[(e["args"]["step"], layer)].append((e["tid"], e["dur"]))
    kinds = collections.defaultdict(list)
    for (_, layer), tasks in sorted(inst.items()):
        if len(tasks) < a.min_tasks:
            continue
        mean = statistics.mean(d for _, d in tasks)
        if mean > 0:
            kinds[re.sub(r"\d+", "#", layer)].append([(w, d / mean) for w, d in tasks])
    print("%-56s %5s %7s %6s %7s %7s  %s" % ("layer kind", "inst", "workers", "corr", "min", "max", "slowest workers"))
    for kind, lst in kinds.items():
        half = len(lst) // 2
        first, second = collections.defaultdict(list), collections.defaultdict(list)
        for i, tasks in enumerate(lst):
            for w, r in tasks:
                (first if i < half else second)[w].append(r)
        ws = sorted(set(first) & set(second))
        if len(ws) < 2:
            continue
        xa = [statistics.mean(first[w]) for w in ws]
        xb = [statistics.mean(second[w]) for w in ws]
        ma, mb = statistics.mean(xa), statistics.mean(xb)
        cov = sum((x - ma) * (y - mb) for x, y in zip(xa, xb))
        den = (sum((x - ma) ** 2 for x in xa) * sum((y - mb) ** 2 for y in xb)) ** 0.5
        both = sorted((statistics.mean(first[w] + second[w]), w) for w in ws)
        print("%-56s %5d %7d %6.2f %7.3f %7.3f  %s" % (kind[:56], len(lst), len(ws), cov / den if den else 0.0,
                                                      both[0][0], both[-1][0], [w for _, w in both[-6:]]))


if __name__ == "__main__":
    main()
