#!/usr/bin/env python3
"""trace_attention.py — when each attention task of a pk trace starts, against the end of the
layer before it (the qkv projection), and what its worker did before: shows whether the decode
attention's staging (which runs on the worker before the task's wait) delays the task.

    python3 bench/trace_attention.py TRACE.json [--steps N]

Per attention layer of the last N steps (default 4): start - (last end of the layer before),
min / max over its tasks in µs (negative: per-head events let a task start before the whole qkv
layer ended), task durations min / max, and how many tasks ran on a worker that was still busy
within 3 µs of that end (its staging then follows its previous task).
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    with open(a.trace) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted({e["args"]["step"] for e in ev})[-a.steps:]
    ev = sorted((e for e in ev if e["args"]["step"] in steps), key=lambda e: e["ts"])
    layer_of = lambda e: e["name"].rsplit(".", 1)[0]
    order, layer_end = [], collections.defaultdict(float)
    for e in ev:
        L = layer_of(e)
        if L not in order:
            order.append(L)
        key = (e["args"]["step"], L)
        layer_end[key] = max(layer_end[key], e["ts"] + e["dur"])
    by_worker = collections.defaultdict(list)
    for e in ev:
        by_worker[e["tid"]].append(e)
    rows = collections.defaultdict(list)  # layer -> (start - before_end, dur, busy)
    for lst in by_worker.values():
        for i, e in enumerate(lst):
            L = layer_of(e)
            if "attention" not in L or order.index(L) == 0:
                continue
            before_end = layer_end[(e["args"]["step"], order[order.index(L) - 1])]
            prev_end = lst[i - 1]["ts"] + lst[i - 1]["dur"] if i else None
            busy = prev_end is not None and prev_end > before_end - 3
            rows[L].append((e["ts"] - before_end, e["dur"], busy))
    print("%-26s %6s %8s %8s %8s %8s %6s" % ("attention layer", "tasks", "start>=", "start<=", "dur>=", "dur<=", "busy"))
    for L in order:
        if L in rows:
            r = rows[L]
            print("%-26s %6d %8.1f %8.1f %8.1f %8.1f %6d" % (L, len(r), min(x[0] for x in r), max(x[0] for x in r),
                                                          min(x[1] for x in r), max(x[1] for x in r), sum(x[2] for x in r)))


if __name__ == "__main__":
    main()
