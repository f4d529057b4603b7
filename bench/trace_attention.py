#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
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
    ap.add_argument("--end", type=int, default=None,
                    help="the window's last step (default: the run's last; its longest contexts, where the "
                         "attention's stage may no longer fit beside a qkv tile)")
    ap.add_argument("--groups", action="store_true",
                    help="also: the tasks split by what their worker ran before (a task of the layer before, "
                         "or something earlier) and by their index in the layer: count, start and duration means")
    a = ap.parse_args()
    with open(a.trace) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(s for s in {e["args"]["step"] for e in ev} if a.end is None or s <= a.end)[-a.steps:]
    ev = sorted((e for e in ev if e["args"]["step"] in steps), key=lambda e: e["ts"])
    layer_of = lambda e: e["name"].rsplit(".", 1)[0]
    order, layer_end = [], collections.defaultdict(float)
    for e in ev:
        L = layer_of(e)
        if L not in order:
            order.append(L)
        key = (e["args"]["step"], L)
        layer_end[key] = max(layer_end[key], e["ts"] + e["dur"])
    first_task = {}  # layer -> its first task id (task ids of a layer are consecutive)
    for e in ev:
        L = layer_of(e)
        first_task[L] = min(first_task.get(L, e["args"].get("task", -1)), e["args"].get("task", -1))
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
            prev_layer = layer_of(lst[i - 1]) if i else None
            rows[L].append((e["ts"] - before_end, e["dur"], busy, prev_layer == order[order.index(L) - 1],
                            e["args"].get("task", -1) - first_task[L]))
    print("%-26s %6s %8s %8s %8s %8s %6s" % ("attention layer", "tasks", "start>=", "start<=", "dur>=", "dur<=", "busy"))
    for L in order:
        if L in rows:
            r = rows[L]
            print("%-26s %6d %8.1f %8.1f %8.1f %8.1f %6d" % (L, len(r), min(x[0] for x in r), max(x[0] for x in r),
                                                          min(x[1] for x in r), max(x[1] for x in r), sum(x[2] for x in r)))
    if a.groups:
        allr = [x for L in order if L in rows for x in rows[L]]

        def show(what, sel):
            if sel:
                print("%-44s %5d  start %6.2f  dur mean %6.2f  min %6.2f  max %6.2f" % (
                    what, len(sel), sum(x[0] for x in sel) / len(sel), sum(x[1] for x in sel) / len(sel),
                    min(x[1] for x in sel), max(x[1] for x in sel)))
        print("\nall attention layers of the steps, by what the worker ran just before (start: us after the layer before ended)")
        show("after a task of the layer before (qkv)", [x for x in allr if x[3]])
        show("after anything else", [x for x in allr if not x[3]])
        for idx in sorted({x[4] for x in allr}):
            show("task %d of its layer" % idx, [x for x in allr if x[4] == idx])


if __name__ == "__main__":
    main()
