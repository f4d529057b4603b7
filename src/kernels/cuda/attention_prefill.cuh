// SPDX-License-Identifier: Apache-2.0
/* attention_prefill.cuh — phase 3 of PK_TASK_ATTENTION(_PARTIAL) (attention.cuh) for steps of more
 * than one row, on tensor cores in the flash-attention manner (mma.sync m16n8k16, bf16 in, fp32
 * accumulate). Phase A (K / V into the cache) has run and every row's K / V is visible.
 *
 * A q-row is (token t, query head h of KV head g): a token's G heads are G q-rows sharing its
 * position. A Q block is up to PK_APF_QROWS q-rows of consecutive tokens of one request (it ends
 * where the request changes), h fastest; warp w takes its q-rows [16 w, 16 w + 16).
 * With nqsplit > 1 the task takes only head g's Q blocks qsplit, qsplit + nqsplit, ... (steps of
 * many rows: the Q blocks spread over a group's tasks instead of the KV length).
 *  1. warp w rotates (RoPE after qk-norm, attention.cuh's pk_att_head: bf16 values) its q-rows
 *     into Qs [QROWS][LD] bf16 and their positions into qpos_s; a row outside the page table
 *     gets position -1 (it sees nothing: zeros out, or (0, -inf, 0) for a partial);
 *  2. the warp's Q fragments (ldmatrix) stay in registers;
 *  3. per block of 32 positions of the split (block b in split b mod nsplit) up to the Q block's
 *     largest position, two blocks in flight: block i + 1's page-table slots, then (after the
 *     barrier that makes block i's K / V rows visible) its K and V rows into the other of Ks, Vs
 *     [2][32][LD] (cp.async) while block i is computed: S = Q · K^T (16 × 32 per warp), scaled
 *     into the log2 domain, positions past a row's own masked to -inf; online softmax per row
 *     (max over the quad's lanes, alpha =
 *     2^(m_old - m_new), P = 2^(s - m_new) rounded to bf16 as the A operand of O += P · V, V read
 *     with ldmatrix.trans);
 *  4. l summed over the quad; out = bf16(O / l), or (O, m · ln 2, l) into the partial.
 * A row's arithmetic is its own (the mma's per-element sums, its softmax state, the same blocks
 * in the same order; a block past its position adds exact zeros), so its result does not depend
 * on the other rows of the step. It differs from the CPU's two-pass fp32 softmax by rounding
 * (P in bf16; bf16 tolerance).
 * Shared memory (after attention.cuh's PK_ATT_HDR): qpos_s [QROWS] i32, slot_s [2][32] i64,
 * Qs [QROWS][LD], Ks [2][32][LD], Vs [2][32][LD] bf16, LD = D + 8 (ldmatrix rows 16 bytes apart in
 * bank terms). Needs D % 16 == 0, D <= 64 · NP, G <= QROWS (pk_att_prefill_ok).
 */
#ifndef PK_CUDA_ATTENTION_PREFILL_CUH
#define PK_CUDA_ATTENTION_PREFILL_CUH

#include "kernels/cuda/mma.cuh"

#define PK_APF_QROWS (16 * PK_DEV_WARPS) /* q-rows of a Q block: 16 per warp */
#define PK_APF_KB 32                     /* positions per block (= PK_ATTN_SPLIT_BLOCK) */
static_assert(PK_APF_KB == PK_ATTN_SPLIT_BLOCK, "a block is one split block");

__device__ __forceinline__ int pk_apf_smem(int D) {
    const int ld = D + 8;
    return PK_ATT_HDR + PK_APF_QROWS * 4 + 2 * PK_APF_KB * 8 + (PK_APF_QROWS + 4 * PK_APF_KB) * ld * 2;
}

/* Whether the tensor-core path takes a layer of head size D and G query heads per KV head. */
template <int NP>
__device__ __forceinline__ bool pk_att_prefill_ok(int D, int G) {
    return D % 16 == 0 && D <= 64 * NP && G <= PK_APF_QROWS && pk_apf_smem(D) <= PK_CUDA_SMEM_BYTES;
}

