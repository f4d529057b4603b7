// SPDX-License-Identifier: Apache-2.0
/* attention.cuh — PK_TASK_ATTENTION on the device: causal GQA attention over the paged KV cache for
 * KV heads [kv0, kv0 + nkv) of every row (pk_cpu_attention: same layouts, same rounding points).
 *
 * Phase 0: inv_freq [D/2]: the code generator's table (pk_rope_inv_freq run on the host, so the
 *   CPU's bits), or, when the caller passes NULL, threads i < D/2 compute it into shared memory
 *   (the same formula and fp32 rounding step by step, no FMA contraction; theta^e as
 *   fp32(pow(double)), the correctly rounded value glibc's powf returns); barrier.
 * Phase A: per (row, KV head) one item writes K and V to the cache and, when every row's q heads
 *   fit in shared memory (decode), G more items rotate one q head each into q_all; warps take the
 *   items round-robin, so the K / V write and the q rotations run in parallel (serially they
 *   are most of the task's time at short contexts). Lane i holds the RoPE pairs
 *   (i, i + D/2), (i + 32, i + 32 + D/2), ...; cos / sin = bf16(fp32(cos / sin(double))) of
 *   fp32(pos) · inv_freq; K (and q) are normalised (k_norm / q_norm: warp sum of squares, fixed
 *   butterfly), rotated with the CPU's bf16 rounding points; barrier (K / V of every row are in
 *   the cache before any row reads it: a prefill chunk sees its own tokens). The cache is read
 *   back through L2, as are qkv, the page table and token metadata. Steps that take the
 *   tensor-core path write K / V through pk_att_kv_rows instead (rows looked up at once, several
 *   in flight per warp; no q items: phase 3 rotates its own).
 * Phase 3 of a step of more than one row runs on tensor cores where the head size allows
 *   (attention_prefill.cuh: D % 16 == 0, D <= 64 · NP); of one row, or other head sizes:
 * Phase 3: work item = (row t, KV head g, chunk of HB <= 4 of its G query heads). The 8 warps form
 *   groups of SP warps (SP = 8 / the largest power of two <= min(8, items)); a group takes one item
 *   per round and its warp s takes the blocks of 32 positions s, s + SP, ... of 0 .. pos. Per item
 *   a warp reads its HB q heads from q_all (or, when q_all did not fit, rotates them into its own
 *   q_s, fp32), then per block: lane l scores position
 *   32b + l against all HB heads (full D dot product in fp32, 16-byte K loads, 8 in flight),
 *   online softmax per head (block max by butterfly, running max m, rescale alpha =
 *   exp(m_old - m_new), lane-local running sums), the block's e_j go to e_s; then Σ_j e_j · v_j is
 *   folded into acc_s = acc_s · alpha + Σ: for D / 8 dividing 32 by pk_att_pv_vec (16-byte V loads,
 *   8 in flight, lanes split dims and positions), otherwise lane l takes dims (2l, 2l + 1) + 64·i
 *   (4-byte V loads, j in order).
 *   At the end the lane sums are added by butterfly. SP = 1: out = bf16(acc_s / l). SP > 1: each
 *   warp leaves (m, l, acc_s) in shared memory; barrier; the group combines its warps in order
 *   (factors exp(m_s - M)) and writes out; barrier. All orders are fixed by the shapes: the same
 *   bits on every run; the CPU's two-pass softmax agrees to rounding (bf16 tolerance).
 * Shared memory: [0, 1024) inv_freq [D/2] f32; per warp, at 1024 + warp · WB: q_s [HB][D],
 *   acc_s [HB][D], e_s [HB][32], m_s [HB], l_s [HB] (f32), slot_s [32] i32; then, when it fits,
 *   q_all [n_tok][nkv][G][D] f32.
 * Rows whose request / position lie outside the page table or whose pages are unmapped get zeros
 * and write no cache; an invalid layer (D odd, > 512, heads not divisible) writes nothing.
 * Split over the KV length (pk_dev_attention_split, PK_TASK_ATTENTION_PARTIAL): phase A writes the
 * K / V of the rows whose position is in the split, phase 3 runs over the split's blocks of 32
 * positions (block b in split b mod nsplit) and leaves (acc, m, l) per head unnormalised;
 * pk_dev_attention_combine folds the splits. No ordering between a layer's tasks is needed: a
 * task reads only cache rows it or an earlier step wrote.
 */
#ifndef PK_CUDA_ATTENTION_CUH
#define PK_CUDA_ATTENTION_CUH

#include "kernels/cuda/rows.cuh"
#include "pk.h"

#define PK_ATT_MAX_D 512 /* = PK_CPU_ATTN_MAX_HEAD_DIM */
#define PK_ATT_HB_MAX 4  /* query heads a warp carries at once (register arrays) */
#define PK_ATT_PAIRS (PK_ATT_MAX_D / 2 / 32) /* RoPE pairs per lane at the largest D */
#define PK_ATT_HDR 1024  /* inv_freq [D/2] f32 */


/* Bytes of one warp's shared-memory area for HB heads of dimension D. */
__device__ __forceinline__ int pk_att_warp_bytes(int HB, int D) {
    return (4 * (2 * HB * D + 32 * HB + 2 * HB + 32) + 15) / 16 * 16;
}

/* inv_freq[i] of pk_rope_inv_freq, operation by operation in fp32 (the _rn intrinsics keep nvcc
 * from contracting a product and a sum into one FMA, which the CPU never does). */
