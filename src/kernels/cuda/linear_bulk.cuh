/* linear_bulk.cuh — the one-row (n_tok block of 1, decode) GEMV of linear.cuh with its weight rows
 * streamed through shared memory by the Hopper bulk-copy engine (PK_LIN_BULK=1; sm_90 and later).
 * out[j] = Σ_k xn[k] · W[n0 + j, k], the same arithmetic as pk_lin_rows<XN, 1, ...>.
 *
 * Why: pk_lin_rows keeps at most 16 16-byte loads per lane in flight and drains them every column
 * round, so an SM has well under its 64 KB in flight on average and the 8B shapes reach 2.6–3.5 TB/s
 * of the 4.25 TB/s copy bandwidth. Here the copy engine keeps a ring of up to 80 KB of weight rows in
 * flight per SM without holding a register, and the warps only read shared memory.
 *
 * Design. The tile's rows go in passes of W = PK_DEV_WARPS rows (warp w owns row pass·W + w: no
 * reduction across warps, so no CTA barrier inside the loop); each row is cut into chunks of kc
 * elements (1024, or 512 where the ring is smaller, or K when K is smaller). A stage is one
 * (pass, chunk): the W row pieces [pass·W + w][chunk·kc, +kc), one cp.async.bulk each. Stage i
 * lives in ring slot i mod N with two mbarriers:
 *   full[s]  — count 1: the producer's arrive.expect_tx(bytes of the stage), then the copies'
 *              complete_tx; the consumers wait on its parity (i / N) & 1;
 *   empty[s] — count W: lane 0 of each warp arrives once its warp has read the slot (every warp,
 *              with or without a row in that pass: the count is fixed); the producer waits on it
 *              before it copies stage i + N into the slot.
 * Producer: warp 0. Lane 0 posts the stage's bytes on full[s], lanes r < W copy row piece r (each
 * lane keeps its row's address for the pass: pk_dev_rows_get once per row, not per chunk). It
 * issues stages 0 .. N-1 before the xn staging, then at the top of iteration i (i >= 1) refills the
 * slot of stage i - 1 with stage i - 1 + N, after waiting for the other warps to leave it; so
 * while the warps read stage i, stages i + 1 .. i + N - 1 are in flight or landed.
 * Consumers: all W warps. Per stage: wait full[s]; lane l adds the 16-byte vectors l, l + 32, ...
 * of its warp's row piece times the same vectors of xn (both in shared memory, consecutive lanes on
 * consecutive 16 bytes: no bank conflict), elements in order, into one fp32 accumulator; syncwarp;
 * lane 0 arrives on empty[s]. After a row's last chunk: the warp's fixed butterfly, lane 0 writes
 * out[j] (+ residual, as pk_lin_rows). kc is K or a multiple of 32 vectors, so lane l's sum runs
 * over vectors l, l + 32, ... of the whole row in order whatever kc and N are: the order depends on
 * K alone, the same bits on every run (not those of pk_lin_rows: bf16 tolerance).
 *
 * Shared memory (bytes from smem; W = 8, K a multiple of 8):
 *   [0, 2336)                      linear's header: scale_s, red_s (rmsnorm), part_s (unused here)
 *   [PK_LINB_BARS, PK_LIN_HDR)     full[PK_LINB_MAX_STAGES], empty[PK_LINB_MAX_STAGES] (8 B each)
 *   [PK_LIN_HDR, +2K)              xs: xn as bf16 (pk_lin_stage)
 *   [PK_LIN_HDR + 2K, +N·slot)     ring: N slots of W·2·kc bytes, slot = [W][kc] bf16
 * ring = min(PK_LINB_MAX_STAGES, (96 KB - 2560 - 2K) / slot) slots: K 1024..4096: 5 × 16 KB = 80 KB;
 * 12288, 14336: 8 × 8 KB = 64 KB; 25600: 5 × 8 KB = 40 KB; K < 1024: 10 slots of 16·K bytes.
 *
 * Lifetime in the persistent kernel (a CTA runs many tasks in sequence, the same shared memory):
 * thread 0 initialises the 2N mbarriers at every call, fence.mbarrier_init, and every thread
 * fences its earlier generic writes against the copy engine's (fence.proxy.async) before the
 * barrier that precedes the first copy; every issued stage is waited on by every warp, so no copy
 * is in flight at the end; then a barrier, thread 0 invalidates the mbarriers, a barrier.
 *
 * Taken (pk_lin_bulk_try) only when: sm_90+, ncols >= W, K % 8 == 0, the row stride a multiple
 * of 8 elements and every segment's base 16-byte aligned (so every row of any tile is 16-byte
 * aligned and 2K bytes long, a multiple of 16), and the ring's budget (96 KB - 2560 - 2K) is at
 * least PK_LINB_MIN_RING = 32 KB (K <= 31488). Else the caller runs pk_lin_rows. When the runtime
 * has staged the whole tile (wst, static mode) the warps read it from there with the same per-lane
 * order and no copies (pk_linb_staged_rows): the choice of path, hence every bit of the result,
 * must not depend on the mode (the GPU check wants static == dynamic, bit for bit).
 *
 * Measured on the H200 (2026-11-30, docs/PERF.md session 4): correct (harness linear 82/0,
 * cuda_e2e_quick 32/0 with it) but SLOWER, hence off by default: harness gate_up 3538 -> 2679
 * GB/s, down 3165 -> 1594, qkv 2626 -> 2275, lm_head 4082 -> 2890; Qwen3-8B 6.58 -> 8.74
 * ms/token; 0.6B 1.610 -> 1.596. The likely cause: warp 0 both produces and consumes, and waits
 * for the slowest warp to leave stage i - 1 before refilling it, so the ring runs in lockstep;
 * docs/PERF.md "Next steps" 1 lists what a second version should change.
 * Prediction (made before it ran): the 8B GEMVs at ~3.9 TB/s instead of 2.6–3.5.
 * Per token the 8B shape streams 36 × (qkv 50.3 + o 33.6 + gate_up 201.3 + down 100.7 MB) =
 * 13.9 GB of GEMV weights + lm_head 1.24 GB: at the harness's rates (qkv 2614, gate_up 3520,
 * down 3169 GB/s; o assumed as qkv) ~121 µs per layer, at 3.9 TB/s ~99 µs: ~0.8 ms/token less
 * (6.38 → ~5.6). The 0.6B tiles (32–94 KB per CTA) go out in one or two bursts of up to 80 KB
 * (the harness, dynamic mode); in static mode the runtime stages tiles up to 96 KB itself and they
 * take pk_linb_staged_rows, so there the gain is the 8B shapes' larger tiles.
 */
