# SPDX-License-Identifier: Apache-2.0
"""Ownership: attached arrays live as long as the kernel, whatever the caller dropped; a loop of
build / compile / run / free does not grow the process; runs through meta_tensors (MPK's
offline requests), the profiler tensor, streaming and cancelling."""
import gc
import json
import os
import weakref

import numpy as np
import pytest

import pk
from conftest import TINY, pk_generate

PROMPT = [5, 6, 7, 8]


class CopyingDir:
    """pk.safetensors.Dir whose weights are fresh copies, each watched by a weakref."""

    def __init__(self):
        from pk.safetensors import open_dir
        self.st, self.refs = open_dir(TINY), []

    def bf16_weight(self, name):
        a = np.array(self.st.bf16_weight(name))  # the only reference goes to attach_input
        self.refs.append(weakref.ref(a))
        return a


def test_attached_arrays_outlive_dropped_references(demo):
    c = demo.read_config(TINY)
    k = pk.PersistentKernel(num_workers=2, max_seq_length=32, max_num_batched_requests=1, eos_token_id=-1)
    src = CopyingDir()
    demo.build(k, src, c)
    refs = src.refs
    del src
    gc.collect()
    junk = [np.full(1 << 16, 0xFFFF, np.uint16) for _ in range(64)]  # would reuse freed memory
    assert refs and all(r() is not None for r in refs), "an attached array died while the kernel lives"
    k.compile()
    assert k([PROMPT], max_new_tokens=8)[0] == pk_generate(TINY, PROMPT, 8)
    k.finalize()
    del k, junk
    gc.collect()
    assert all(r() is None for r in refs), "finalize() must release the attached arrays"


def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_build_compile_run_free_loop_does_not_grow(demo):
    def once():
        with demo.make_kernel(TINY, len(PROMPT), 4, num_workers=2) as k:
            k([PROMPT], max_new_tokens=4)
            per_kernel = k.memory()
        with pk.load(TINY, max_seq_length=16, num_workers=2) as m:
            m.generate(PROMPT, max_tokens=2)
        return per_kernel
    for _ in range(5):
        per_kernel = once()
    gc.collect()
    before = rss_kb()
    n = 40
    for _ in range(n):
        once()
    gc.collect()
    grown = rss_kb() - before
    # A leak of one kernel's workspace and KV cache (or of a weight copy) per iteration grows by n of them.
    leak_kb = (per_kernel["workspace_bytes"] + per_kernel["kv_cache_bytes"]) // 1024
    assert leak_kb * n > 4096, "the loop is too short to see a per-iteration leak"
    assert grown < 4096, f"RSS grew {grown} KB over {n} iterations (one kernel's state is {leak_kb} KB)"


def test_meta_tensors_offline_requests(demo):
    S, prompts = 24, [[1, 2, 3], [9, 8, 7, 6, 5]]
    tokens = np.zeros((2, S), np.int64)
    lengths = np.array([len(p) for p in prompts], np.int32)
    for r, p in enumerate(prompts):
        tokens[r, :len(p)] = p
    step = np.zeros(2, np.int32)
    c = demo.read_config(TINY)
    with pk.PersistentKernel(num_workers=2, max_seq_length=S, eos_token_id=-1, meta_tensors={
            "tokens": tokens, "prompt_lengths": lengths, "step": step}) as k:
        demo.build(k, __import__("pk.safetensors").safetensors.open_dir(TINY), c)
        k.compile()
        outs = k()
        assert k.finish_reasons == ["length", "length"]
    for r, p in enumerate(prompts):
        want = pk_generate(TINY, p, S - len(p))
        assert outs[r] == want
        assert tokens[r, len(p):].tolist() == want and step[r] == S - 1


def test_profiler_tensor_receives_the_trace(demo, tmp_path):
    prof = np.zeros(1 << 20, np.uint64)
    c = demo.read_config(TINY)
    with pk.PersistentKernel(num_workers=2, max_seq_length=16, profiler_tensor=prof,
                             trace_name=str(tmp_path / "run")) as k:
        demo.build(k, __import__("pk.safetensors").safetensors.open_dir(TINY), c)
        k.compile()
        k([PROMPT], max_new_tokens=3)
        trace = k.trace
    data = prof.view(np.uint8)
    assert bytes(data[:len(trace)]).decode() == trace and not data[len(trace):].any()
    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any(e.get("ph") == "X" for e in events), "no task spans in the trace"
    assert (tmp_path / "run.json").read_text() == trace
    with pytest.raises(pk.InvalidArgumentError, match="profiler_tensor"):
        pk.PersistentKernel(profiler_tensor=prof[::2])


def test_stream_and_cancel(demo):
    with demo.make_kernel(TINY, len(PROMPT), 16, num_workers=2) as k:
        full = k([PROMPT], max_new_tokens=16)[0]
        assert [t for _, t in k.stream([PROMPT], 16)] == full
        gen = k.stream([PROMPT], 16)
        first = [next(gen)[1] for _ in range(2)]
        gen.close()  # cancels the run; the kernel takes new requests afterwards
        assert first == full[:2]
        seen = []

        def stop_after_three(request, token):
            seen.append(token)
            if len(seen) == 3:
                k.cancel()
        out = k([PROMPT], max_new_tokens=16, on_token=stop_after_three)[0]
        assert k.finish_reasons == ["cancelled"] and out == full[:len(out)] and 3 <= len(out) < 16
        assert k([PROMPT], max_new_tokens=16)[0] == full