__device__ inline float pk_dev_rope_inv_freq1(const pk_layer_params *p, int i) {
    float e = __fdiv_rn((float)(2 * i), (float)p->head_dim);
    float f = __fdiv_rn(1.0f, (float)pow((double)p->rope_theta, (double)e));
    if (p->rope_scaling != PK_ROPE_SCALING_LLAMA3) return f;
    const double two_pi = 6.283185307179586476925286766559;
    float factor = p->rope_factor, low = p->rope_low_freq_factor, high = p->rope_high_freq_factor;
    float old_len = (float)p->rope_original_max_position;
    float low_freq_wavelen = (float)((double)p->rope_original_max_position / low);
    float high_freq_wavelen = (float)((double)p->rope_original_max_position / high);
    float band = (float)((double)high - (double)low);
    float wavelen = __fmul_rn(__fdiv_rn(1.0f, f), (float)two_pi);
    float scaled = wavelen > low_freq_wavelen ? __fdiv_rn(f, factor) : f;
    if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
        float smooth =
            __fdiv_rn(__fsub_rn(__fmul_rn(__fdiv_rn(1.0f, wavelen), old_len), low), band);
        scaled = __fadd_rn(__fdiv_rn(__fmul_rn(__fsub_rn(1.0f, smooth), scaled), factor),
                           __fmul_rn(smooth, scaled));
    }
    return scaled;
}

/* Whether row t fits the page table (pages 0 .. pos / page_size mapped); its request and position.
 * Whole warp (the result is the same in every lane). */
__device__ inline bool pk_att_row_valid(const pk_attn_step *s, int t, int lane, int *req_out,
                                        int *pos_out) {
    int req = pk_dev_ldcg_i32(s->token_req + t), pos = pk_dev_ldcg_i32(s->token_pos + t);
    *req_out = req;
    *pos_out = pos;
    if (req < 0 || pos < 0 || s->page_size <= 0 || pos / s->page_size >= s->pages_per_req)
        return false;
    const int32_t *pt = s->page_table + (int64_t)req * s->pages_per_req;
    bool bad = false;
    for (int i = lane; i <= pos / s->page_size; i += 32) bad = bad || pk_dev_ldcg_i32(pt + i) < 0;
    return !__any_sync(PK_DEV_FULL_MASK, bad);
}

/* Cache slot (page · page_size + offset) of position pos of request req (a valid row's). */
__device__ __forceinline__ int64_t pk_att_slot(const pk_attn_step *s, int req, int pos) {
    const int32_t *pt = s->page_table + (int64_t)req * s->pages_per_req;
    int32_t page = pk_dev_ldcg_i32(pt + pos / s->page_size);
    return (int64_t)page * s->page_size + pos % s->page_size;
}

/* cs[i], sn[i]: bf16 cos / sin of this lane's pairs i = lane + 32·ii < half at position pos.
 * NP (pairs per lane, >= D / 64) is a template parameter everywhere: unrolled loops of the largest
 * head size (8 pairs, D 512) made the code 4x longer than D 128 needs, and in the persistent kernel,
 * where the attention code runs once per layer between other kinds, its instruction fetches
 * come cold. */
template <int NP>
__device__ __forceinline__ void pk_att_cos_sin(const float *inv_freq_s, int half, int pos, int lane,
                                               float *cs, float *sn) {
#pragma unroll
    for (int ii = 0; ii < NP; ii++) {
        int i = lane + 32 * ii;
        cs[ii] = sn[ii] = 0.0f;
        if (i < half) {
            float a = (float)pos * inv_freq_s[i];
            double sd, cd;
            sincos((double)a, &sd, &cd);
            cs[ii] = pk_dev_round_bf16((float)cd);
            sn[ii] = pk_dev_round_bf16((float)sd);
        }
    }
}

/* This lane's elements of one head vector x [D]: a[ii] = x[i], b[ii] = x[i + half], i = lane + 32·ii
 * (0 past half), as fp32. Split from pk_att_head so that callers with several rows in flight
 * issue every row's loads before the first row's arithmetic. */
template <int NP>
__device__ __forceinline__ void pk_att_head_load(const pk_bf16 *x, int D, int lane, float *a, float *b) {
    const int half = D / 2;
#pragma unroll
    for (int ii = 0; ii < NP; ii++) {
        int i = lane + 32 * ii;
        a[ii] = b[ii] = 0.0f;
        if (i < half) {
            a[ii] = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(x + i));
            b[ii] = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(x + i + half));
        }
    }
}

/* y = RoPE(rmsnorm(x) · norm_w) from x's elements a, b (pk_att_head_load; no norm when norm_w is
 * NULL), as fp32 holding bf16 values, this lane's pairs: ya[ii] = y[i], yb[ii] = y[i + half],
 * i = lane + 32·ii. NSM: norm_w is in shared memory (the decode path stages it before the wait).
 * Whole warp. */
template <int NP, bool NSM = false>
__device__ __forceinline__ void pk_att_head_math(float *a, float *b, const pk_bf16 *norm_w, float eps,
                                                 const float *cs, const float *sn, int D, int lane, float *ya,
                                                 float *yb) {
    const int half = D / 2;
    float ss = 0.0f;
#pragma unroll
    for (int ii = 0; ii < NP; ii++) {
        ss = fmaf(a[ii], a[ii], ss);
        ss = fmaf(b[ii], b[ii], ss);
    }
    if (norm_w) {
        float scale = 1.0f / sqrtf(pk_dev_warp_sum(ss) / (float)D + eps);
#pragma unroll
        for (int ii = 0; ii < NP; ii++) {
            int i = lane + 32 * ii;
            if (i < half) {
                const pk_bf16 wa = NSM ? norm_w[i] : pk_dev_ldw_bf16(norm_w + i);
                const pk_bf16 wb = NSM ? norm_w[i + half] : pk_dev_ldw_bf16(norm_w + i + half);
                a[ii] = pk_dev_round_bf16(pk_dev_round_bf16(a[ii] * scale) * pk_dev_bf16_to_f32(wa));
                b[ii] = pk_dev_round_bf16(pk_dev_round_bf16(b[ii] * scale) * pk_dev_bf16_to_f32(wb));
            }
        }
    }
#pragma unroll
    for (int ii = 0; ii < NP; ii++) {
        ya[ii] = pk_dev_round_bf16(pk_dev_round_bf16(a[ii] * cs[ii]) -
                                   pk_dev_round_bf16(b[ii] * sn[ii]));
        yb[ii] = pk_dev_round_bf16(pk_dev_round_bf16(b[ii] * cs[ii]) +
                                   pk_dev_round_bf16(a[ii] * sn[ii]));
    }
}

