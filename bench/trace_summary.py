#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""trace_summary.py — where a decode step's time goes, from a pk trace (Chrome trace JSON written by
`pk generate --trace FILE` or `pk bench --trace FILE`; one event per task, named "<layer>.<index>",
args.step = the step).

    python3 bench/trace_summary.py TRACE.json [--steps N] [--end STEP] [--layers]

For the last N steps (default 8; pure decode when the run generated more than N tokens) up to
STEP (default: the run's last) it prints,
per layer kind (layer name and output tensor, numbers replaced by #), averaged over layers and steps:
  tasks   tasks per layer
  dur     mean / max task duration (the task's own time: from its dependency being met to its
          signal; the wait is not in it)
  gap     from the previous layer's last task end to this layer's first task start: the hand-off
          (signal, counter propagation, the consumer's poll and its barrier)
  skew    last start - first start within the layer (workers that were still busy elsewhere)
  span    first start to last end of the layer
  end+    this layer's last end - the previous layer's last end: what the layer adds to the step's
          critical path (Σ end+ = the step, from its first start; spans overlap when a layer's
          tasks start before the previous layer ends, as deferred waits and early stages do)
and the step time (first task start to last task end, and from step to step), so that
step = Σ span + Σ gap over the layers in order. --layers prints every layer of the last step too.
The window is the run's LAST steps, its longest contexts, unless --end moves it: a decode step
grows with its position (the attention's rows; on the Qwen3-0.6B at --max-seq 288 the steps from
position 252 on run 10-14 % longer), so the last line compares the
window's steps with all of the trace's (`pk bench` reports the median over all decode steps).
"""
import re
import sys
from collections import defaultdict

from trace_events import task_events


def load(path):
    return [(e["args"]["step"], e["layer"], e["ts"], e["ts"] + e["dur"], e["dur"]) for e in task_events(path)]


def main():
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    nsteps, show_layers, path, end = 8, False, None, None
    i = 0
    while i < len(args):
        if args[i] == "--steps":
            nsteps = int(args[i + 1])
            i += 2
            continue
        if args[i] == "--end":
            end = int(args[i + 1])
            i += 2
            continue
        if args[i] == "--layers":
            show_layers = True
        else:
            path = args[i]
        i += 1
    recs = load(path)
    steps = sorted({r[0] for r in recs})
    if end is not None:
        steps = [s for s in steps if s <= end]
    use = steps[-nsteps:] if len(steps) > nsteps else steps
    by_step = defaultdict(lambda: defaultdict(list))
    for s, layer, t0, t1, d in recs:
        if s in use:
            by_step[s][layer].append((t0, t1, d))
    kinds = defaultdict(lambda: defaultdict(list))
    step_spans, step_starts = [], []
    order = []
    for s in use:
        layers = sorted(by_step[s].items(), key=lambda kv: min(t[0] for t in kv[1]))
        prev_end = None
        first = min(t[0] for _, ts in layers for t in ts)
        prev_last = first
        last = max(t[1] for _, ts in layers for t in ts)
        step_spans.append(last - first)
        step_starts.append(first)
        rows = []
        for name, ts in layers:
            st = [t[0] for t in ts]
            en = [t[1] for t in ts]
            du = [t[2] for t in ts]
            gap = min(st) - prev_end if prev_end is not None else 0.0
            prev_end = max(en)
            inc, prev_last = max(en) - prev_last, max(prev_last, max(en))
            kind = re.sub(r"\d+", "#", name.split(".", 1)[1])
            k = kinds[kind]
            k["tasks"].append(len(ts))
            k["dur"].append(sum(du) / len(du))
            k["dmax"].append(max(du))
            k["gap"].append(gap)
            k["skew"].append(max(st) - min(st))
            k["span"].append(max(en) - min(st))
            k["inc"].append(inc)
            rows.append((name, len(ts), sum(du) / len(du), max(du), gap, max(st) - min(st), max(en) - min(st)))
            if kind not in order:
                order.append(kind)
    mean = lambda v: sum(v) / len(v) if v else 0.0
    nst = len(use)
    print(f"trace {path}: steps {use[0]}..{use[-1]} ({nst} steps; all times in us)")
    print(f"{'layer kind':48s} {'n/step':>6s} {'tasks':>6s} {'dur':>7s} {'dmax':>7s} {'gap':>7s} {'skew':>7s} "
          f"{'span':>7s} {'Σspan':>8s} {'Σgap':>8s} {'end+':>7s} {'Σend+':>8s}")
    tot_span = tot_gap = tot_inc = 0.0
    for kind in order:
        k = kinds[kind]
        per_step = len(k["span"]) / nst
        ss, sg = sum(k["span"]) / nst, sum(k["gap"]) / nst
        tot_span += ss
        tot_gap += sg
        si = sum(k["inc"]) / nst
        tot_inc += si
        print(f"{kind[:48]:48s} {per_step:6.0f} {mean(k['tasks']):6.0f} {mean(k['dur']):7.2f} {mean(k['dmax']):7.2f} "
              f"{mean(k['gap']):7.2f} {mean(k['skew']):7.2f} {mean(k['span']):7.2f} {ss:8.1f} {sg:8.1f} "
              f"{mean(k['inc']):7.2f} {si:8.1f}")
    print(f"{'total':48s} {'':6s} {'':6s} {'':7s} {'':7s} {'':7s} {'':7s} {'':7s} {tot_span:8.1f} {tot_gap:8.1f} {'':7s} {tot_inc:8.1f}")
    print(f"step (first start .. last end): mean {mean(step_spans):.1f} us")
    if len(step_starts) > 1:
        d = [b - a for a, b in zip(step_starts, step_starts[1:])]
        print(f"step to step (first task start): mean {mean(d):.1f} us; between steps (prepare_next_step and "
              f"the BEGIN hand-off): {mean(d) - mean(step_spans[:-1]):.1f} us")
    starts = defaultdict(lambda: float("inf"))
    for s, _, t0, _, _ in recs:
        starts[s] = min(starts[s], t0)
    order_all = sorted(starts)
    if len(order_all) > 2:
        every = sorted(starts[b] - starts[a] for a, b in zip(order_all, order_all[1:]))
        print(f"step to step over all {len(every)} pairs of the trace: median {every[len(every) // 2]:.1f} us, "
              f"first {starts[order_all[1]] - starts[order_all[0]]:.1f}, last {starts[order_all[-1]] - starts[order_all[-2]]:.1f} "
              f"(the window above is the last {nst})")
    if show_layers:
        print(f"\nlayers of step {use[-1]}:")
        for r in rows:
            print(f"{r[0][:48]:48s} {r[1]:5d} {r[2]:7.2f} {r[3]:7.2f} {r[4]:7.2f} {r[5]:7.2f} {r[6]:7.2f}")


if __name__ == "__main__":
    main()