#ifndef PK_CUDA_LINEAR_BULK_CUH
#define PK_CUDA_LINEAR_BULK_CUH

/* Included by linear.cuh after pk_lin_args, pk_lin_stage and PK_LIN_HDR. */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PK_LINB_HAVE 1 /* cp.async.bulk, mbarrier tx-counts */
#else
#define PK_LINB_HAVE 0
#endif

#define PK_LINB_MAX_STAGES 10
#define PK_LINB_MIN_RING (32 * 1024)
#define PK_LINB_BARS (PK_LIN_HDR - 2 * 8 * PK_LINB_MAX_STAGES) /* mbarriers: header's tail */
static_assert(4 * (PK_LIN_MAXROWS + PK_LIN_MAXROWS * PK_DEV_WARPS + 2 * PK_DEV_WARPS * 32) <=
                      PK_LINB_BARS &&
                  PK_LINB_BARS % 8 == 0,
              "the bulk GEMV's mbarriers after linear's header fields");

/* ---- mbarrier and bulk-copy primitives (shared-memory addresses as 32-bit) ------------------- */

__device__ __forceinline__ void pk_dev_mbar_init(uint32_t bar, uint32_t count) {
#if PK_LINB_HAVE
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void pk_dev_mbar_inval(uint32_t bar) {
#if PK_LINB_HAVE
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
#endif
}
/* Makes this thread's mbarrier.init visible to the copy engine (async proxy). */
__device__ __forceinline__ void pk_dev_mbar_init_fence(void) {
#if PK_LINB_HAVE
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
/* Orders this thread's earlier generic shared-memory accesses before later copy-engine writes. */
__device__ __forceinline__ void pk_dev_fence_proxy_async_smem(void) {
#if PK_LINB_HAVE
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void pk_dev_mbar_arrive(uint32_t bar) {
#if PK_LINB_HAVE
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#endif
}
/* Arrives and adds `bytes` to the phase's expected transaction count. */
__device__ __forceinline__ void pk_dev_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if PK_LINB_HAVE
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
#endif
}
/* Waits until the phase of parity `parity` has completed (acquire: the copies it counted are
 * visible). try_wait suspends in hardware for a while; the loop retries. Debug builds
 * (PK_DEBUG_SPIN_LIMIT, ms) trap past the limit instead of hanging: a wrong byte count would
 * otherwise wait forever. */
__device__ __forceinline__ void pk_dev_mbar_wait(uint32_t bar, uint32_t parity) {
#if PK_LINB_HAVE
#ifdef PK_DEBUG_SPIN_LIMIT
    uint64_t t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
#endif
    for (;;) {
        uint32_t done;
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
        if (done) break;
#ifdef PK_DEBUG_SPIN_LIMIT
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > (uint64_t)(PK_DEBUG_SPIN_LIMIT) * 1000000ull) __trap();
#endif
    }
#endif
}
/* bytes (a multiple of 16, both addresses 16-byte aligned) from global src to shared dst by the
 * copy engine; completes as transactions on mbarrier bar. The weight loads' L2 policy. */
__device__ __forceinline__ void pk_dev_bulk_copy_w(uint32_t dst, const void *src, uint32_t bytes,
                                                   uint32_t bar, uint64_t policy) {
#if PK_LINB_HAVE
#if PK_WEIGHT_EVICT_FIRST
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
#else
    (void)policy;
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
#endif
#endif
}

/* ---- the plan: chunk size and ring depth, from K alone ----------------------------------------- */

typedef struct pk_linb_plan {
    int kc;         /* elements per row piece (a multiple of 8); a row's last piece may be shorter */
    int nchunks;    /* pieces per row: ceil(K / kc) */
    int nstages;    /* ring slots N (0: the bulk path does not apply) */
    int slot_bytes; /* PK_DEV_WARPS · 2 · kc */
} pk_linb_plan;

__device__ inline pk_linb_plan pk_linb_plan_for(int K) {
    pk_linb_plan p = {0, 0, 0, 0};
    const int ring = PK_CUDA_SMEM_BYTES - PK_LIN_HDR - 2 * K; /* what xs leaves */
    if (K <= 0 || K % 8 != 0 || ring < PK_LINB_MIN_RING) return p;
    /* 16 KB slots halve the per-stage waits; 8 KB ones keep >= 5 slots when xs is large */
    const int kc_max = ring >= 5 * PK_DEV_WARPS * 2 * 1024 ? 1024 : 512;
    /* kc is K or a multiple of 256 = 32 lanes · 8: lane l then reads vectors l, l + 32, ... of
     * the whole row in order whatever kc is, so the sum order depends on K alone (and the staged
     * path, pk_linb_staged_rows, matches it without chunks) */
    static_assert(512 % (32 * 8) == 0 && 1024 % (32 * 8) == 0, "chunks of whole lane rounds");
    p.kc = K < kc_max ? K : kc_max;
    p.nchunks = (K + p.kc - 1) / p.kc;
    p.slot_bytes = PK_DEV_WARPS * 2 * p.kc;
    const int n = ring / p.slot_bytes;
    p.nstages = n < PK_LINB_MAX_STAGES ? n : PK_LINB_MAX_STAGES;
    if (p.nstages < 2) p.nstages = 0;
    return p;
}

/* Every row of w is 16-byte aligned: the segments' bases are and the stride is a multiple of 8
 * elements (a misaligned segment the tile never reads also sends the tile to pk_lin_rows). */
__device__ inline bool pk_linb_rows_aligned(const pk_rows *w) {
    if (w->row_stride % 8 != 0) return false;
    for (uint32_t i = 0; i < w->nseg && i < PK_FUSE_MAX; i++)
        if (!pk_dev_aligned16(w->seg[i])) return false;
    return true;
}

/* ---- producer ---------------------------------------------------------------------------------- */

/* Warp 0's cursor: the next stage to issue. Lane r holds the address of row pass·W + r of the tile
 * for pass row_pass. */
typedef struct pk_linb_cursor {
    int pass, chunk, slot;
    int row_pass;
    const char *row;
} pk_linb_cursor;

/* Issues the cursor's stage into its slot and advances the cursor. Warp 0, all lanes; the slot is
 * free (never used, or empty[slot] waited on). */
__device__ inline void pk_linb_issue(const pk_lin_args &a, const pk_linb_plan &pl, uint32_t ring,
                                     uint32_t full, uint64_t policy, int lane, pk_linb_cursor &cur) {
    const int left = a.ncols - cur.pass * PK_DEV_WARPS, nr = left < PK_DEV_WARPS ? left : PK_DEV_WARPS;
    const int k0 = cur.chunk * pl.kc, kc = a.K - k0 < pl.kc ? a.K - k0 : pl.kc;
    const uint32_t bar = full + 8 * cur.slot;
    if (cur.row_pass != cur.pass) {
        const uint32_t row = (uint32_t)(a.n0 + cur.pass * PK_DEV_WARPS + lane);
        if (lane < nr) cur.row = (const char *)pk_dev_rows_get(a.w, row);
        cur.row_pass = cur.pass;
    }
    /* the stage's bytes first: the phase cannot complete before this arrive (count 1) in any case,
     * the syncwarp only keeps the transaction count from going negative */
    if (lane == 0) pk_dev_mbar_arrive_expect_tx(bar, (uint32_t)(nr * 2 * kc));
    __syncwarp();
    if (lane < nr)
        pk_dev_bulk_copy_w(ring + (uint32_t)(cur.slot * pl.slot_bytes + lane * 2 * pl.kc),
                           cur.row + 2 * (int64_t)k0, (uint32_t)(2 * kc), bar, policy);
    if (++cur.chunk == pl.nchunks) {
        cur.chunk = 0;
        cur.pass++;
    }
    if (++cur.slot == pl.nstages) cur.slot = 0;
}

/* ---- consumers --------------------------------------------------------------------------------- */

#define PK_LINB_U 4 /* vectors per lane loaded before the first FMA (kc 1024: one batch) */

/* acc + Σ over vectors v = lane, lane + 32, ... < nv of Σ_e x[v][e] · w[v][e] (v, then e, in
 * order). x and w: shared memory, 16-byte vectors of 8 bf16. */
__device__ __forceinline__ float pk_linb_dot(const uint4 *x, const uint4 *w, int nv, int lane,
                                             float acc) {
    for (int v0 = lane; v0 < nv; v0 += 32 * PK_LINB_U) {
        uint4 wv[PK_LINB_U], xv[PK_LINB_U];
#pragma unroll
        for (int u = 0; u < PK_LINB_U; u++) {
            const int v = v0 + 32 * u;
            wv[u] = v < nv ? w[v] : make_uint4(0, 0, 0, 0);
            xv[u] = v < nv ? x[v] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < PK_LINB_U; u++) {
            if (v0 + 32 * u >= nv) break;
            float xf[8], wf[8];
            pk_dev_unpack8(xv[u], xf);
            pk_dev_unpack8(wv[u], wf);
#pragma unroll
            for (int e = 0; e < 8; e++) acc = fmaf(xf[e], wf[e], acc);
        }
    }
    return acc;
}

/* out[t0, j] from the warp's fp32 sum, as pk_lin_rows writes it. */
__device__ __forceinline__ void pk_linb_write(const pk_lin_args &a, int t0, int j, float y) {
    const int64_t t = t0;
    if (a.residual) {
        const pk_bf16 res = pk_dev_ldcg_bf16(a.residual + t * a.res_stride + j);
        y = pk_dev_round_bf16(y) + pk_dev_bf16_to_f32(res);
    }
    a.out[t * a.out_stride + j] = pk_dev_f32_to_bf16(y);
}

/* Shared-memory addresses of the ring and its mbarriers (layout in the header). */
typedef struct pk_linb_ring {
    uint32_t full, empty; /* mbarrier arrays [PK_LINB_MAX_STAGES], 8 bytes apart */
    uint32_t slots;       /* slot s at slots + s · slot_bytes */
    const char *slots_p;  /* the same bytes as a generic pointer, for the warps' reads */
} pk_linb_ring;

/* Initialises the N slots' mbarriers and issues stages 0 .. N-1. Whole CTA (one barrier). */
__device__ inline void pk_linb_ring_start(const pk_lin_args &a, const pk_linb_plan &pl,
                                          const pk_linb_ring &r, int nst, uint64_t policy,
                                          pk_linb_cursor &cur) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < pl.nstages; s++) {
            pk_dev_mbar_init(r.full + 8 * s, 1);
            pk_dev_mbar_init(r.empty + 8 * s, PK_DEV_WARPS);
        }
        pk_dev_mbar_init_fence();
    }
    pk_dev_fence_proxy_async_smem(); /* earlier tasks' writes to the ring's bytes, before the copies */
    __syncthreads();
    if (threadIdx.x / 32 == 0)
        for (int i = 0; i < pl.nstages && i < nst; i++)
            pk_linb_issue(a, pl, r.slots, r.full, policy, threadIdx.x % 32, cur);
}