/* y = RoPE(rmsnorm(x) · norm_w) of one head vector x [D]: pk_att_head_load, then
 * pk_att_head_math. Whole warp. */
template <int NP, bool NSM = false>
__device__ __forceinline__ void pk_att_head(const pk_bf16 *x, const pk_bf16 *norm_w, float eps,
                                            const float *cs, const float *sn, int D, int lane,
                                            float *ya, float *yb) {
    float a[NP], b[NP];
    pk_att_head_load<NP>(x, D, lane, a, b);
    pk_att_head_math<NP, NSM>(a, b, norm_w, eps, cs, sn, D, lane, ya, yb);
}

/* row[i] = bf16(ya[ii]), row[i + half] = bf16(yb[ii]) for this lane's pairs i = lane + 32·ii
 * (pk_att_head's output as a bf16 row: a K cache row, a Q row of the tensor-core path). */
template <int NP>
__device__ __forceinline__ void pk_att_put_head(pk_bf16 *row, const float *ya, const float *yb, int half, int lane) {
#pragma unroll
    for (int ii = 0; ii < NP; ii++) {
        const int i = lane + 32 * ii;
        if (i < half) {
            row[i] = pk_dev_f32_to_bf16(ya[ii]);
            row[i + half] = pk_dev_f32_to_bf16(yb[ii]);
        }
    }
}

/* sc[h] += q_s[h] · k for h < nh, k one cache row [D]: the lane's own position. The vector path
 * issues the row's loads 8 at a time (one L2 round trip per 128 bytes, not one per 16), then
 * adds in ascending d as before. */
template <bool VEC>
__device__ __forceinline__ void pk_att_scores(const float *q_s, const pk_bf16 *k, int D, int nh,
                                              float *sc) {
    if (VEC) {
        for (int d0 = 0; d0 < D; d0 += 64) {
            uint4 kv[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                kv[i] = d0 + 8 * i < D ? pk_dev_ldcg16(k + d0 + 8 * i) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int d = d0 + 8 * i;
                if (d >= D) break;
                float kf[8];
                pk_dev_unpack8(kv[i], kf);
#pragma unroll
                for (int h = 0; h < PK_ATT_HB_MAX; h++) {
                    if (h < nh) {
                        float4 q0 = *(const float4 *)(q_s + h * D + d);
                        float4 q1 = *(const float4 *)(q_s + h * D + d + 4);
                        float sv = sc[h];
                        sv = fmaf(q0.x, kf[0], sv); sv = fmaf(q0.y, kf[1], sv);
                        sv = fmaf(q0.z, kf[2], sv); sv = fmaf(q0.w, kf[3], sv);
                        sv = fmaf(q1.x, kf[4], sv); sv = fmaf(q1.y, kf[5], sv);
                        sv = fmaf(q1.z, kf[6], sv); sv = fmaf(q1.w, kf[7], sv);
                        sc[h] = sv;
                    }
                }
            }
        }
    } else {
        for (int d = 0; d < D; d++) {
            float kf = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(k + d));
#pragma unroll
            for (int h = 0; h < PK_ATT_HB_MAX; h++)
                if (h < nh) sc[h] = fmaf(q_s[h * D + d], kf, sc[h]);
        }
    }
}

/* acc_s[h][d] = acc_s[h][d] · alpha[h] + Σ_jj e_s[h][jj] · v_jj[d] over the block's nb positions,
 * 16-byte V loads (D % 8 == 0 and D / 8 divides 32, v_cache 16-byte aligned): lane l takes the
 * 8 dims 8·(l % CH) of positions l / CH, l / CH + PPW, ... (CH = D / 8 lanes per row, PPW = 32 / CH
 * rows per warp load), 8 loads in flight; the PPW partial sums are added by a fixed butterfly.
 * Whole warp. */
__device__ __forceinline__ void pk_att_pv_vec(const pk_bf16 *v_cache, const int *slot_s, const float *e_s,
                                              int nb, int Hkv, int g, int D, int nh, const float *alpha,
                                              float *acc_s, int lane) {
    const int CH = D / 8, PPW = 32 / CH, c = lane % CH;
    float a[PK_ATT_HB_MAX][8];
#pragma unroll
    for (int h = 0; h < PK_ATT_HB_MAX; h++)
#pragma unroll
        for (int i = 0; i < 8; i++) a[h][i] = 0.0f;
    for (int j0 = lane / CH; j0 < nb; j0 += 8 * PPW) {
        uint4 vv[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int jj = j0 + u * PPW;
            vv[u] = jj < nb ? pk_dev_ldcg16(v_cache + ((int64_t)slot_s[jj] * Hkv + g) * D + 8 * c)
                            : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int jj = j0 + u * PPW;
            if (jj >= nb) break;
            float vf[8];
            pk_dev_unpack8(vv[u], vf);
#pragma unroll
            for (int h = 0; h < PK_ATT_HB_MAX; h++) {
                if (h < nh) {
                    const float e = e_s[h * 32 + jj];
#pragma unroll
                    for (int i = 0; i < 8; i++) a[h][i] = fmaf(e, vf[i], a[h][i]);
                }
            }
        }
    }
    for (int o = CH; o < 32; o <<= 1)
#pragma unroll
        for (int h = 0; h < PK_ATT_HB_MAX; h++)
#pragma unroll
            for (int i = 0; i < 8; i++) a[h][i] += __shfl_xor_sync(PK_DEV_FULL_MASK, a[h][i], o);
    if (lane < CH) {
#pragma unroll
        for (int h = 0; h < PK_ATT_HB_MAX; h++) {
            if (h < nh) {
                float *ac = acc_s + h * D + 8 * c;
#pragma unroll
                for (int i = 0; i < 8; i++) ac[i] = fmaf(ac[i], alpha[h], a[h][i]);
            }
        }
    }
}

