# SPDX-License-Identifier: Apache-2.0
"""trace_events.py — the task events of a pk trace (Chrome trace JSON from `pk generate --trace`
or `pk bench --trace`), as the bench/trace_*.py scripts read them."""
import collections
import json
import re


def task_events(path):
    """The trace's task events ("X" events, one per task run, args.step = the step), each with
    "layer" (its name without the task index, and the layer's output when it has one:
    "L3.rmsnorm_linear>model.layers.0.qkv") and "kind" (the layer with its numbers replaced by
    #, so that the same layer of every decoder layer is one kind)."""
    with open(path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    for e in ev:
        layer = e["name"].rsplit(".", 1)[0]
        out = e["args"].get("out")
        if out:
            layer += ">" + out
        e["layer"] = layer
        e["kind"] = re.sub(r"\d+", "#", layer)
    return ev


def previous_tasks(events):
    """Each event's predecessor on its worker (the task that worker ran just before it), keyed by
    id(event); the first task of each worker has none."""
    by_worker = collections.defaultdict(list)
    for e in events:
        by_worker[e["tid"]].append(e)
    prev = {}
    for lst in by_worker.values():
        lst.sort(key=lambda e: e["ts"])
        for p, e in zip(lst, lst[1:]):
            prev[id(e)] = p
    return prev
