// SPDX-License-Identifier: Apache-2.0
/* attention_prefill.cuh — phase 3 of PK_TASK_ATTENTION(_PARTIAL) (attention.cuh) for steps of more
 * than one row, on tensor cores in the flash-attention manner (mma.sync m16n8k16, bf16 in, fp32
 * accumulate). Phase A (K / V into the cache) has run and every row's K / V is visible.
 *
 * A q-row is (token t, query head h of KV head g): a token's G heads are G q-rows sharing its
 * position. A Q block is up to PK_APF_QROWS q-rows of consecutive tokens of one request (it ends
 * where the request changes), h fastest; warp w takes its q-rows [16 w, 16 w + 16).
 * With nqsplit > 1 the task takes only head g's Q blocks qsplit, qsplit + nqsplit, ... (steps of
 * many rows: the Q blocks spread over a group's tasks instead of the KV length). With a fold
 * (pk_att_fold: steps whose Q blocks fill at most half the group's tasks) two tasks share each Q
 * block, split (0 or 1) of the two taking every other block of positions: each writes its (O, m,
 * l) per q-row into the fold's partials, and the block's second finisher folds both into out.
 *  1. the request's first unmapped page (all threads, one round trip); a thread per q-row puts
 *     its position into qpos_s, -1 for a row outside the page table (it sees nothing: zeros out,
 *     or (0, -inf, 0) for a partial); a warp per q-row, 4 in flight, rotates it (RoPE after
 *     qk-norm, attention.cuh's pk_att_head_math: bf16 values) into Qs [QROWS][LD] bf16;
 *  2. the warp's Q fragments (ldmatrix) stay in registers;
 *  3. per block of 32 positions of the split (block b in split b mod nsplit) up to the Q block's
 *     largest position, nst blocks in flight (pk_apf_nst: 5 at D 128) in stages that take Qs's
 *     place: after the barrier that makes block i's K / V rows visible, block i + nst - 1's go
 *     out (cp.async; their page-table entries were loaded one iteration earlier, into registers)
 *     while block i is computed: S = Q · K^T (16 × 32 per warp), scaled
 *     into the log2 domain, positions past a row's own masked to -inf; online softmax per row
 *     (max over the quad's lanes, alpha =
 *     2^(m_old - m_new), P = 2^(s - m_new) rounded to bf16 as the A operand of O += P · V, V read
 *     with ldmatrix.trans);
 *  4. l summed over the quad; out = bf16(O / l), or (O, m · ln 2, l) into the partial.
 * A row's arithmetic is its own (the mma's per-element sums, its softmax state, the same blocks
 * in the same order; a block past its position adds exact zeros; with a fold, the same two halves
 * folded in the same order), so its result does not depend on the other rows of the step. It
 * differs from the CPU's two-pass fp32 softmax by rounding (P in bf16; bf16 tolerance).
 * Shared memory (after attention.cuh's PK_ATT_HDR): qpos_s [QROWS] i32, slot_s [MAX_NST][32] i32,
 * then Qs [QROWS][LD] during steps 1-2 and the stages [nst][K, V][32][LD] bf16 in step 3, LD = D + 8
 * (ldmatrix rows 16 bytes apart in bank terms). Needs D % 16 == 0, D <= 64 · NP, G <= QROWS,
 * nst >= 2 (pk_att_prefill_ok: D <= 256).
 */
#ifndef PK_CUDA_ATTENTION_PREFILL_CUH
#define PK_CUDA_ATTENTION_PREFILL_CUH

#include "kernels/cuda/mma.cuh"

#define PK_APF_QROWS (16 * PK_DEV_WARPS) /* q-rows of a Q block: 16 per warp */
#define PK_APF_KB 32                     /* positions per block (= PK_ATTN_SPLIT_BLOCK) */
#define PK_APF_KB_LOG2 5                 /* the K / V copies' shifts */
static_assert(PK_APF_KB == PK_ATTN_SPLIT_BLOCK && PK_APF_KB == 1 << PK_APF_KB_LOG2, "a block is one split block");

#define PK_APF_MAX_NST 6                 /* K / V stages in flight at most */

/* K / V stages of PK_APF_KB positions that fit beside the header, qpos_s and the slot ring, in
 * the area they share with Qs (2 at D 256, 5 at D 128, 6 at D 64; < 2: no tensor-core path). */