/* The loop over the nst stages (header: producer, consumers), then the mbarriers invalidated.
 * xs holds xn. Whole CTA; ends with a barrier. */
__device__ inline void pk_linb_ring_rows(const pk_lin_args &a, int t0, const pk_linb_plan &pl,
                                         const pk_linb_ring &r, int nst, uint64_t policy,
                                         pk_linb_cursor &cur, const pk_bf16 *xs) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, N = pl.nstages;
    float acc = 0.0f;
    int slot = 0, pass = 0, chunk = 0;
    uint32_t parity = 0; /* of stage i's use of its slot: (i / N) & 1 */
    for (int i = 0; i < nst; i++) {
        if (warp == 0 && i >= 1 && i - 1 + N < nst) { /* stage i-1's slot takes stage i-1+N */
            const int prev = slot == 0 ? N - 1 : slot - 1;
            pk_dev_mbar_wait(r.empty + 8 * prev, slot == 0 ? parity ^ 1u : parity);
            pk_linb_issue(a, pl, r.slots, r.full, policy, lane, cur);
        }
        pk_dev_mbar_wait(r.full + 8 * slot, parity);
        const int j = pass * PK_DEV_WARPS + warp, k0 = chunk * pl.kc;
        if (j < a.ncols) {
            const int kc = a.K - k0 < pl.kc ? a.K - k0 : pl.kc;
            const uint4 *wp = (const uint4 *)(r.slots_p + slot * pl.slot_bytes + warp * 2 * pl.kc);
            acc = pk_linb_dot((const uint4 *)(xs + k0), wp, kc / 8, lane, acc);
        }
        __syncwarp();
        if (lane == 0) pk_dev_mbar_arrive(r.empty + 8 * slot); /* the warp is done with the slot */
        if (++chunk == pl.nchunks) { /* row j is complete */
            const float y = pk_dev_warp_sum(acc);
            if (lane == 0 && j < a.ncols) pk_linb_write(a, t0, j, y);
            acc = 0.0f;
            chunk = 0;
            pass++;
        }
        if (++slot == N) {
            slot = 0;
            parity ^= 1u;
        }
    }
    __syncthreads(); /* every warp has waited on every stage: no copy in flight, no mbarrier in use */
    if (threadIdx.x == 0)
        for (int s = 0; s < N; s++) {
            pk_dev_mbar_inval(r.full + 8 * s);
            pk_dev_mbar_inval(r.empty + 8 * s);
        }
    __syncthreads(); /* the mbarriers' bytes are free for the next user */
}