/* q head h of row t, rotated (pk_att_head), into q [D] (fp32). Whole warp. */
template <int NP>
__device__ __forceinline__ void pk_att_store_q(const pk_bf16 *qx, const pk_bf16 *q_norm, float eps,
                                               const float *cs, const float *sn, int D, int lane,
                                               float *q) {
    const int half = D / 2;
    float ya[NP], yb[NP];
    pk_att_head<NP>(qx, q_norm, eps, cs, sn, D, lane, ya, yb);
#pragma unroll
    for (int ii = 0; ii < NP; ii++) {
        int i = lane + 32 * ii;
        if (i < half) {
            q[i] = ya[ii];
            q[i + half] = yb[ii];
        }
    }
}

/* One output of a fold of split partials (pk_cpu_attention_combine's arithmetic): split sp's
 * (acc [D], m · ln 2, l) of the head at pr + sp · split_cols; bf16(Σ_s f_s · acc_s[d] / Σ_s f_s ·
 * l_s), f_s = exp(m_s - max_s m_s), splits in order; zero where no split has a position. CG: the
 * partials are read through L2 (another CTA wrote them), else from shared memory. */
template <bool CG>
__device__ __forceinline__ pk_bf16 pk_att_combine1(const float *pr, int64_t split_cols, int nsplit, int D, int d) {
    auto ld = [](const float *q) { return CG ? pk_dev_ldcg_f32(q) : *q; };
    float M = -INFINITY;
    for (int sp = 0; sp < nsplit; sp++) M = fmaxf(M, ld(pr + sp * split_cols + D));
    float num = 0.0f, den = 0.0f;
    for (int sp = 0; sp < nsplit && M != -INFINITY; sp++) {
        const float *q = pr + sp * split_cols;
        const float f = expf(ld(q + D) - M); /* 0 for a split without positions */
        num = fmaf(f, ld(q + d), num);
        den = fmaf(f, ld(q + D + 1), den);
    }
    return M == -INFINITY ? (pk_bf16)0 : pk_dev_f32_to_bf16(__fdiv_rn(num, den));
}

#include "kernels/cuda/attention_prefill.cuh"

/* Whether position j is in split `split` of `nsplit` (pk_cpu_attention_partial's blocks: block
 * j / PK_ATTN_SPLIT_BLOCK goes to split block mod nsplit). */
__device__ __forceinline__ bool pk_att_in_split(int j, int split, int nsplit) {
    return (j / PK_ATTN_SPLIT_BLOCK) % nsplit == split;
}

/* Rows of phase A of a step of many rows whose validity and slots one pass computes at once. */
#define PK_ATT_KV_CHUNK 2048
static_assert(PK_ATT_HDR + 8 * PK_ATT_KV_CHUNK <= PK_CUDA_SMEM_BYTES, "pk_att_kv_rows's meta fits");

/* Phase A of a step of many rows (the tensor-core path): every valid row's rotated K and raw V of
 * KV heads [kv0, kv0 + nkv) into the cache, rows whose position is in split `split` of `nsplit`.
 * The rows go in chunks of PK_ATT_KV_CHUNK: a thread per row finds its validity (as
 * pk_att_row_valid), cache slot (-1: nothing to write) and position, into meta [2][chunk] i32
 * (16 KB), barrier; then a
 * warp per (row, head) item, R items in flight: their loads are issued together, then each item's
 * arithmetic is pk_att_head's, operation for operation (the same bits as the one-row path).
 * Serially (one item's page-table, qkv and store round trips after another's) a prompt chunk's
 * rows cost a round-trip chain each, repeated by each of a KV group's tasks. Whole CTA; ends with
 * a barrier (the cache writes issued, meta free). */
template <int NP>
__device__ inline void pk_att_kv_rows(const pk_layer_params *p, const float *inv, const pk_attn_step *s, int kv0,
                                      int nkv, int split, int nsplit, const pk_bf16 *qkv, int64_t qkv_stride,
                                      pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *k_norm, int *meta) {
    constexpr int R = NP <= 2 ? 4 : 2; /* items a warp has in flight */
    const int D = p->head_dim, Hkv = p->num_kv_heads, G = p->num_q_heads / Hkv, half = D / 2;
    const int64_t group_cols = (int64_t)(G + 2) * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ps = s->page_size, ppr = s->pages_per_req;
    const float eps = p->qk_norm_eps;
    for (int c0 = 0; c0 < s->n_tok; c0 += PK_ATT_KV_CHUNK) {
        const int nc = s->n_tok - c0 < PK_ATT_KV_CHUNK ? s->n_tok - c0 : PK_ATT_KV_CHUNK;
        for (int r = threadIdx.x; r < nc; r += PK_CUDA_THREADS) {
            const int req = pk_dev_ldcg_i32(s->token_req + c0 + r), pos = pk_dev_ldcg_i32(s->token_pos + c0 + r);
            int slot = -1;
            if (req >= 0 && pos >= 0 && ps > 0 && pos / ps < ppr && pk_att_in_split(pos, split, nsplit)) {
                const int32_t *pt = s->page_table + (int64_t)req * ppr;
                int bad = 0; /* no short circuit: the unrolled loads go out together */
#pragma unroll 8
                for (int i = 0; i <= pos / ps; i++) bad |= pk_dev_ldcg_i32(pt + i) < 0;
                if (!bad) slot = (int)(pk_dev_ldcg_i32(pt + pos / ps) * ps + pos % ps);
            }
            meta[r] = slot;
            meta[PK_ATT_KV_CHUNK + r] = pos;
        }
        pk_cta_sync();
        const int items = nc * nkv;
        for (int i0 = warp * R; i0 < items; i0 += PK_DEV_WARPS * R) {
            float a[R][NP], b[R][NP];
            uint32_t v[R][NP];
#pragma unroll
            for (int r = 0; r < R; r++) { /* every item's loads first */
                const int it = i0 + r, t = it / nkv, g = kv0 + it % nkv;
                const bool on = it < items && meta[t < nc ? t : 0] >= 0;
                const pk_bf16 *kx = qkv + (c0 + t) * qkv_stride + g * group_cols + (int64_t)G * D;
#pragma unroll
                for (int ii = 0; ii < NP; ii++) {
                    a[r][ii] = b[r][ii] = 0.0f;
                    v[r][ii] = 0;
                }
                if (!on) continue;
                pk_att_head_load<NP>(kx, D, lane, a[r], b[r]);
                if (pk_dev_aligned4(kx + D))
#pragma unroll
                    for (int ii = 0; ii < NP; ii++)
                        if (lane + 32 * ii < half) v[r][ii] = pk_dev_ldcg4(kx + D + 2 * (lane + 32 * ii));
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int it = i0 + r, t = it / nkv, g = kv0 + it % nkv;
                if (it >= items) break;
                const int slot = meta[t];
                if (slot < 0) continue;
                const int pos = meta[PK_ATT_KV_CHUNK + t];
                float cs[NP], sn[NP], ya[NP], yb[NP];
                pk_att_cos_sin<NP>(inv, half, pos, lane, cs, sn);
                pk_att_head_math<NP>(a[r], b[r], k_norm, eps, cs, sn, D, lane, ya, yb);
                const int64_t off = ((int64_t)slot * Hkv + g) * D;
                const pk_bf16 *vx = qkv + (c0 + t) * qkv_stride + g * group_cols + (int64_t)(G + 1) * D;
                pk_bf16 *vd = v_cache + off;
                pk_att_put_head<NP>(k_cache + off, ya, yb, half, lane);
                if (pk_dev_aligned4(vx) && pk_dev_aligned4(vd)) {
#pragma unroll
                    for (int ii = 0; ii < NP; ii++)
                        if (lane + 32 * ii < half) ((uint32_t *)vd)[lane + 32 * ii] = v[r][ii];
                } else {
                    for (int i = lane; i < D; i += 32) vd[i] = pk_dev_ldcg_bf16(vx + i);
                }
            }
        }
        pk_cta_sync(); /* meta is the next chunk's */
    }
}

