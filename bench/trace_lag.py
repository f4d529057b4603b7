#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""trace_lag.py — how long after its event each worker starts a layer, and whether it was busy.

    python3 bench/trace_lag.py TRACE.json [--min-tasks N]

For every layer instance (a layer in one step, steps after the trace's first quarter) with at
least N tasks (default 100), E is the last end among the tasks of the instance before it (the
layer that started last before it: its producer in pk's decode graphs). Per task: start − E (a
task's trace start is when it saw its event), busy = how long its worker's own previous task ran
past E, lag = start − max(E, that end). Printed per layer kind: p10 / p50 / p90 / max over the
workers' means, and the six latest workers. busy 0 everywhere means every late start is a late
poll (a poll returns behind the SM's own copies in flight).
"""
import argparse
import collections
import statistics

from trace_events import previous_tasks, task_events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--min-tasks", type=int, default=100)
    a = ap.parse_args()
    ev = task_events(a.trace)
    steps = sorted({e["args"]["step"] for e in ev})
    keep = set(steps[len(steps) // 4:])  # past the prefill and the first decode steps
    ev = [e for e in ev if e["args"]["step"] in keep]
    inst = collections.defaultdict(list)
    for e in ev:
        inst[(e["args"]["step"], e["layer"])].append(e)
    prev = previous_tasks(ev)
    order = collections.defaultdict(list)  # per step: (first start, layer, last end)
    for (st, layer), tasks in inst.items():
        order[st].append((min(t["ts"] for t in tasks), layer, max(t["ts"] + t["dur"] for t in tasks)))
    res = collections.defaultdict(lambda: collections.defaultdict(lambda: ([], [], [])))
    for st, lst in order.items():
        lst.sort()
        for i in range(1, len(lst)):
            tasks = inst[(st, lst[i][1])]
            if len(tasks) < a.min_tasks:
                continue
            E = lst[i - 1][2]
            for t in tasks:
                p = prev.get(id(t))
                P = p["ts"] + p["dur"] if p else E
                r = res[tasks[0]["kind"]][t["tid"]]
                r[0].append(t["ts"] - E)
                r[1].append(max(0.0, P - E))
                r[2].append(t["ts"] - max(E, P))
    for kind, ws in res.items():
        rows = sorted((statistics.mean(v[0]), statistics.mean(v[1]), statistics.mean(v[2]), w) for w, v in ws.items())
        q = lambda f, j: rows[min(len(rows) - 1, int(f * len(rows)))][j]
        print("%-50s start-E p10 %.2f p50 %.2f p90 %.2f max %.2f | busy p50 %.2f p90 %.2f | lag p10 %.2f p50 %.2f p90 %.2f"
              % (kind[:50], q(.1, 0), q(.5, 0), q(.9, 0), rows[-1][0], q(.5, 1), q(.9, 1), q(.1, 2), q(.5, 2), q(.9, 2)))
        print("   latest (worker: start-E, busy, lag):",
              ", ".join("%d: %.2f %.2f %.2f" % (w, x, b, c) for x, b, c, w in rows[-6:]))


if __name__ == "__main__":
    main()
