#!/usr/bin/env python3
"""ncu_footprint.py — how much of a kernel's code its decode steps execute, from two Nsight Compute
SASS source pages: the instruction-cache question of docs/PERF.md (session 23: code past what an
SM's instruction caches hold is fetched again every layer, ~100 ns per KB; session 25 measured it).

    # on the GPU machine: the timed launch (pk bench's second) of two runs that differ only in --gen
    for g in 16 48; do
      ncu -k regex:pk_gen_kernel --launch-skip 1 -c 1 --section SourceCounters -f -o /tmp/p$g \\
          build/pk bench --backend cuda --threads 132 --context 160 --max-seq 288 --gen $g --model DIR
      ncu -i /tmp/p$g.ncu-rep --page source --csv --print-source sass > s$g.csv
    done
    # anywhere:
    python3 bench/ncu_footprint.py s16.csv s48.csv --steps 32 [--layers 28]

One launch runs the prefill and every decode step, and prefill and decode share code, so one
profile cannot say which code a decode step runs. The difference of two can: an instruction whose
warp-level execution count grew between the runs is decode code, and the growth over the extra
steps is its executions per step. Printed per subroutine (the kernel's SASS holds its __noinline__
callees as subroutines; they are split at the CALL targets and named by how often they are called
and their size): the code listed, the decode code, the 128-byte lines it touches, its warp
instructions per step; then the decode code by executions per step (a layer's own code — its
case of the dispatch switch — runs once per task per warp: 1024 times per step on a 128-task
layer of 8 warps), and the total.
"""
import argparse
import bisect
import collections
import csv


def load(path):
    """[(address, executed, sass)] of one source page, and the CALL targets in it."""
    rows, calls, hdr = [], collections.Counter(), None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if r and r[0] == "Address":
                hdr = r
                continue
            if not hdr or len(r) < len(hdr) or not r[0].startswith("0x"):
                continue
            d = dict(zip(hdr, r))
            src = d["Source"].strip()
            rows.append((int(r[0], 16), int(d["Instructions Executed"] or 0), src))
            if src.startswith("CALL.REL") or src.startswith("CALL.ABS"):
                calls[int(src.split()[-1].rstrip(";"), 16)] += 1
    if not rows:
        raise SystemExit(f"ncu_footprint: no SASS rows (Address, Source, Instructions Executed) in {path}")
    return rows, calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("short")
    ap.add_argument("long")
    ap.add_argument("--steps", type=int, required=True, help="decode steps the long run has beyond the short one")
    a = ap.parse_args()
    (ra, calls), (rb, _) = load(a.short), load(a.long)
    if len(ra) != len(rb):
        raise SystemExit("ncu_footprint: the two profiles list different code (not the same kernel?)")
    base, base2 = ra[0][0], rb[0][0]  # each run loads the kernel at its own address
    starts = sorted({0} | {t - base for t in calls if t >= base})
    sub = collections.defaultdict(lambda: {"n": 0, "dec": 0, "lines": set(), "per_step": 0.0})
    by_rate = collections.Counter()
    all_lines = set()
    for (addr, e1, _), (addr2, e2, _) in zip(ra, rb):
        off = addr - base
        if addr2 - base2 != off:
            raise SystemExit("ncu_footprint: the two profiles' code differs")
        s = sub[starts[bisect.bisect_right(starts, off) - 1]]
        s["n"] += 1
        d = (e2 - e1) / a.steps
        if d > 0:
            s["dec"] += 1
            s["lines"].add(off // 128)
            s["per_step"] += d
            all_lines.add(off // 128)
            by_rate[round(d)] += 1
    print(f"{'subroutine':>10s} {'calls':>5s} {'size KB':>8s} {'decode KB':>9s} {'lines KB':>8s} {'warp inst/step':>14s}")
    tot_n = tot_d = 0
    for st in starts:
        s = sub[st]
        tot_n += s["n"]
        tot_d += s["dec"]
        name = "kernel" if st == 0 else f"+{st:x}"
        print(f"{name:>10s} {calls.get(st + base, 0):5d} {s['n'] * 16 / 1024:8.1f} {s['dec'] * 16 / 1024:9.1f} "
              f"{len(s['lines']) * 128 / 1024:8.1f} {s['per_step']:14.0f}")
    print(f"{'all':>10s} {'':5s} {tot_n * 16 / 1024:8.1f} {tot_d * 16 / 1024:9.1f} {len(all_lines) * 128 / 1024:8.1f}")
    print("decode code by executions per step (KB):")
    for rate, n in sorted(by_rate.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {rate:>9d} x: {n * 16 / 1024:7.1f}")


if __name__ == "__main__":
    main()