/* One folded element (head h, dim d; i = h · D + d) of a result: orow[i] = bf16(num / den), or,
 * when orow is NULL, the split's unnormalised (acc, m, l) = (num, M, den) into prow [heads][D + 2]
 * (m and l once per head, by its d == 0 element). */
__device__ __forceinline__ void pk_att_put(pk_bf16 *orow, float *prow, int i, int h, int d, int D, float num,
                                           float den, float M) {
    if (orow) {
        orow[i] = pk_dev_f32_to_bf16(__fdiv_rn(num, den));
        return;
    }
    prow[h * (D + 2) + d] = num;
    if (d == 0) {
        prow[h * (D + 2) + D] = M;
        prow[h * (D + 2) + D + 1] = den;
    }
}

/* The kernel of the header for split `split` of `nsplit` (1: the whole KV length). out != NULL:
 * the normalised bf16 result, out's columns of head (g, h) at (g · G + h) · D. out == NULL: the
 * partial result of the split (pk_cpu_attention_partial) into part, fp32 [acc D, m, l] per
 * (row, head of the task) at ((g - kv0) · G + h) · (D + 2); a split without positions leaves
 * (0, -inf, 0). Phase A writes the K / V of the rows whose position is in the split. qsplit /
 * nqsplit: the tensor-core path's share of the Q blocks (attention_prefill.cuh; 0 / 1: all);
 * fold (that path only, nsplit 2): each Q block's two splits folded into out (pk_att_fold). */
