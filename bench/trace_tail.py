#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""trace_tail.py — what sets a GEMV layer's span: late starts or long tasks.

    python3 bench/trace_tail.py TRACE.json [--min-tasks N]

For every layer instance (a layer in one step) with at least N tasks (default 90: the GEMV layers
of a 132-worker kernel), per layer kind, medians over the instances (us): `spread` (last start -
first start), `lastst` (how late the task that ends last started), `lastd/m` (its duration over
the instance's mean), `span` (last end - first start), the mean and the longest task. Then the
tasks that start more than 1 us after the first, by what their worker ran before them: how many
per instance, how late, and when that previous task ended (relative to the first start: < 0 is
before it, so the worker was waiting, not busy); and which workers end the layer most often.
"""
import argparse
import collections
import statistics

from trace_events import previous_tasks, task_events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--min-tasks", type=int, default=90)
    a = ap.parse_args()
    events = task_events(a.trace)
    inst = collections.defaultdict(list)
    for e in events:
        inst[(e["args"]["step"], e["layer"])].append(e)
    prev = previous_tasks(events)
    rows, late, enders = collections.defaultdict(list), collections.defaultdict(lambda: collections.defaultdict(list)), \
        collections.defaultdict(collections.Counter)
    for tasks in inst.values():
        if len(tasks) < a.min_tasks:
            continue
        kind = tasks[0]["kind"]
        s0 = min(e["ts"] for e in tasks)
        mean = statistics.mean(e["dur"] for e in tasks)
        last = max(tasks, key=lambda e: e["ts"] + e["dur"])
        rows[kind].append((max(e["ts"] for e in tasks) - s0, last["ts"] - s0, last["dur"] / mean if mean else 0.0,
                           last["ts"] + last["dur"] - s0, mean, max(e["dur"] for e in tasks)))
        enders[kind][last["tid"]] += 1
        for e in tasks:
            if e["ts"] - s0 > 1.0:
                p = prev.get(id(e))
                late[kind][p["kind"] if p else "-"].append((e["ts"] - s0, p["ts"] + p["dur"] - s0 if p else 0.0))
    print("%-52s %5s %7s %7s %7s %7s %7s %7s" % ("layer kind", "inst", "spread", "lastst", "lastd/m", "span", "mean", "max"))
    for kind, v in rows.items():
        print("%-52s %5d %7.2f %7.2f %7.3f %7.2f %7.2f %7.2f" % ((kind[:52], len(v)) +
                                                               tuple(statistics.median(x[i] for x in v) for i in range(6))))
    for kind, by_prev in late.items():
        n = len(rows[kind])
        print("%s: late starters (> 1 us) per instance, how late, their previous task's end" % kind)
        for pk, v in sorted(by_prev.items(), key=lambda x: -len(x[1]))[:3]:
            print("    after %-48s %6.2f %7.2f %7.2f" % (pk[:48], len(v) / n, statistics.median(x[0] for x in v),
                                                      statistics.median(x[1] for x in v)))
        print("    ends the layer most often (worker: instances): %s" % enders[kind].most_common(6))


if __name__ == "__main__":
    main()