__host__ __device__ constexpr int pk_apf_nst(int D) {
    /* a stage: K and V rows [KB][D + 8] bf16 */
    const int fit = (PK_CUDA_SMEM_BYTES - PK_ATT_HDR - PK_APF_QROWS * 4 - PK_APF_MAX_NST * PK_APF_KB * 4) /
                    (4 * PK_APF_KB * (D + 8));
    return fit < PK_APF_MAX_NST ? fit : PK_APF_MAX_NST;
}
static_assert(pk_apf_nst(128) == 5 && pk_apf_nst(256) == 2, "the stages the comments count");

/* Qs [QROWS][D + 8] fits the area of two stages, so nst >= 2 is all the area needs. */
static_assert(PK_APF_QROWS <= 2 * 2 * PK_APF_KB, "Qs fits two K / V stages");

/* Whether the tensor-core path takes a layer of head size D and G query heads per KV head. */
template <int NP>
__device__ __forceinline__ bool pk_att_prefill_ok(int D, int G) {
    return D % 16 == 0 && D <= 64 * NP && G <= PK_APF_QROWS && pk_apf_nst(D) >= 2;
}

/* cp.async.wait_group n for a run-time n in [0, PK_APF_MAX_NST - 2] (the instruction takes an
 * immediate). */
__device__ __forceinline__ void pk_apf_wait_group(int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    }
}
static_assert(PK_APF_MAX_NST - 2 <= 4, "pk_apf_wait_group's cases");

__device__ __forceinline__ uint32_t pk_apf_pack(float lo, float hi) {
    return pk_dev_pack2(pk_dev_f32_to_bf16(lo), pk_dev_f32_to_bf16(hi));
}

/* A Q block's positions over two tasks (attention_prefill's fold): the partial of q-row (t, head
 * i of the task's nkv · G) of split u in {0, 1} is "virtual row" v = 2 t + u of part, at row v /
 * slots, column ((v % slots) · nkv · G + i) · (D + 2): [acc D, m · ln 2, l] fp32, as the split
 * layer's partials (the layer's partial tensor, two per row instead of S: its R · S slots hold
 * 2 · T, layers.c pk_graph_attn_kv_fold). ctrs: one per Q block of the KV head (counted from the
 * step's first row), each +2 a step that has the block: the second increment folds. */
struct pk_att_fold {
    float *part;
    int64_t part_stride;
    int slots;
    unsigned long long *ctrs;
};

__device__ __forceinline__ float *pk_att_fold_row(const pk_att_fold &f, int t, int u, int nheads, int D) {
    const int64_t v = 2 * (int64_t)t + u;
    return f.part + (v / f.slots) * f.part_stride + (v % f.slots) * (int64_t)nheads * (D + 2);
}

/* The Q block's rows [ta, tb) of KV head g once both halves are written (pk_att_combine1 over
 * the two: slots is even, so a row's half 1 is the slot after its half 0). Called by the block's
 * second finisher after its barrier: the other half's writes are read through L2. */
__device__ inline void pk_att_fold_block(const pk_att_fold &f, int ta, int tb, int g, int kv0, int nkv, int G, int D,
                                         pk_bf16 *out, int64_t out_stride) {
    const int nheads = nkv * G, per = G * D;
    for (int e = threadIdx.x; e < (tb - ta) * per; e += PK_CUDA_THREADS) {
        const int t = ta + e / per, h = e % per / D, d = e % D;
        const float *p0 = pk_att_fold_row(f, t, 0, nheads, D) + (int64_t)((g - kv0) * G + h) * (D + 2);
        out[t * out_stride + ((int64_t)g * G + h) * D + d] = pk_att_combine1<true>(p0, (int64_t)nheads * (D + 2), 2, D, d);
    }
}

/* Phase 3 (header) for KV heads [kv0, kv0 + nkv), split `split` of `nsplit`. out / part as
 * pk_dev_attention_split's. fold (nsplit 2): the Q block's halves as pk_att_fold says, out the
 * folded result. Whole CTA. */