template <int NP>
__device__ inline void pk_dev_attention_split(const pk_layer_params *p, const float *inv_freq,
                                              const pk_attn_step *s, int kv0, int nkv, int split, int nsplit,
                                              const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
                                              pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm,
                                              pk_bf16 *out, int64_t out_stride, float *part, int64_t part_stride,
                                              char *smem, int qsplit = 0, int nqsplit = 1,
                                              const pk_att_fold *fold = nullptr) {
    static_assert(PK_ATTN_SPLIT_BLOCK == 32, "a split block is one warp's block of positions");
    const int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads;
    if (D <= 0 || D > 64 * NP || D % 2 != 0 || Hkv <= 0 || Hq % Hkv != 0 || kv0 < 0 ||
        nkv < 0 || kv0 + nkv > Hkv || nsplit < 1 || split < 0 || split >= nsplit || (!out && !part))
        return; /* a layer the API rejects, or a task outside it */
    const int G = Hq / Hkv, half = D / 2, n_tok = s->n_tok;
    const int64_t group_cols = (int64_t)(G + 2) * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float eps = p->qk_norm_eps;
    float *inv_freq_s = (float *)smem; /* [half] */

    /* heads per warp pass: as many as fit (<= PK_ATT_HB_MAX) */
    int HB = G < PK_ATT_HB_MAX ? G : PK_ATT_HB_MAX;
    while (HB > 1 && PK_ATT_HDR + PK_DEV_WARPS * pk_att_warp_bytes(HB, D) > PK_CUDA_SMEM_BYTES)
        HB--;
    if (PK_ATT_HDR + PK_DEV_WARPS * pk_att_warp_bytes(HB, D) > PK_CUDA_SMEM_BYTES) return;
    const int WB = pk_att_warp_bytes(HB, D);
    /* Shared q: when every row's rotated q heads fit after the warp areas (decode steps), phase A
     * rotates each (row, q head) once, in parallel with the K / V writes, and phase 3 reads q
     * from there; otherwise every phase-3 warp rotates its item's heads into its own q_s. */
    const int64_t q_all_bytes = (int64_t)n_tok * nkv * G * D * 4;
    float *q_all = (float *)(smem + PK_ATT_HDR + PK_DEV_WARPS * WB); /* [n_tok][nkv][G][D] */
    /* steps of more rows: phase 3 on tensor cores (attention_prefill.cuh), which rotates its q */
    const bool mma = n_tok > 1 && pk_att_prefill_ok<NP>(D, G);
    const bool shared_q = !mma && PK_ATT_HDR + PK_DEV_WARPS * WB + q_all_bytes <= PK_CUDA_SMEM_BYTES;

    /* phase 0: inv_freq (a table from the code generator, or computed here) */
    if (!inv_freq) {
        for (int i = threadIdx.x; i < half; i += PK_CUDA_THREADS)
            inv_freq_s[i] = pk_dev_rope_inv_freq1(p, i);
        pk_cta_sync();
    }
    const float *inv = inv_freq ? inv_freq : inv_freq_s;

    if (mma) { /* phase A for many rows, then phase 3 on tensor cores */
        pk_att_kv_rows<NP>(p, inv, s, kv0, nkv, split, nsplit, qkv, qkv_stride, k_cache, v_cache, k_norm,
                           (int *)(smem + PK_ATT_HDR));
        pk_att_prefill<NP>(p, inv, s, kv0, nkv, split, nsplit, qkv, qkv_stride, k_cache, v_cache, q_norm, out,
                           out_stride, part, part_stride, smem, qsplit, nqsplit, fold);
        return;
    }

    /* phase A: per (row, KV head) item 0 writes rotated K and raw V into the cache; items 1 .. G
     * (shared q only) rotate q head item - 1 into q_all. Warps take items round-robin. */
    const int per = 1 + (shared_q ? G : 0);
    for (int item = warp; item < n_tok * nkv * per; item += PK_DEV_WARPS) {
        const int tg = item / per, kind = item - tg * per;
        const int t = tg / nkv, g = kv0 + tg % nkv;
        int req, pos;
        if (!pk_att_row_valid(s, t, lane, &req, &pos)) continue;
        if (kind == 0 && !pk_att_in_split(pos, split, nsplit)) continue; /* another split's row */
        float cs[NP], sn[NP], ya[NP], yb[NP];
        pk_att_cos_sin<NP>(inv, half, pos, lane, cs, sn);
        if (kind > 0) {
            const pk_bf16 *qx = qkv + t * qkv_stride + g * group_cols + (int64_t)(kind - 1) * D;
            pk_att_store_q<NP>(qx, q_norm, eps, cs, sn, D, lane,
                           q_all + ((int64_t)tg * G + (kind - 1)) * D);
            continue;
        }
        /* K [D] then V [D] of head g */
        const pk_bf16 *kx = qkv + t * qkv_stride + g * group_cols + (int64_t)G * D;
        const pk_bf16 *vx = kx + D;
        const int64_t off = (pk_att_slot(s, req, pos) * Hkv + g) * D;
        pk_att_head<NP>(kx, k_norm, eps, cs, sn, D, lane, ya, yb);
        pk_att_put_head<NP>(k_cache + off, ya, yb, half, lane);
        pk_bf16 *vd = v_cache + off;
        if (pk_dev_aligned4(vx) && pk_dev_aligned4(vd)) {
            for (int i = lane; i < half; i += 32) ((uint32_t *)vd)[i] = pk_dev_ldcg4(vx + 2 * i);
        } else {
            for (int i = lane; i < D; i += 32) vd[i] = pk_dev_ldcg_bf16(vx + i);
        }
    }
    pk_cta_sync(); /* the cache holds every row's K and V (global writes of this CTA), q_all its q */

    /* phase 3 */
    const int nhc = (G + HB - 1) / HB, items = n_tok * nkv * nhc;
    int NG = PK_DEV_WARPS; /* groups */
    while (NG > 1 && NG > items) NG >>= 1;
    const int SP = PK_DEV_WARPS / NG, grp = warp / SP, sub = warp % SP;
    const int rounds = (items + NG - 1) / NG;
    const float scale = 1.0f / sqrtf((float)D);
    const bool vec_k = D % 8 == 0 && pk_dev_aligned16(k_cache);
    const bool v4 = pk_dev_aligned4(v_cache);
    const bool vec_v = D % 8 == 0 && 32 % (D / 8) == 0 && pk_dev_aligned16(v_cache);
    char *wbase = smem + PK_ATT_HDR + warp * WB;
    float *q_s = (float *)wbase;            /* [HB][D] (or, with shared q, the item's q_all heads) */
    float *acc_s = (float *)wbase + HB * D; /* [HB][D] */
    float *e_s = acc_s + HB * D;            /* [HB][32] */
    float *m_s = e_s + HB * 32;             /* [HB] */
    float *l_s = m_s + HB;                  /* [HB] */
    int *slot_s = (int *)(l_s + HB);        /* [32] */

    for (int round = 0; round < rounds; round++) {
        const int item = round * NG + grp;
        int t = 0, g = 0, h0 = 0, nh = 0, req = 0, pos = -1;
        bool valid = false;
        if (item < items) {
            t = item / (nkv * nhc);
            int rem = item - t * (nkv * nhc);
            g = kv0 + rem / nhc;
            h0 = (rem % nhc) * HB;
            nh = G - h0 < HB ? G - h0 : HB;
            valid = pk_att_row_valid(s, t, lane, &req, &pos);
        }
        pk_bf16 *orow = out ? out + t * out_stride + ((int64_t)g * G + h0) * D : nullptr; /* [nh · D] */
        float *prow = part ? part + t * part_stride + ((int64_t)(g - kv0) * G + h0) * (D + 2) : nullptr; /* [nh][D + 2] */
        if (item < items && !valid && sub == 0) {
            if (orow)
                for (int i = lane; i < nh * D; i += 32) orow[i] = 0;
            else
                for (int i = lane; i < nh * (D + 2); i += 32) prow[i] = i % (D + 2) == D ? -INFINITY : 0.0f;
        }
        if (valid) {
            /* q of the item's heads, rotated (phase A's q_all, or here into q_s); acc_s = 0 */
            if (shared_q) {
                q_s = q_all + (((int64_t)t * nkv + (g - kv0)) * G + h0) * D;
            } else {
                float cs[NP], sn[NP];
                pk_att_cos_sin<NP>(inv, half, pos, lane, cs, sn);
                for (int h = 0; h < nh; h++)
                    pk_att_store_q<NP>(qkv + t * qkv_stride + g * group_cols + (int64_t)(h0 + h) * D, q_norm,
                                   eps, cs, sn, D, lane, q_s + h * D);
            }
            for (int h = 0; h < nh; h++)
                for (int i = lane; i < D; i += 32) acc_s[h * D + i] = 0.0f;
            __syncwarp();

            float m[PK_ATT_HB_MAX], l[PK_ATT_HB_MAX];
#pragma unroll
            for (int h = 0; h < PK_ATT_HB_MAX; h++) {
                m[h] = -INFINITY;
                l[h] = 0.0f;
            }
            /* the split's blocks split, split + nsplit, ...; this warp takes every SP-th of them */
            for (int jb = 32 * (split + nsplit * sub); jb <= pos; jb += 32 * nsplit * SP) {
                const int j = jb + lane, nb = pos + 1 - jb < 32 ? pos + 1 - jb : 32;
                float sc[PK_ATT_HB_MAX];
#pragma unroll
                for (int h = 0; h < PK_ATT_HB_MAX; h++) sc[h] = 0.0f;
                int slot = -1;
                if (j <= pos) {
                    slot = (int)pk_att_slot(s, req, j);
                    const pk_bf16 *kr = k_cache + ((int64_t)slot * Hkv + g) * D;
                    if (vec_k)
                        pk_att_scores<true>(q_s, kr, D, nh, sc);
                    else
                        pk_att_scores<false>(q_s, kr, D, nh, sc);
                }
                slot_s[lane] = slot;
                float alpha[PK_ATT_HB_MAX];
#pragma unroll
                for (int h = 0; h < PK_ATT_HB_MAX; h++) {
                    if (h < nh) {
                        float sv = j <= pos ? sc[h] * scale : -INFINITY;
                        float mn = fmaxf(m[h], pk_dev_warp_max(sv));
                        alpha[h] = expf(m[h] - mn); /* 0 on the first block: m = -inf */
                        float e = j <= pos ? expf(sv - mn) : 0.0f;
                        l[h] = fmaf(l[h], alpha[h], e);
                        e_s[h * 32 + lane] = e;
                        m[h] = mn;
                    }
                }
                __syncwarp();
                if (vec_v) {
                    pk_att_pv_vec(v_cache, slot_s, e_s, nb, Hkv, g, D, nh, alpha, acc_s, lane);
                } else {
                    for (int d = 2 * lane; d < D; d += 64) {
                        float a0[PK_ATT_HB_MAX], a1[PK_ATT_HB_MAX];
#pragma unroll
                        for (int h = 0; h < PK_ATT_HB_MAX; h++) a0[h] = a1[h] = 0.0f;
#pragma unroll 4
                        for (int jj = 0; jj < nb; jj++) {
                            const pk_bf16 *vr = v_cache + ((int64_t)slot_s[jj] * Hkv + g) * D + d;
                            float v0, v1;
                            if (v4) {
                                uint32_t u = pk_dev_ldcg4(vr);
                                v0 = pk_dev_lo_f32(u);
                                v1 = pk_dev_hi_f32(u);
                            } else {
                                v0 = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(vr));
                                v1 = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(vr + 1));
                            }
#pragma unroll
                            for (int h = 0; h < PK_ATT_HB_MAX; h++) {
                                if (h < nh) {
                                    float e = e_s[h * 32 + jj];
                                    a0[h] = fmaf(e, v0, a0[h]);
                                    a1[h] = fmaf(e, v1, a1[h]);
                                }
                            }
                        }
#pragma unroll
                        for (int h = 0; h < PK_ATT_HB_MAX; h++) {
                            if (h < nh) {
                                float *ac = acc_s + h * D + d;
                                ac[0] = fmaf(ac[0], alpha[h], a0[h]);
                                ac[1] = fmaf(ac[1], alpha[h], a1[h]);
                            }
                        }
                    }
                }
                __syncwarp(); /* e_s and slot_s are rewritten by the next block */
            }
#pragma unroll
            for (int h = 0; h < PK_ATT_HB_MAX; h++) l[h] = pk_dev_warp_sum(l[h]);
            if (SP == 1 && orow) {
#pragma unroll
                for (int h = 0; h < PK_ATT_HB_MAX; h++)
                    if (h < nh)
                        for (int d = lane; d < D; d += 32)
                            orow[h * D + d] = pk_dev_f32_to_bf16(__fdiv_rn(acc_s[h * D + d], l[h]));
            } else if (SP == 1) { /* the split's (acc, m, l) as they are */
#pragma unroll
                for (int h = 0; h < PK_ATT_HB_MAX; h++)
                    if (h < nh) {
                        for (int d = lane; d < D; d += 32) prow[h * (D + 2) + d] = acc_s[h * D + d];
                        if (lane == 0) {
                            prow[h * (D + 2) + D] = m[h];
                            prow[h * (D + 2) + D + 1] = l[h];
                        }
                    }
            } else if (lane == 0) {
#pragma unroll
                for (int h = 0; h < PK_ATT_HB_MAX; h++)
                    if (h < nh) {
                        m_s[h] = m[h];
                        l_s[h] = l[h];
                    }
            }
        }
        if (SP > 1) {
            pk_cta_sync(); /* every warp of the group (same item, same `valid`) is done */
            /* group combine: thread q of the group's SP·32 takes outputs q, q + SP·32, ... */
            if (valid) {
                const char *gbase = smem + PK_ATT_HDR + (warp - sub) * WB;
                for (int i = sub * 32 + lane; i < nh * D; i += SP * 32) {
                    int h = i / D, d = i - h * D;
                    float M = -INFINITY;
                    for (int w = 0; w < SP; w++) {
                        const float *wm = (const float *)(gbase + w * WB) + 2 * HB * D + 32 * HB;
                        M = fmaxf(M, wm[h]);
                    }
                    float num = 0.0f, den = 0.0f;
                    for (int w = 0; w < SP && M != -INFINITY; w++) { /* M = -inf: a split without positions */
                        const float *wq = (const float *)(gbase + w * WB);
                        const float *wm = wq + 2 * HB * D + 32 * HB, *wl = wm + HB;
                        float f = expf(wm[h] - M); /* 0 for a warp that had no positions */
                        num = fmaf(wq[HB * D + h * D + d], f, num);
                        den = fmaf(wl[h], f, den);
                    }
                    pk_att_put(orow, prow, i, h, d, D, num, den, M);
                }
            }
            pk_cta_sync(); /* the group's areas are reused next round */
        }
    }
}

