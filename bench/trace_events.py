"""trace_events.py — the task events of a pk trace (Chrome trace JSON from `pk generate --trace`
or `pk bench --trace`), as the bench/trace_*.py scripts read them."""
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