/* The tile's rows from the runtime's staged copy (wst, static mode: the whole tile is in shared
 * memory already). Warp w takes rows w, w + W, ..., lane l the vectors l, l + 32, ... of the row:
 * the ring's order exactly (its chunks are multiples of 32 vectors, or whole rows), so static and
 * dynamic mode give the same bits. Whole CTA; ends with a barrier. */
__device__ inline void pk_linb_staged_rows(const pk_lin_args &a, int t0, const pk_bf16 *xs) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int j = warp; j < a.ncols; j += PK_DEV_WARPS) {
        const pk_bf16 *wr = a.wst + (int64_t)j * (int64_t)a.w->row_stride; /* [K], shared */
        const float acc = pk_linb_dot((const uint4 *)xs, (const uint4 *)wr, a.K / 8, lane, 0.0f);
        const float y = pk_dev_warp_sum(acc);
        if (lane == 0) pk_linb_write(a, t0, j, y);
    }
    __syncthreads();
}

/* Row t0 of the tile (a block of one row) through the ring, or from wst when the runtime staged
 * the whole tile (header). Whole CTA; pl from pk_linb_plan_for(a.K). */
template <int XN>
__device__ inline void pk_lin_bulk_row(const pk_lin_args &a, int t0, const pk_linb_plan &pl,
                                       char *smem) {
    float *scale_s = (float *)smem;               /* [8] */
    float *red_s = scale_s + PK_LIN_MAXROWS;      /* [8][WARPS] */
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR); /* [K] */
    const bool staged = a.wst && a.wst_rows >= a.ncols;
    const int nst = (a.ncols + PK_DEV_WARPS - 1) / PK_DEV_WARPS * pl.nchunks; /* passes × chunks */
    pk_linb_ring r;
    r.full = (uint32_t)__cvta_generic_to_shared(smem + PK_LINB_BARS);
    r.empty = r.full + 8 * PK_LINB_MAX_STAGES;
    r.slots_p = smem + PK_LIN_HDR + 2 * a.K;
    r.slots = (uint32_t)__cvta_generic_to_shared(r.slots_p);
    pk_linb_cursor cur = {0, 0, 0, -1, nullptr};