__device__ __forceinline__ uint32_t pk_apf_pack(float lo, float hi) {
    return pk_dev_pack2(pk_dev_f32_to_bf16(lo), pk_dev_f32_to_bf16(hi));
}

/* Phase 3 (header) for KV heads [kv0, kv0 + nkv), split `split` of `nsplit`. out / part as
 * pk_dev_attention_split's. Whole CTA. */
template <int NP>
__device__ inline void pk_att_prefill(const pk_layer_params *p, const float *inv, const pk_attn_step *s, int kv0,
                                      int nkv, int split, int nsplit, const pk_bf16 *qkv, int64_t qkv_stride,
                                      const pk_bf16 *k_cache, const pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                      pk_bf16 *out, int64_t out_stride, float *part, int64_t part_stride,
                                      char *smem, int qsplit = 0, int nqsplit = 1) {
    constexpr int DM = 64 * NP;           /* the largest D of this instance */
    constexpr int KS = DM / 16, NT = DM / 8; /* k steps of S, n8 tiles of O */
    const int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads, G = Hq / Hkv, half = D / 2;
    const int LD = D + 8, n_tok = s->n_tok;
    const int64_t group_cols = (int64_t)(G + 2) * D;
    const float eps = p->qk_norm_eps;
    const float scale2 = 1.4426950408889634f / sqrtf((float)D); /* scores into the log2 domain */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int *qpos_s = (int *)(smem + PK_ATT_HDR);                                /* [QROWS] */
    int64_t *slot_s = (int64_t *)(qpos_s + PK_APF_QROWS);                   /* [2][KB] */
    pk_bf16 *Qs = (pk_bf16 *)(slot_s + 2 * PK_APF_KB);                      /* [QROWS][LD] */
    pk_bf16 *Ks = Qs + PK_APF_QROWS * LD, *Vs = Ks + 2 * PK_APF_KB * LD;    /* [2][KB][LD] each */
    __shared__ int blk_s[2]; /* the Q block's token end and largest position */
    const bool vec = pk_dev_aligned16(k_cache) && pk_dev_aligned16(v_cache); /* D % 8 == 0: rows aligned */
    const int per_block = PK_APF_QROWS / G; /* tokens a Q block holds at most */

    for (int g = kv0; g < kv0 + nkv; g++) {
        int qb = 0; /* Q blocks of head g so far: block qb is this task's when qb % nqsplit == qsplit */
        for (int ta = 0; ta < n_tok;) {
            /* 1. the block's tokens [ta, tb): up to per_block, ending where the request changes (the
             * rows' requests loaded together, the first change found by a shared minimum) */
            if (threadIdx.x == 0) blk_s[0] = ta + per_block < n_tok ? ta + per_block : n_tok;
            pk_cta_sync();
            const int req0 = pk_dev_ldcg_i32(s->token_req + ta);
            for (int i = 1 + threadIdx.x; i < per_block && ta + i < n_tok; i += PK_CUDA_THREADS)
                if (pk_dev_ldcg_i32(s->token_req + ta + i) != req0) atomicMin(&blk_s[0], ta + i);
            pk_cta_sync();
            const int tb = blk_s[0], nrows = (tb - ta) * G;
            if (qb++ % nqsplit != qsplit) { /* another task's block */
                pk_cta_sync(); /* everyone has read blk_s */
                ta = tb;
                continue;
            }
            int maxpos = -1;
            for (int i = warp; i < (tb - ta); i += PK_DEV_WARPS) { /* warp per token: validity, q heads */
                const int t = ta + i;
                int req, pos;
                const bool valid = pk_att_row_valid(s, t, lane, &req, &pos);
                float cs[NP], sn[NP];
                if (valid) pk_att_cos_sin<NP>(inv, half, pos, lane, cs, sn);
                for (int h = 0; h < G; h++) {
                    pk_bf16 *qrow = Qs + (i * G + h) * LD;
                    if (!valid) {
                        for (int d = lane; d < D; d += 32) qrow[d] = (pk_bf16)0;
                    } else {
                        float ya[NP], yb[NP];
                        pk_att_head<NP>(qkv + t * qkv_stride + g * group_cols + (int64_t)h * D, q_norm, eps, cs, sn, D,
                                        lane, ya, yb);
#pragma unroll
                        for (int ii = 0; ii < NP; ii++) {
                            const int d = lane + 32 * ii;
                            if (d < half) {
                                qrow[d] = pk_dev_f32_to_bf16(ya[ii]);
                                qrow[d + half] = pk_dev_f32_to_bf16(yb[ii]);
                            }
                        }
                    }
                    if (lane == 0) qpos_s[i * G + h] = valid ? pos : -1;
                }
            }
            for (int i = nrows + threadIdx.x; i < PK_APF_QROWS; i += PK_CUDA_THREADS) qpos_s[i] = -1;
            pk_cta_sync();
            if (threadIdx.x == 0) {
                int mp = -1;
                for (int i = 0; i < nrows; i++) mp = qpos_s[i] > mp ? qpos_s[i] : mp;
                blk_s[1] = mp;
            }
            pk_cta_sync();
            maxpos = blk_s[1];

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

            /* 3. the split's blocks up to the Q block's largest position, in two stages: block i + 1's
             * page-table slots are looked up while block i's copies land, and its K / V copies go
             * out after the iteration's one barrier, before block i's math (the barrier also says
             * every warp is done with block i - 1, whose buffers block i + 1 takes) */
            const int jstep = PK_APF_KB * nsplit, nch = D / 8; /* nch: 16-byte chunks a row */
            auto lookup = [&](int jb, int buf) { /* block jb's slots (-1: past maxpos) */
                if (threadIdx.x < PK_APF_KB) {
                    const int j = jb + threadIdx.x;
                    slot_s[buf * PK_APF_KB + threadIdx.x] = j <= maxpos ? pk_att_slot(s, req0, j) : -1;
                }
            };
            auto issue = [&](int buf) { /* the copies of the block whose slots are in buffer buf */
                for (int e = threadIdx.x; e < 2 * PK_APF_KB * nch; e += PK_CUDA_THREADS) {
                    const int which = e / (PK_APF_KB * nch), r = (e / nch) % PK_APF_KB, c = 8 * (e % nch);
                    pk_bf16 *dst = (which ? Vs : Ks) + (buf * PK_APF_KB + r) * LD + c;
                    const int64_t slot = slot_s[buf * PK_APF_KB + r];
                    if (slot < 0) {
                        *(uint4 *)dst = make_uint4(0, 0, 0, 0);
                        continue;
                    }
                    const pk_bf16 *src = (which ? v_cache : k_cache) + (slot * Hkv + g) * D + c;
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
            int jb = PK_APF_KB * split;
            if (jb <= maxpos) lookup(jb, 0);
            pk_cta_sync();
            if (jb <= maxpos) issue(0);
            for (int buf = 0; jb <= maxpos; jb += jstep, buf ^= 1) {
                if (jb + jstep <= maxpos) lookup(jb + jstep, buf ^ 1);
                asm volatile("cp.async.wait_all;" ::: "memory"); /* block jb's copies */
                pk_cta_sync();
                if (jb + jstep <= maxpos) issue(buf ^ 1);
                const pk_bf16 *Kb = Ks + buf * PK_APF_KB * LD, *Vb = Vs + buf * PK_APF_KB * LD;
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
            pk_cta_sync(); /* every warp is done with the blocks' buffers (no copy is left in flight) */

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
                    pk_bf16 *orow = out ? out + t * out_stride + ((int64_t)g * G + h) * D : nullptr;
                    float *prow = part ? part + t * part_stride + ((int64_t)(g - kv0) * G + h) * (D + 2) : nullptr;
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
            pk_cta_sync(); /* Qs and qpos_s are the next block's */
            ta = tb;
        }
    }
}

#endif /* PK_CUDA_ATTENTION_PREFILL_CUH */