/* The unsplit kernel: every position, the normalised output. */
template <int NP>
__device__ inline void pk_dev_attention_np(const pk_layer_params *p, const float *inv_freq,
                                           const pk_attn_step *s, int kv0, int nkv, const pk_bf16 *qkv,
                                           int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache,
                                           const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out,
                                           int64_t out_stride, char *smem) {
    pk_dev_attention_split<NP>(p, inv_freq, s, kv0, nkv, 0, 1, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm,
                               out, out_stride, nullptr, 0, smem);
}

/* The fold of a split attention (pk_cpu_attention_combine; the last partial task of each KV-head
 * group runs it, dispatch.cuh): out[t][h · D + d] by pk_att_combine1.
 * part [n_tok][nsplit][nheads][D + 2] (row stride part_stride). Per row, when the
 * row's partials fit smem_bytes: one wave of 8-byte loads brings them into shared memory (one L2
 * round trip, not one per split: the loads of the direct loop below depend on nothing but are
 * issued a few at a time), barrier, thread per (h, d) from shared memory; else thread per output
 * from L2. */
__device__ inline void pk_dev_attention_combine(int n_tok, int nheads, int D, int nsplit, const float *part,
                                                int64_t part_stride, pk_bf16 *out, int64_t out_stride, char *smem,
                                                int smem_bytes) {
    if (D <= 0 || nheads <= 0 || nsplit < 1) return;
    const int64_t split_cols = (int64_t)nheads * (D + 2), per_row = (int64_t)nheads * D;
    const int64_t row_floats = nsplit * split_cols;
    const bool staged = D % 2 == 0 && row_floats * 4 <= smem_bytes && ((uintptr_t)part & 7) == 0 &&
                        part_stride % 2 == 0;
    float *ps = (float *)smem; /* [nsplit][nheads][D + 2]: one row's partials */
    for (int t = 0; t < (staged ? n_tok : 0); t++) {
        const float2 *src = (const float2 *)(part + t * part_stride);
        for (int64_t e = threadIdx.x; e < row_floats / 2; e += PK_CUDA_THREADS) ((float2 *)ps)[e] = __ldcg(src + e);
        pk_cta_sync();
        for (int64_t e = threadIdx.x; e < per_row; e += PK_CUDA_THREADS) {
            const int h = (int)(e / D), d = (int)(e % D);
            out[t * out_stride + e] = pk_att_combine1<false>(ps + (int64_t)h * (D + 2), split_cols, nsplit, D, d);
        }
        pk_cta_sync(); /* ps is the next row's */
    }
    for (int64_t e = threadIdx.x; e < (staged ? 0 : n_tok * per_row); e += PK_CUDA_THREADS) {
        const int t = (int)(e / per_row), h = (int)(e % per_row) / D, d = (int)(e % D);
        const float *pr = part + t * part_stride + (int64_t)h * (D + 2); /* split 0's (acc, m, l) */
        out[t * out_stride + (int64_t)h * D + d] = pk_att_combine1<true>(pr, split_cols, nsplit, D, d);
    }
}