#if PK_LINB_HAVE && PK_WEIGHT_EVICT_FIRST
    const uint64_t policy = pk_dev_weight_policy();
#else
    const uint64_t policy = 0;
#endif
    if (!staged) pk_linb_ring_start(a, pl, r, nst, policy, cur); /* copies run during the staging */

    if (XN == PK_LIN_RMSNORM)
        pk_dev_rms_scales(a.x + t0 * a.x_stride, a.x_stride, 1, a.K, a.eps, scale_s, red_s);
    pk_lin_stage<XN>(a, t0, 1, 1, 0, a.K, a.K, scale_s, xs);
    __syncthreads(); /* xs is written */

    if (staged)
        pk_linb_staged_rows(a, t0, xs);
    else
        pk_linb_ring_rows(a, t0, pl, r, nst, policy, cur, xs);
}

/* Runs row t0 (a block of one) through pk_lin_bulk_row and returns true when the tile qualifies
 * (header); false, having done nothing, otherwise. The answer depends on the shapes and the
 * weight's alignment only, never on whether the runtime staged the tile, and every thread gets
 * the same one. */
template <int XN>
__device__ inline bool pk_lin_bulk_try(const pk_lin_args &a, int t0, char *smem) {
    if (!PK_LINB_HAVE || a.ncols < PK_DEV_WARPS || !pk_linb_rows_aligned(a.w)) return false;
    const pk_linb_plan pl = pk_linb_plan_for(a.K);
    if (pl.nstages == 0) return false;
    pk_lin_bulk_row<XN>(a, t0, pl, smem);
    return true;
}

#endif /* PK_CUDA_LINEAR_BULK_CUH */