template <int NP>
__device__ inline void pk_att_prefill(const pk_layer_params *p, const float *inv, const pk_attn_step *s, int kv0,
                                      int nkv, int split, int nsplit, const pk_bf16 *qkv, int64_t qkv_stride,
                                      const pk_bf16 *k_cache, const pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                      pk_bf16 *out, int64_t out_stride, float *part, int64_t part_stride,
                                      char *smem, int qsplit = 0, int nqsplit = 1,
                                      const pk_att_fold *fold = nullptr) {
    constexpr int DM = 64 * NP;           /* the largest D of this instance */
    constexpr int KS = DM / 16, NT = DM / 8; /* k steps of S, n8 tiles of O */
    const int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads, G = Hq / Hkv, half = D / 2;
    const int LD = D + 8, n_tok = s->n_tok;
    const int64_t group_cols = (int64_t)(G + 2) * D;
    const float eps = p->qk_norm_eps;
    const float scale2 = 1.4426950408889634f / sqrtf((float)D); /* scores into the log2 domain */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nst = pk_apf_nst(D);
    int *qpos_s = (int *)(smem + PK_ATT_HDR);                   /* [QROWS] */
    int *slot_s = qpos_s + PK_APF_QROWS;                        /* [MAX_NST][KB] */
    pk_bf16 *Qs = (pk_bf16 *)(slot_s + PK_APF_MAX_NST * PK_APF_KB); /* [QROWS][LD], then: */
    pk_bf16 *stages = Qs;                                       /* [nst][K, V][KB][LD] */
    __shared__ int blk_s[4]; /* the Q block's token end, largest position, request's first unmapped page; fold: last */
    const bool vec = pk_dev_aligned16(k_cache) && pk_dev_aligned16(v_cache); /* D % 8 == 0: rows aligned */
    const int per_block = PK_APF_QROWS / G; /* tokens a Q block holds at most */

    for (int g = kv0; g < kv0 + nkv; g++) {
        int qb = 0; /* Q blocks of head g so far: block qb is this task's when qb % nqsplit == qsplit */
        for (int ta = 0; ta < n_tok;) {
            /* 1. the block's tokens [ta, tb): up to per_block, ending where the request changes (the
             * rows' requests loaded together, the first change found by a shared minimum) */
            if (threadIdx.x == 0) {
                blk_s[0] = ta + per_block < n_tok ? ta + per_block : n_tok;
                blk_s[1] = -1;                 /* the largest valid position */
                blk_s[2] = s->pages_per_req; /* the first unmapped page of req0 */
            }
            pk_cta_sync();
            const int req0 = pk_dev_ldcg_i32(s->token_req + ta);
            for (int i = 1 + threadIdx.x; i < per_block && ta + i < n_tok; i += PK_CUDA_THREADS)
                if (pk_dev_ldcg_i32(s->token_req + ta + i) != req0) atomicMin(&blk_s[0], ta + i);
            pk_cta_sync();
            const int tb = blk_s[0], nrows = (tb - ta) * G, qbi = qb++;
            if (qbi % nqsplit != qsplit) { /* another task's block */
                pk_cta_sync(); /* everyone has read blk_s */
                ta = tb;
                continue;
            }
            /* the request's first unmapped page (pages_per_req: none), by every thread at once: a
             * row fits the page table when its position's page is below it (pk_att_row_valid's
             * test, with one round trip for the block instead of a page scan per row) */
            const int ps = s->page_size, ppr = s->pages_per_req;
            if (req0 >= 0)
                for (int i = threadIdx.x; i < ppr; i += PK_CUDA_THREADS)
                    if (pk_dev_ldcg_i32(s->page_table + (int64_t)req0 * ppr + i) < 0) atomicMin(&blk_s[2], i);
            pk_cta_sync();
            /* a thread per q-row: its position when it fits (-1: not, or past nrows); the largest */
            for (int r = threadIdx.x; r < PK_APF_QROWS; r += PK_CUDA_THREADS) {
                const int pos = r < nrows ? pk_dev_ldcg_i32(s->token_pos + ta + r / G) : -1;
                const bool ok = req0 >= 0 && pos >= 0 && ps > 0 && pos / ps < blk_s[2];
                qpos_s[r] = ok ? pos : -1;
                if (ok) atomicMax(&blk_s[1], pos);
            }
            pk_cta_sync();
            const int maxpos = blk_s[1];
            /* a warp per q-row, R in flight (every row's loads first): RoPE(qk-norm(q)) into Qs */
            constexpr int R = NP <= 2 ? 4 : 2;
            for (int rb = warp * R; rb < nrows; rb += PK_DEV_WARPS * R) {
                float a[R][NP], b[R][NP];
#pragma unroll
                for (int u = 0; u < R; u++) {
                    const int r = rb + u;
#pragma unroll
                    for (int ii = 0; ii < NP; ii++) a[u][ii] = b[u][ii] = 0.0f;
                    if (r < nrows && qpos_s[r] >= 0)
                        pk_att_head_load<NP>(qkv + (ta + r / G) * qkv_stride + g * group_cols + (int64_t)(r % G) * D, D,
                                             lane, a[u], b[u]);
                }
#pragma unroll
                for (int u = 0; u < R; u++) {
                    const int r = rb + u;
                    if (r >= nrows) break;
                    pk_bf16 *qrow = Qs + r * LD;
                    if (qpos_s[r] < 0) {
                        for (int d = lane; d < D; d += 32) qrow[d] = (pk_bf16)0;
                        continue;
                    }
                    float cs[NP], sn[NP], ya[NP], yb[NP];
                    pk_att_cos_sin<NP>(inv, half, qpos_s[r], lane, cs, sn);
                    pk_att_head_math<NP>(a[u], b[u], q_norm, eps, cs, sn, D, lane, ya, yb);
                    pk_att_put_head<NP>(qrow, ya, yb, half, lane);
                }
            }
            pk_cta_sync(); /* Qs and qpos_s are written */

            /* 2. the warp's Q fragments: lane l addresses row 16 w + l % 16, column 8 (l / 16) + 16 ks */
            const int r0 = 16 * warp;
            const bool active = r0 < nrows;
            uint32_t qf[KS][4];
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                qf[ks][0] = qf[ks][1] = qf[ks][2] = qf[ks][3] = 0;
                if (active && 16 * ks < D) pk_ldsm4<false>(qf[ks], Qs + (r0 + lane % 16) * LD + 16 * ks + (lane / 16) * 8);
            }
            /* rows r0 + lane / 4 and r0 + lane / 4 + 8: their positions and softmax state */
            const int pa = qpos_s[r0 + lane / 4 < PK_APF_QROWS ? r0 + lane / 4 : 0];
            const int pb = qpos_s[r0 + lane / 4 + 8 < PK_APF_QROWS ? r0 + lane / 4 + 8 : 0];
            float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
            float o[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

            /* 3. the split's blocks up to the Q block's largest position, nst stages in flight
             * (pk_apf_nst; they take Qs's place, whose fragments are in registers now). Block
             * i + nst - 1's copies go out after iteration i's one barrier (which also says every
             * warp is done with block i - 1, whose stage they take), before block i's math. Its
             * page-table entries were loaded into registers of warp 0 one iteration earlier and
             * are stored as slots before the barrier: no lookup's round trip on the barrier's path. */
            const int jstep = PK_APF_KB * nsplit, nch = D / 8; /* nch: 16-byte chunks a row */
            const int j0 = PK_APF_KB * split;
            const int nblk = maxpos < j0 ? 0 : (maxpos - j0) / jstep + 1;
            const int32_t *pt = s->page_table + (int64_t)(req0 > 0 ? req0 : 0) * s->pages_per_req;
            int look_j = 0, look_page = -1; /* threads < KB: the position and page entry loaded last */
            auto look_issue = [&](int k) { /* block k's page entries into registers (-1: none) */
                if (threadIdx.x < PK_APF_KB) {
                    look_j = j0 + k * jstep + threadIdx.x;
                    look_page = k < nblk && look_j <= maxpos ? pk_dev_ldcg_i32(pt + look_j / ps) : -1;
                }
            };
            auto look_store = [&](int k) { /* ... as block k's slots */
                if (threadIdx.x < PK_APF_KB)
                    slot_s[(k % nst) * PK_APF_KB + threadIdx.x] = look_page < 0 ? -1 : look_page * ps + look_j % ps;
            };
            /* nch a power of two (D 64, 128, 256): an element's row and chunk by shifts, not the
             * division sequences that took a quarter of the loop's issue slots (Nsight Compute) */
            const bool nch2 = (nch & (nch - 1)) == 0;
            const int lg = __ffs(nch) - 1;
            auto issue = [&](int k) { /* block k's copies into stage k % nst (one commit group, maybe empty) */
                pk_bf16 *Kst = stages + (k % nst) * 2 * PK_APF_KB * LD, *Vst = Kst + PK_APF_KB * LD;
                for (int e = threadIdx.x; e < (k < nblk ? 2 * PK_APF_KB * nch : 0); e += PK_CUDA_THREADS) {
                    const int which = nch2 ? e >> (lg + PK_APF_KB_LOG2) : e / (PK_APF_KB * nch);
                    const int r = nch2 ? (e >> lg) & (PK_APF_KB - 1) : (e / nch) % PK_APF_KB;
                    const int c = 8 * (nch2 ? e & (nch - 1) : e % nch);
                    pk_bf16 *dst = (which ? Vst : Kst) + r * LD + c;
                    const int slot = slot_s[(k % nst) * PK_APF_KB + r];
                    if (slot < 0) {
                        *(uint4 *)dst = make_uint4(0, 0, 0, 0);
                        continue;
                    }
                    const pk_bf16 *src = (which ? v_cache : k_cache) + ((int64_t)slot * Hkv + g) * D + c;
                    if (vec)
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                                         (uint32_t)__cvta_generic_to_shared(dst)),
                                     "l"(src)
                                     : "memory");
                    else
                        *(uint4 *)dst = pk_dev_load8_any<true>(src);
                }
                asm volatile("cp.async.commit_group;" ::: "memory");
            };
            for (int k = 0; k < nst - 1; k++) {
                look_issue(k);
                look_store(k);
            }
            look_issue(nst - 1);
            pk_cta_sync(); /* the slots are visible; every warp holds its Q fragments (Qs is free) */
            for (int k = 0; k < nst - 1; k++) issue(k);
            for (int i = 0; i < nblk; i++) {
                look_store(i + nst - 1);
                look_issue(i + nst);
                pk_apf_wait_group(nst - 2); /* block i's copies (this thread's) */
                pk_cta_sync();
                issue(i + nst - 1);
                const int jb = j0 + i * jstep;
                const pk_bf16 *Kb = stages + (i % nst) * 2 * PK_APF_KB * LD, *Vb = Kb + PK_APF_KB * LD;
                if (active) {
                    /* S: 4 n8 tiles of positions; ldmatrix x4 over Ks (rows = positions): lane l →
                     * position 16 q2 + l % 8 + (q / 2) · 8 of pair q2, dims 16 ks + (q % 2) · 8 */
                    float sc[4][4];
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
                    for (int ks = 0; ks < KS; ks++) {
                        if (16 * ks >= D) break;
#pragma unroll
                        for (int q2 = 0; q2 < 2; q2++) {
                            uint32_t kf[4];
                            const int q = lane / 8;
                            pk_ldsm4<false>(kf, Kb + (16 * q2 + lane % 8 + (q / 2) * 8) * LD + 16 * ks + (q % 2) * 8);
                            pk_mma_16816(sc[2 * q2], qf[ks], kf[0], kf[1]);
                            pk_mma_16816(sc[2 * q2 + 1], qf[ks], kf[2], kf[3]);
                        }
                    }
                    /* mask, scale, row max over the quad (lanes 4 g .. 4 g + 3 hold row g) */
                    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < 4; nt++)
#pragma unroll
                        for (int q = 0; q < 4; q++) {
                            const int j = jb + 8 * nt + 2 * (lane % 4) + (q % 2);
                            const int pr = q < 2 ? pa : pb;
                            const float v = j <= pr ? sc[nt][q] * scale2 : -INFINITY;
                            sc[nt][q] = v;
                            if (q < 2) mx_a = fmaxf(mx_a, v);
                            else mx_b = fmaxf(mx_b, v);
                        }
#pragma unroll
                    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
                        mx_a = fmaxf(mx_a, __shfl_xor_sync(PK_DEV_FULL_MASK, mx_a, o2));
                        mx_b = fmaxf(mx_b, __shfl_xor_sync(PK_DEV_FULL_MASK, mx_b, o2));
                    }
                    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
                    /* a row that has seen no position yet keeps alpha 1 and adds zeros */
                    const float al_a = mn_a == -INFINITY ? 1.0f : exp2f(m_a - mn_a);
                    const float al_b = mn_b == -INFINITY ? 1.0f : exp2f(m_b - mn_b);
                    m_a = mn_a, m_b = mn_b;
                    float ps_a = 0.0f, ps_b = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < 4; nt++)
