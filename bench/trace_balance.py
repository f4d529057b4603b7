#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""trace_balance.py — whether a task's duration is a property of the worker (SM) that runs it.

    python3 bench/trace_balance.py TRACE.json [--min-tasks N] [--smid LOG]

For every layer instance (a layer in one step) with at least N tasks (default 100: the GEMV
layers of a 132-worker kernel), each task's duration over the instance's mean; per worker, the
mean of that ratio over the first and over the second half of the instances. Prints per layer
kind: the correlation between the two halves (near 1: the same workers are fast or slow every
time; a few outliers dominate it), the smallest, 10th / 90th percentile and largest per-worker
mean, and the slowest workers. A layer's span is its slowest task's, so a systematic spread is
time a static share per worker could win back. --smid LOG: key by SM instead of worker, from the
"pk cta N on sm M" lines a -DPK_DEBUG_SMID build prints (the last mapping in LOG). --starts: the
same for each task's start, in us after the instance's first start (the layer's skew: whether the
workers that see their event late are the same ones every time) instead of its duration ratio.
"""
import argparse
import collections
import re
import statistics

from trace_events import task_events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--min-tasks", type=int, default=100)
    ap.add_argument("--smid", help="log of a -DPK_DEBUG_SMID run: key by SM")
    ap.add_argument("--starts", action="store_true", help="start offsets (us) instead of duration ratios")
    a = ap.parse_args()
    sm = {}
    if a.smid:
        with open(a.smid) as f:
            for line in f:
                m = re.search(r"pk cta (\d+) on sm (\d+)", line)
                if m:
                    sm[int(m.group(1))] = int(m.group(2))
    inst = collections.defaultdict(list)
    for e in task_events(a.trace):
        inst[(e["args"]["step"], e["layer"], e["kind"])].append((sm.get(e["tid"], e["tid"]) if sm else e["tid"], e["dur"], e["ts"]))
    kinds = collections.defaultdict(list)
    for (_, _, kind), tasks in sorted(inst.items()):
        if len(tasks) < a.min_tasks:
            continue
        if a.starts:
            first = min(t for _, _, t in tasks)
            kinds[kind].append([(w, t - first) for w, _, t in tasks])
            continue
        mean = statistics.mean(d for _, d, _ in tasks)
        if mean > 0:
            kinds[kind].append([(w, d / mean) for w, d, _ in tasks])
    key = "SMs" if sm else "workers"
    print("%-56s %5s %7s %6s %6s %6s %6s %6s  %s %s" % ("layer kind", "inst", key, "corr", "min", "p10", "p90", "max",
                                                        "latest" if a.starts else "slowest", key))
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
        q = lambda f: both[min(len(both) - 1, int(f * len(both)))][0]
        print("%-56s %5d %7d %6.2f %6.3f %6.3f %6.3f %6.3f  %s" % (kind[:56], len(lst), len(ws), cov / den if den else 0.0,
                                                               both[0][0], q(0.1), q(0.9), both[-1][0],
                                                               [w for _, w in both[-6:]]))


if __name__ == "__main__":
    main()
