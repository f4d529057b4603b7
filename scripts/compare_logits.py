#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare_logits.py — two `pk generate --logits FILE` dumps of the same prompt (float32
[rows, vocab]), a reference (the CPU backend) and a test (CUDA), compared as
scripts/gpu_teacher_forcing.py compares pk with transformers:
  * the relative L2 error ||test - ref|| / ||ref|| over all logits, and the max |test - ref|;
  * argmax agreement at the decisive positions: where the reference's top-1 / top-2 gap exceeds
    4 bf16 steps of its top-1 logit (elsewhere either token is right: the backends sum in
    different orders, and bf16 rounding decides near ties).
Passes (exit 0) when the relative error is <= --max-rel (1e-2: bf16 logits), there is a decisive
position and every decisive argmax agrees; prints one line either way. Pure Python (no numpy): the dumps of pk-tiny are small.

    python3 scripts/compare_logits.py REF TEST ROWS [--max-rel 1e-2]
"""
import argparse
import array
import math
import os
import sys


def load(path, rows):
    size = os.path.getsize(path)
    if rows <= 0 or size % (4 * rows) != 0 or size == 0:
        sys.exit(f"compare_logits: {path}: {size} bytes is not {rows} rows of float32")
    a = array.array("f")
    with open(path, "rb") as f:
        a.fromfile(f, size // 4)
    if sys.byteorder != "little":
        a.byteswap()
    return a, size // (4 * rows)


def top2(row):
    i1, v1, v2 = 0, -math.inf, -math.inf
    for i, v in enumerate(row):
        if v > v1:
            i1, v1, v2 = i, v, v1
        elif v > v2:
            v2 = v
    return i1, v1, v2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("rows", type=int)
    ap.add_argument("--max-rel", type=float, default=1e-2)
    a = ap.parse_args()
    ref, vocab = load(a.ref, a.rows)
    test, vocab_t = load(a.test, a.rows)
    if vocab != vocab_t:
        sys.exit(f"compare_logits: vocab {vocab} against {vocab_t}")
    num = den = max_abs = 0.0
    decisive = agree = all_agree = 0
    for r in range(a.rows):
        rr, tr = ref[r * vocab:(r + 1) * vocab], test[r * vocab:(r + 1) * vocab]
        for x, y in zip(rr, tr):
            d = y - x
            num += d * d
            den += x * x
            max_abs = max(max_abs, abs(d))
        i1, v1, v2 = top2(rr)
        step = 2.0 ** (math.floor(math.log2(max(abs(v1), 1e-30))) - 7)
        same = top2(tr)[0] == i1
        all_agree += same
        if v1 - v2 > 4 * step:
            decisive += 1
            agree += same
    rel = math.sqrt(num / den) if den > 0 else math.inf
    ok = rel <= a.max_rel and agree == decisive and decisive > 0  # no decisive position: nothing checked
    print(f"{'passed' if ok else 'FAILED'}: relative L2 {rel:.2e} (max {a.max_rel:.0e}), max |d| {max_abs:.4f}, "
          f"argmax equal at {agree}/{decisive} decisive positions ({all_agree}/{a.rows} all)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