#pragma unroll
                        for (int q = 0; q < 4; q++) {
                            const float mref = q < 2 ? mn_a : mn_b;
                            const float e = sc[nt][q] == -INFINITY ? 0.0f : exp2f(sc[nt][q] - mref);
                            sc[nt][q] = e;
                            if (q < 2) ps_a += e;
                            else ps_b += e;
                        }
                    l_a = fmaf(l_a, al_a, ps_a);
                    l_b = fmaf(l_b, al_b, ps_b);
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        o[nt][0] *= al_a, o[nt][1] *= al_a;
                        o[nt][2] *= al_b, o[nt][3] *= al_b;
                    }
                    /* O += P · V: P's two k16 steps from the S tiles (C layout = A layout), V through
                     * ldmatrix.trans (rows = positions): lane l → position 16 kp + l % 8 + (q % 2) · 8,
                     * dims 16 np + (q / 2) · 8 (b0, b1 of dim tiles 2 np and 2 np + 1) */
#pragma unroll
                    for (int kp = 0; kp < 2; kp++) {
                        const uint32_t pa[4] = {pk_apf_pack(sc[2 * kp][0], sc[2 * kp][1]),
                                                pk_apf_pack(sc[2 * kp][2], sc[2 * kp][3]),
                                                pk_apf_pack(sc[2 * kp + 1][0], sc[2 * kp + 1][1]),
                                                pk_apf_pack(sc[2 * kp + 1][2], sc[2 * kp + 1][3])};
#pragma unroll
                        for (int np = 0; np < NT / 2; np++) {
                            if (16 * np >= D) break;
                            uint32_t vf[4];
                            const int q = lane / 8;
                            pk_ldsm4<true>(vf, Vb + (16 * kp + lane % 8 + (q % 2) * 8) * LD + 16 * np + (q / 2) * 8);
                            pk_mma_16816(o[2 * np], pa, vf[0], vf[1]);
                            pk_mma_16816(o[2 * np + 1], pa, vf[2], vf[3]);
                        }
                    }
                }
            }
            asm volatile("cp.async.wait_all;" ::: "memory"); /* the empty groups past nblk */
            pk_cta_sync(); /* every warp is done with the stages (Qs of the next Q block) */

            /* 4. the rows' results */
            if (active) {
#pragma unroll
                for (int o2 = 1; o2 <= 2; o2 <<= 1) {
                    l_a += __shfl_xor_sync(PK_DEV_FULL_MASK, l_a, o2);
                    l_b += __shfl_xor_sync(PK_DEV_FULL_MASK, l_b, o2);
                }
#pragma unroll
                for (int half_i = 0; half_i < 2; half_i++) {
                    const int r = r0 + lane / 4 + 8 * half_i;
                    if (r >= nrows) continue;
                    const int t = ta + r / G, h = r % G;
                    const float l = half_i ? l_b : l_a, m = half_i ? m_b : m_a;
                    pk_bf16 *orow = out && !fold ? out + t * out_stride + ((int64_t)g * G + h) * D : nullptr;
                    float *prow = fold ? pk_att_fold_row(*fold, t, split, nkv * G, D) + ((int64_t)(g - kv0) * G + h) * (D + 2)
                                  : part ? part + t * part_stride + ((int64_t)(g - kv0) * G + h) * (D + 2) : nullptr;
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        if (8 * nt >= D) break;
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            const int d = 8 * nt + 2 * (lane % 4) + c;
                            const float num = o[nt][2 * half_i + c];
                            if (orow)
                                orow[d] = l > 0.0f ? pk_dev_f32_to_bf16(__fdiv_rn(num, l)) : (pk_bf16)0;
                            else
                                prow[d] = num;
                        }
                    }
                    if (prow && lane % 4 == 0) {
                        prow[D] = l > 0.0f ? m * 0.6931471805599453f : -INFINITY;
                        prow[D + 1] = l;
                    }
                }
            }
            if (fold) { /* the block's second finisher folds (pk_last_of's ordering, in the kernel) */
                pk_cta_sync(); /* every thread's partial writes are issued */
                if (threadIdx.x == 0) {
                    __threadfence();
                    blk_s[3] = atomicAdd(fold->ctrs + qbi, 1ull) % 2 == 1;
                    __threadfence();
                }
                pk_cta_sync();
                if (blk_s[3]) pk_att_fold_block(*fold, ta, tb, g, kv0, nkv, G, D, out, out_stride);
            }
            pk_cta_sync(); /* Qs and qpos_s are the next block's */
            ta = tb;
        }
    }
}

#endif /* PK_CUDA_ATTENTION_PREFILL_CUH */
