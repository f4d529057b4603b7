#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""trace_ends.py — how spread out a layer's task ends are: what a consumer that took its input
piece by piece (as each producer task ends) instead of all at once could overlap.

    python3 bench/trace_ends.py TRACE.json [--steps N] [--kind REGEX]

For every layer instance (a layer in one step) of the last N steps (default 16), its tasks' end
times relative to the instance's last end; per layer kind (numbers replaced by #), medians over
the instances (us): `first` (the first end before the last), `half` (the median task's end before
the last), `2nd` (the second-to-last end before the last), and `next+` (the next kind's last end
after this kind's last end, its `end+` in trace_summary.py). A consumer that waited for producer
task i alone could start on task i's piece `first`..`2nd` µs earlier than one that waits for all
(e.g. o_proj, whose K chunks are the attention's KV-head groups, after the attention's 8 tasks).
"""
import argparse
import collections
import re
import statistics

from trace_events import task_events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--kind", default="", help="only the kinds matching this regex")
    a = ap.parse_args()
    events = task_events(a.trace)
    steps = sorted({e["args"]["step"] for e in events})[-a.steps:]
    use = set(steps)
    inst = collections.defaultdict(list)
    for e in events:
        if e["args"]["step"] in use:
            inst[(e["args"]["step"], e["layer"])].append(e["ts"] + e["dur"])
    by_step = collections.defaultdict(list)  # step -> [(last end, kind, ends)]
    for (step, layer), ends in inst.items():
        by_step[step].append((max(ends), re.sub(r"\d+", "#", layer), sorted(ends)))
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    order = []
    for step in steps:
        layers = sorted(by_step[step])
        for i, (last, kind, ends) in enumerate(layers):
            r = rows[kind]
            r["n"].append(len(ends))
            r["first"].append(last - ends[0])
            r["half"].append(last - ends[len(ends) // 2])
            r["2nd"].append(last - ends[-2] if len(ends) > 1 else 0.0)
            if i + 1 < len(layers):
                r["next+"].append(layers[i + 1][0] - last)
            if kind not in order:
                order.append(kind)
    med = lambda v: statistics.median(v) if v else float("nan")
    print(f"trace {a.trace}: steps {steps[0]}..{steps[-1]} ({len(steps)} steps; µs before the layer's last end)")
    print(f"{'layer kind':48s} {'tasks':>6s} {'first':>7s} {'half':>7s} {'2nd':>7s} {'next+':>7s}")
    for kind in order:
        if a.kind and not re.search(a.kind, kind):
            continue
        r = rows[kind]
        print(f"{kind[:48]:48s} {med(r['n']):6.0f} {med(r['first']):7.2f} {med(r['half']):7.2f} {med(r['2nd']):7.2f} "
              f"{med(r['next+']):7.2f}")


if __name__ == "__main__":
    main()
