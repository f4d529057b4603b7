#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ncu_source.py — where a kernel's warps stall, per CUDA source line, from Nsight Compute's source page.

    # on the GPU machine (ncu is there, not on the build machine):
    ncu -k regex:pk_gen_kernel -c 1 --section SourceCounters --section WarpStateStats -f -o /tmp/p \\
        build/pk bench --backend cuda --threads 132 --context 160 --max-seq 288 --gen 32 --model DIR
    ncu -i /tmp/p.ncu-rep --page source --csv --print-source cuda,sass > cs.csv
    # anywhere:
    python3 bench/ncu_source.py cs.csv [--top N]

Prints the stall reasons over the whole kernel (share of the warp stall samples), the samples per
source file, and the top N source lines with their three largest stall reasons. The persistent
kernel's profile covers the whole launch (prefill steps and the LM head too), and a sample is a
warp's state, not the critical path: a warp waiting at a barrier while thread 0 polls counts as
"barrier". Line numbers are those of the files pk compiled (the kernel cache folder's copies, the
same as src/ for the commit that built it).
"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    hdr, cur, lines = None, None, []
    with open(a.csv, newline="") as f:
        for r in csv.reader(f):
            if not r:
                continue
            if r[0] == "File Path":
                cur = r[1]
            elif r[0] == "Line No":
                hdr = r
            elif hdr and r[0] and r[0] != "Function Name":
                d = dict(zip(hdr, r))
                try:
                    samples = int(r[hdr.index("Warp Stall Sampling (All Samples)")])
                except (ValueError, IndexError):
                    continue
                lines.append((samples, cur.split("/")[-1], int(r[0]), d))
    total = sum(s for s, _, _, _ in lines)
    if not total:
        raise SystemExit("ncu_source: no stall samples in " + a.csv)
    keys = [k for k in hdr if k.startswith("stall_") and "Not Issued" not in k]
    reasons, files = collections.Counter(), collections.Counter()
    for s, f, _, d in lines:
        files[f] += s
        for k in keys:
            if d.get(k, "").isdigit():
                reasons[k[6:]] += int(d[k])
    rs = sum(reasons.values()) or 1
    print("stall reasons: " + ", ".join(f"{k} {v / rs * 100:.1f}%" for k, v in reasons.most_common(10)))
    print("samples per file: " + ", ".join(f"{f} {s / total * 100:.1f}%" for f, s in files.most_common(10)))
    for s, f, line, d in sorted(lines, key=lambda t: -t[0])[:a.top]:
        top = sorted(((int(d[k]) if d.get(k, "").isdigit() else 0, k[6:]) for k in keys), reverse=True)[:3]
        print(f"{s / total * 100:6.2f}%  {f}:{line}  " + " ".join(f"{n} {v}" for v, n in top if v))


if __name__ == "__main__":
    main()