/* Pairs per lane for head size D (0: too large). */
__host__ __device__ constexpr int pk_att_pairs(int D) {
    return D <= 64 ? 1 : D <= 128 ? 2 : D <= 256 ? 4 : D <= PK_ATT_MAX_D ? 8 : 0;
}

/* Any head size: the instance for D (the code generator calls pk_dev_attention_np with the
 * layer's own NP, so the persistent kernel holds one instance). */
__device__ inline void pk_dev_attention(const pk_layer_params *p, const float *inv_freq, const pk_attn_step *s,
                                        int kv0, int nkv, const pk_bf16 *qkv, int64_t qkv_stride,
                                        pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                        const pk_bf16 *k_norm, pk_bf16 *out, int64_t out_stride, char *smem) {
    switch (pk_att_pairs(p->head_dim)) {
    case 1: pk_dev_attention_np<1>(p, inv_freq, s, kv0, nkv, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out, out_stride, smem); break;
    case 2: pk_dev_attention_np<2>(p, inv_freq, s, kv0, nkv, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out, out_stride, smem); break;
    case 4: pk_dev_attention_np<4>(p, inv_freq, s, kv0, nkv, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out, out_stride, smem); break;
    case 8: pk_dev_attention_np<8>(p, inv_freq, s, kv0, nkv, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out, out_stride, smem); break;
    default: break; /* a layer the API rejects */
    }
}

/* PK_TASK_ATTENTION_PARTIAL for any head size (pk_cpu_attention_partial): split `split` of
 * `nsplit` of KV heads [kv0, kv0 + nkv), (acc, m, l) into part. */
__device__ inline void pk_dev_attention_partial(const pk_layer_params *p, const float *inv_freq, const pk_attn_step *s,
                                                int kv0, int nkv, int split, int nsplit, const pk_bf16 *qkv,
                                                int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache,
                                                const pk_bf16 *q_norm, const pk_bf16 *k_norm, float *part,
                                                int64_t part_stride, char *smem) {
#define PK_ATT_PARTIAL_NP(NP)                                                                                      \
    pk_dev_attention_split<NP>(p, inv_freq, s, kv0, nkv, split, nsplit, qkv, qkv_stride, k_cache, v_cache, q_norm, \
                               k_norm, nullptr, 0, part, part_stride, smem)
    switch (pk_att_pairs(p->head_dim)) {
    case 1: PK_ATT_PARTIAL_NP(1); break;
    case 2: PK_ATT_PARTIAL_NP(2); break;
    case 4: PK_ATT_PARTIAL_NP(4); break;
    case 8: PK_ATT_PARTIAL_NP(8); break;
    default: break; /* a layer the API rejects */
    }
#undef PK_ATT_PARTIAL_NP
}

#endif /* PK_CUDA_ATTENTION_CUH */
