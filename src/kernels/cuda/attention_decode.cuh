// SPDX-License-Identifier: Apache-2.0
/* attention_decode.cuh — PK_TASK_ATTENTION for one decode row, with the KV cache read before the
 * task's dependency fires. Same result as pk_dev_attention (attention.cuh) to bf16 tolerance, same
 * cache writes bit for bit; the general kernel stays the path for prefill, long contexts and any
 * shape this one does not take.
 *
 * Why: in the persistent kernel a decode attention task spent ~30 us of which the arithmetic is
 * ~1: its loads form a chain (token position -> page table -> K rows -> scores -> V rows, each
 * one DRAM round trip, since the ~1 GB of weights streamed since the layer's last use evicted
 * the cache from L2). Everything but the new position's K / V and the query is known before
 * the qkv projection finishes: positions 0 .. pos-1 of the cache were written in earlier steps.
 *
 * Two calls per task, in the static schedule:
 *   pk_dev_attention_decode_stage (before the dependency wait): the row's request and position,
 *     the slots of positions 0 .. pos, bf16 cos / sin of position pos, and 16-byte cp.async copies
 *     of K and V rows 0 .. pos-1 of KV head kv0 into shared memory; returns 1 + P (P = pos + 1
 *     rows), or 0 when this path does not apply (then nothing is staged and the caller runs the
 *     general kernel). The caller waits for the copies (cp.async.wait_all) and __syncthreads.
 *   pk_dev_attention_decode (after the wait): phase A as the general kernel (K rotated and V into
 *     the cache and into the staged rows at pos, q heads rotated into q_s), then from shared
 *     memory only, per warp: blocks of 32 positions w, w + 8, ..., online softmax over the blocks
 *     as attention.cuh's phase 3 — on the tensor cores at D 64 / 128 (pk_attd_warp_blocks_mmat,
 *     positions as the rows and the G heads as the columns; P in two bf16 parts for P·V), else
 *     scalar (pk_attd_warp_blocks: lane = position, two heads per pass); each warp leaves (m, l, acc [G][D]) and one barrier later
 *     the CTA folds the 8 warps in order. Every order is fixed by the shapes: the same bits on
 *     every run.
 * Split over the KV length (PK_TASK_ATTENTION_PARTIAL, nsplit > 1): the task stages only its
 * split's positions (blocks of 32, block b in split b mod nsplit) as P local rows, writes pos's
 * K / V only when pos is in its split, and leaves the fold's (acc, m, l) per head unnormalised
 * for the fold (pk_dev_attention_combine, run by the group's last task). A split of a 4096-position context over 16
 * tasks stages 256 rows: the long contexts the unsplit task cannot hold fit.
 * Applies when: one row (n_tok 1) whose pages are mapped, one KV head per task, D in {64, 128,
 * 256}, G <= PK_ATTD_G_MAX, 16-byte aligned caches, the code generator's inv_freq table, and
 * the layout below fits in smem_bytes.
 * Shared memory (bytes from smem, attention_decode_layout.h): first what the task writes after its
 * wait — q_s [G][D] f32 (bf16 [G][D + 8] on the tensor-core path); red [8 warps][G][D] f32; red_m,
 * red_l [8][G] f32 —, then from L.hdr what the stage writes before it — hdr [16] i32 {P, req, pos,
 * new slot (-1: not this split's)}; cs_s, sn_s [D/2] f32; nq_s, nk_s [D] bf16 (q_norm, k_norm,
 * staged with the cache); slots [Pr] i32 (P rounded up to 4); K_s, V_s [Pr][D + 8] bf16 (rows
 * padded: pk_attd_kidx). The stage never touches [0, L.hdr): a stage issued during another task
 * may put those bytes over that task's (runtime.cuh's pk_att_early).
 */
#ifndef PK_CUDA_ATTENTION_DECODE_CUH
#define PK_CUDA_ATTENTION_DECODE_CUH

#include "kernels/attention_decode_layout.h" /* pk_attd_layout_of, PK_ATTD_G_MAX: shared with the host */
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/mbarrier.cuh" /* the bulk-row stage (pk_gen_tuning::attd_bulk_rows) */
#include "kernels/cuda/mma.cuh"

static_assert(PK_ATTD_WARPS == PK_DEV_WARPS, "the layout's warp count is the CTA's");
#define PK_ATTD_HP 2    /* heads per pass over the positions: K and V rows unpacked once for both */
/* The tensor-core path from this many query heads per KV head (D 64 / 128, sm_80+); below it and
 * at D 256 the scalar path. Its sums are not the CPU kernel's order, so pk-tiny's greedy tokens
 * may leave the CPU's at a near tie; what must hold is that every decode step's logits agree
 * (gpu_env.sh pk_tiny_logits_check: relative L2 <= 1e-2, the argmax equal at every decisive
 * position; with P in one bf16 part instead of two, one of them differed). */
#define PK_ATTD_MMA_MIN_G 2
/* Whether instance NP may take the tensor-core path (D 64 / 128 on sm_80 and later) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PK_ATTD_USE_MMA(NP) ((NP) <= 2)
#else
#define PK_ATTD_USE_MMA(NP) false
#endif
/* The KV cache rows are staged with the weights' evict-first L2 policy: a row is read again only
 * in the next step, after every weight has streamed through L2, and at long contexts the cache
 * would otherwise push the code out. */
/* pk_gen_tuning::attd_bulk_rows: the stage copies each K / V row with one 256-byte (D 128) cp.async.bulk on an mbarrier in the
 * layout's header (2 per thread for 256 rows) instead of D / 8 16-byte cp.async each (32 per
 * thread): the issue takes the threads no time, so what follows the stage — the worker's qkv tile
 * when the stage is early, phase A after the dependency wait when it is not — runs while the rows
 * land. With 16-byte copies the threads stay in the issue loop until most rows have landed: the
 * split task of a long context would see its event late even when it waits for the event first
 * (both kinds of copy land the stage's rows in the same time alone). The stage still commits a
 * (now empty) cp.async group, so the runtime's group counting holds; the task waits on the
 * mbarrier after phase A. sm_90 and later. Faster only for the Qwen3-1.7B shape with a split
 * attention, slower for the other shapes: codegen.c's pk_cuda_tuning_of turns it on there alone;
 * elsewhere 16-byte cp.async. */
constexpr bool pk_attd_bulk = pk_gen_tuning::attd_bulk_rows && PK_DEV_HAVE_BULK;
#define PK_ATTD_BAR_OFF 32 /* the bulk stage's mbarrier: bytes 32..39 of the header (hdr[8], hdr[9]), from L.hdr */

/* K_s and V_s rows are padded by one 16-byte chunk: lane j reading chunk c of row j hits bank
 * group (j · (D / 8 + 1) + c) mod 8, distinct for 8 consecutive rows (the scalar path's K reads,
 * every ldmatrix of the tensor-core path). */
__device__ __forceinline__ int pk_attd_kidx(int j, int d, int D) { return j * (D + 8) + d; }

/* Split `split` of `nsplit` (pk_dev_attention_split's blocks of 32 positions, block b in split b
 * mod nsplit): its positions <= pos are local rows r = 0 .. count - 1, r in local block r / 32 =
 * global block split + nsplit · (r / 32). Every block but the one holding pos is whole, and that
 * one is the split's last when the split owns pos (its row is then the last local row). */
__device__ __forceinline__ int pk_attd_split_pos(int r, int split, int nsplit) {
    return 32 * (split + nsplit * (r >> 5)) + (r & 31);
}
__device__ __forceinline__ int pk_attd_split_count(int pos, int split, int nsplit) {
    const int last = pos >> 5; /* block of pos */
    if (split > last) return 0;
    const int nb = (last - split) / nsplit + 1; /* the split's blocks 0 .. last */
    return (last - split) % nsplit == 0 ? 32 * (nb - 1) + (pos & 31) + 1 : 32 * nb;
}

/* nsplit 1: positions 0 .. pos (the unsplit task). Returns 0 when the path does not apply,
 * else 1 + the staged row count. */
template <int NP>
__device__ inline int pk_dev_attention_decode_stage(const pk_layer_params *p, const float *inv_freq,
                                                    const pk_attn_step *s, int kv0, int nkv, int split, int nsplit,
                                                    const pk_bf16 *k_cache, const pk_bf16 *v_cache,
                                                    const pk_bf16 *q_norm, const pk_bf16 *k_norm, char *smem,
                                                    int smem_bytes) {
    const int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads;
    if (s->n_tok != 1 || nkv != 1 || !inv_freq || Hkv <= 0 || Hq % Hkv != 0 ||
        !pk_attd_shape_ok(D, Hq / Hkv) || D > 64 * NP || kv0 < 0 || kv0 >= Hkv ||
        nsplit < 1 || split < 0 || split >= nsplit || !pk_dev_aligned16(k_cache) || !pk_dev_aligned16(v_cache))
        return 0;
    const int G = Hq / Hkv, g = kv0;
    /* Every load of the stage is one round trip on the critical path when this worker ran a
     * task of the layer before (the qkv projection) up to the dependency: so the loads that do
     * not depend on the row (inv_freq, the q / k norm weights) go out first, and the page-table
     * reads for the check that the row's pages are mapped and for the slots go out together:
     * token -> page table -> K / V rows, three round trips. */
    static_assert(PK_CUDA_THREADS >= 256, "one inv_freq / norm element per thread at D <= 256");
    const int i = threadIdx.x;
    const float fr = i < D / 2 ? inv_freq[i] : 0.0f;
    const bool norms = q_norm && k_norm;
    const pk_bf16 nqv = norms && i < D ? pk_dev_ldw_bf16(q_norm + i) : (pk_bf16)0;
    const pk_bf16 nkv_ = norms && i < D ? pk_dev_ldw_bf16(k_norm + i) : (pk_bf16)0;
    const int req = pk_dev_ldcg_i32(s->token_req), pos = pk_dev_ldcg_i32(s->token_pos);
    if (req < 0 || pos < 0 || s->page_size <= 0 || pos / s->page_size >= s->pages_per_req)
        return 0; /* the general kernel writes zeros (the same values in every thread) */
    const int P = pk_attd_split_count(pos, split, nsplit); /* local rows, pos's own included when owned */
    const bool owns = pk_att_in_split(pos, split, nsplit);
    if (P > smem_bytes / (4 * D)) return 0; /* K and V rows alone would not fit (and the int layout
                                              * offsets below cannot overflow) */
    const pk_attd_layout L = pk_attd_layout_of(D, G, P);
    if (L.end > smem_bytes) return 0;

    /* one round: pages 0 .. pos / page_size all mapped (pk_att_row_valid's check), and the
     * slots of the split's positions */
    const int32_t *pt = s->page_table + (int64_t)req * s->pages_per_req;
    const int ps = s->page_size;
    int *hdr = (int *)(smem + L.hdr), *slot_s = (int *)(smem + L.sc);
    bool bad = false;
    for (int r = i; r <= pos / ps; r += PK_CUDA_THREADS) bad = bad || pk_dev_ldcg_i32(pt + r) < 0;
    for (int r = i; r < P; r += PK_CUDA_THREADS)
        slot_s[r] = (int)pk_att_slot(s, req, pk_attd_split_pos(r, split, nsplit));
    float *cs_s = (float *)(smem + L.cs), *sn_s = (float *)(smem + L.sn);
    if (i < D / 2) {
        double sd, cd;
        sincos((double)((float)pos * fr), &sd, &cd);
        cs_s[i] = pk_dev_round_bf16((float)cd);
        sn_s[i] = pk_dev_round_bf16((float)sd);
    }
    /* the q / k norm weights too: after the wait they would be one more dependent load (from
     * DRAM: weights are evicted first) before any head is normalised */
    pk_bf16 *nq_s = (pk_bf16 *)(smem + L.nq), *nk_s = (pk_bf16 *)(smem + L.nk);
    if (norms && i < D) {
        nq_s[i] = nqv;
        nk_s[i] = nkv_;
    }
    const uint32_t bar = (uint32_t)__cvta_generic_to_shared(smem + L.hdr + PK_ATTD_BAR_OFF); /* bulk rows */
    if constexpr (pk_attd_bulk) {
        if (threadIdx.x == 0) { /* armed before any copy is issued: the phase's bytes are known */
            pk_dev_mbar_init(bar, 1);
            pk_dev_mbar_init_fence();
            pk_dev_mbar_arrive_expect_tx(bar, (uint32_t)(2 * (owns ? P - 1 : P) * D * 2));
        }
        pk_dev_fence_proxy_async_smem(); /* this thread's earlier accesses of the area before the copy engine's writes */
    }
    if (pk_cta_sync_or(bad)) { /* every thread: a page is unmapped (the general kernel writes
                                * zeros); also the barrier for slot_s */
        if constexpr (pk_attd_bulk)
            if (threadIdx.x == 0) pk_dev_mbar_inval(bar); /* no copy was issued on it */
        return 0;
    }
    const uint32_t k_dst = (uint32_t)__cvta_generic_to_shared(smem + L.k);
    const uint32_t v_dst = (uint32_t)__cvta_generic_to_shared(smem + L.v);
    const int nold = owns ? P - 1 : P; /* rows written in earlier steps */
    if constexpr (pk_attd_bulk) {
        const uint64_t policy = pk_dev_weight_policy(); /* evict-first, as the 16-byte copies' */
        for (int j = threadIdx.x; j < nold; j += PK_CUDA_THREADS) {
            const int64_t src = ((int64_t)slot_s[j] * Hkv + g) * D;
            const uint32_t d = 2u * (uint32_t)pk_attd_kidx(j, 0, D); /* V rows padded as K's */
            pk_dev_bulk_copy_w(k_dst + d, k_cache + src, (uint32_t)(2 * D), bar, policy);
            pk_dev_bulk_copy_w(v_dst + d, v_cache + src, (uint32_t)(2 * D), bar, policy);
        }
    } else {
        const int C = D / 8, lc = D == 64 ? 3 : D == 128 ? 4 : 5; /* 16-byte chunks per row, log2(C) */
        for (int e = threadIdx.x; e < nold * C; e += PK_CUDA_THREADS) {
            const int j = e >> lc, c = e & (C - 1);
            const int64_t src = ((int64_t)slot_s[j] * Hkv + g) * D + 8 * c;
            const uint32_t kd = 2u * (uint32_t)pk_attd_kidx(j, 8 * c, D), vd = kd; /* V rows padded as K's */
            pk_dev_cp_async_w16(k_dst + kd, k_cache + src);
            pk_dev_cp_async_w16(v_dst + vd, v_cache + src);
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (threadIdx.x == 0) {
        hdr[0] = P;
        hdr[1] = req;
        hdr[2] = pos;
        hdr[3] = owns ? slot_s[P - 1] : -1; /* -1: another split writes pos's K / V */
    }
    return 1 + P;
}

/* The scalar path (G below PK_ATTD_MMA_MIN_G, D 256, GPUs before sm_80): per warp and pass of PK_ATTD_HP heads, blocks of
 * 32 positions w, w + 8, ... (lane = position), online softmax as attention.cuh's phase 3; then
 * (m, l, acc [D]) into red_m, red_l, red. Loops are rolled (#pragma unroll 1): a version with
 * every head's loops unrolled was larger and its task slower. */
template <int NP>
__device__ inline void pk_attd_warp_blocks(int D, int G, int P, const float *q_s, const pk_bf16 *K_s,
                                           const pk_bf16 *V_s, float *red, float *red_m, float *red_l) {
    const int C = D / 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float scale = 1.0f / sqrtf((float)D);
    constexpr int DL = 2 * NP; /* dims per lane in the P·V sum: D / 32 <= DL */
    const int dl = D / 32;
#pragma unroll 1
    for (int h0 = 0; h0 < G; h0 += PK_ATTD_HP) {
        /* heads h0, h0 + 1 (an odd G's last pass computes head h0 twice and keeps one) */
        const float *qh[PK_ATTD_HP];
        float m[PK_ATTD_HP], l[PK_ATTD_HP], acc[PK_ATTD_HP][DL];
#pragma unroll
        for (int t = 0; t < PK_ATTD_HP; t++) {
            qh[t] = q_s + (h0 + t < G ? h0 + t : h0) * D;
            m[t] = -INFINITY;
            l[t] = 0.0f;
#pragma unroll
            for (int i = 0; i < DL; i++) acc[t][i] = 0.0f;
        }
#pragma unroll 1
        for (int jb = 32 * warp; jb < P; jb += 32 * PK_DEV_WARPS) {
            const int j = jb + lane, nb = P - jb < 32 ? P - jb : 32;
            /* scores: 4 chunks of K row j per round, one partial sum per chunk slot and head */
            float part[PK_ATTD_HP][4];
#pragma unroll
            for (int t = 0; t < PK_ATTD_HP; t++)
#pragma unroll
                for (int u = 0; u < 4; u++) part[t][u] = 0.0f;
            if (j < P) {
                const pk_bf16 *kr = K_s + pk_attd_kidx(j, 0, D);
#pragma unroll 1
                for (int c0 = 0; c0 < C; c0 += 4) {
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        float kf[8];
                        pk_dev_unpack8(*(const uint4 *)(kr + 8 * (c0 + u)), kf);
#pragma unroll
                        for (int t = 0; t < PK_ATTD_HP; t++) {
                            const float4 q0 = *(const float4 *)(qh[t] + 8 * (c0 + u));
                            const float4 q1 = *(const float4 *)(qh[t] + 8 * (c0 + u) + 4);
                            float sv = part[t][u];
                            sv = fmaf(q0.x, kf[0], sv); sv = fmaf(q0.y, kf[1], sv);
                            sv = fmaf(q0.z, kf[2], sv); sv = fmaf(q0.w, kf[3], sv);
                            sv = fmaf(q1.x, kf[4], sv); sv = fmaf(q1.y, kf[5], sv);
                            sv = fmaf(q1.z, kf[6], sv); sv = fmaf(q1.w, kf[7], sv);
                            part[t][u] = sv;
                        }
                    }
                }
            }
            float alpha[PK_ATTD_HP], e[PK_ATTD_HP];
#pragma unroll
            for (int t = 0; t < PK_ATTD_HP; t++) {
                const float sv = j < P ? ((part[t][0] + part[t][1]) + (part[t][2] + part[t][3])) * scale : -INFINITY;
                const float mn = fmaxf(m[t], pk_dev_warp_max(sv));
                alpha[t] = expf(m[t] - mn); /* 0 on the first block: m = -inf */
                e[t] = j < P ? expf(sv - mn) : 0.0f;
                l[t] = fmaf(l[t], alpha[t], e[t]);
                m[t] = mn;
            }
            /* Σ_jj e_jj · v_jj: lane takes dims [dl · lane, + dl); e_jj from lane jj */
            float bs[PK_ATTD_HP][DL];
#pragma unroll
            for (int t = 0; t < PK_ATTD_HP; t++)
#pragma unroll
                for (int i = 0; i < DL; i++) bs[t][i] = 0.0f;
            const pk_bf16 *vb = V_s + pk_attd_kidx(jb, dl * lane, D); /* row jb, this lane's dims */
#pragma unroll 1
            for (int jj0 = 0; jj0 < nb; jj0 += 4) {
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int jj = jj0 + u;
                    const pk_bf16 *vr = vb + (jj < nb ? jj : 0) * (D + 8);
                    float vf[DL];
                    if (DL >= 8 && dl == 8) {
                        pk_dev_unpack8(*(const uint4 *)vr, vf);
                    } else if (DL >= 4 && dl == 4) {
                        const uint2 w2 = *(const uint2 *)vr;
                        vf[0] = pk_dev_lo_f32(w2.x); vf[1] = pk_dev_hi_f32(w2.x);
                        vf[2] = pk_dev_lo_f32(w2.y); vf[3] = pk_dev_hi_f32(w2.y);
                    } else {
                        const uint32_t w1 = *(const uint32_t *)vr;
                        vf[0] = pk_dev_lo_f32(w1); vf[1] = pk_dev_hi_f32(w1);
                    }
#pragma unroll
                    for (int t = 0; t < PK_ATTD_HP; t++) {
                        const float ev = __shfl_sync(PK_DEV_FULL_MASK, e[t], jj & 31); /* 0 past nb */
                        if (jj < nb)
#pragma unroll
                            for (int i = 0; i < DL; i++)
                                if (i < dl) bs[t][i] = fmaf(ev, vf[i], bs[t][i]);
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < PK_ATTD_HP; t++)
#pragma unroll
                for (int i = 0; i < DL; i++) acc[t][i] = fmaf(acc[t][i], alpha[t], bs[t][i]);
        }
#pragma unroll
        for (int t = 0; t < PK_ATTD_HP; t++) {
            const int h = h0 + t;
            const float lw = pk_dev_warp_sum(l[t]);
            if (h < G) {
                if (lane == 0) {
                    red_m[warp * G + h] = m[t];
                    red_l[warp * G + h] = lw;
                }
#pragma unroll
                for (int i = 0; i < DL; i++)
                    if (i < dl) red[(warp * G + h) * D + dl * lane + i] = acc[t][i];
            }
        }
    }
}

/* The tensor-core path's primitives are mma.cuh's (D 64 / 128): against the scalar path, a
 * fraction of the instructions per warp and block, and all G heads in one pass. Rows past P read
 * row P - 1 (finite: the staged rows end there) and get e = 0. K_s [pos][D + 8] and V_s [pos][D +
 * 8] are read through ldmatrix (V's .trans). */
/* Every K fragment of the block of 32 positions from jb (rows past P read row P - 1): f[k / 16][h]
 * is ldmatrix x4 over rows jb + 16 h .. + 15 and dims k .. k + 15, matrix i = (rows + 8 · (i & 1),
 * dims + 8 · (i / 2)): A = K of one 16-position tile for pk_attd_warp_blocks_mmat. */
template <int D>
__device__ __forceinline__ void pk_attd_k_frags(uint32_t (&f)[D / 16][2][4], const pk_bf16 *K_s, int jb, int P) {
    const int lane = threadIdx.x % 32, row = (lane & 7) + 8 * ((lane >> 3) & 1), col = 8 * (lane >> 4);
    const int r0 = min(jb + row, P - 1), r1 = min(jb + 16 + row, P - 1);
#pragma unroll
    for (int k0 = 0; k0 < D; k0 += 16) {
        pk_ldsm4<false>(f[k0 / 16][0], K_s + pk_attd_kidx(r0, k0 + col, D));
        pk_ldsm4<false>(f[k0 / 16][1], K_s + pk_attd_kidx(r1, k0 + col, D));
    }
}

/* The tensor-core path with the positions as rows: S^T [16 positions][8] = K · Q^T and out^T
 * [16 dims][8] += V^T · P^T, the G <= 8 query heads as the 8 columns (columns G .. 7 zero): a block
 * of 32 positions takes 16 products for the scores and 16 per part of P for P · V (D 128), where
 * the heads on the 16 rows would leave most rows zero. K's fragments are ldmatrix loads, the A
 * operand; V's come through ldmatrix .trans as A = V^T. The score fragment (row = position, column
 * = head) is not the B layout P · V needs: movmatrix transposes it in registers. The score
 * fragment of 8 positions (lane: position gid, heads 2 tig, + 1), packed as bf16 pairs, is an 8x8
 * b16 matrix in the ldmatrix layout; movmatrix .trans hands lane (gid, tig) positions 2 tig, + 1 of
 * head gid: b0 (positions 0 .. 7 of 16) and b1 (8 .. 15). P enters P · V as two bf16 parts (hi,
 * then lo). The online softmax runs per column: the max over a block is the max over the lane's
 * rows and over the 8 lanes of its column (shuffles across gid); it runs in base 2 (scores scaled
 * by log2(e) / sqrt(D), ex2.approx for each exponential: one MUFU instead of expf's range
 * reduction; m goes out in base e for the fold), and the scores' products run as 4 chains of 4
 * (the two halves of D summed after): the loop is a latency chain of one warp's instructions. */
/* movmatrix .trans: the transpose of the 8x8 b16 matrix whose row gid, columns 2 tig, + 1 this lane
 * holds, in the same layout. */
__device__ __forceinline__ uint32_t pk_attd_movt(uint32_t a) {
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a)); /* every lane: not sunk */
    return d;
}
/* 2^x (ex2.approx.ftz: 0 for -inf) */
__device__ __forceinline__ float pk_attd_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float pk_attd_exp(float x) { return pk_attd_exp2(x); }
template <int NP>
__device__ inline void pk_attd_warp_blocks_mmat(int G, int P, const pk_bf16 *q_b, const pk_bf16 *K_s,
                                                const pk_bf16 *V_s, float *red, float *red_m, float *red_l) {
    constexpr int D = 64 * NP, DT = D / 16; /* head size, dim tiles of 16 (the rows of out^T) */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane >> 2, tig = lane & 3;
    const float scale = 1.4426950408889634f / sqrtf((float)D); /* log2(e) for base 2 */
    /* B = Q^T: column gid is head gid (zero past G), rows k 2 tig, +1 and + 8 */
    const pk_bf16 *qr = q_b + gid * (D + 8) + 2 * tig;
    const bool qv = gid < G;
    /* ldmatrix rows for V (A = V^T, .trans): matrix lane / 8 = (positions + 8 · (lane / 16), dims +
     * 8 · (lane / 8 & 1)); K's: pk_attd_k_frags */
    const int vrow = (lane & 7) + 8 * (lane >> 4), vcol = 8 * ((lane >> 3) & 1);
    const bool h0v = 2 * tig < G, h1v = 2 * tig + 1 < G; /* this lane's columns 2 tig, 2 tig + 1 */
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[DT][4];
#pragma unroll
    for (int t = 0; t < DT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
#pragma unroll 1
    for (int jb = 32 * warp; jb < P; jb += 32 * PK_DEV_WARPS) {
        /* S^T: m-tile h = positions jb + 16 h .. + 15; c0 c1 (position gid, heads 2 tig, + 1),
         * c2 c3 (position gid + 8) */
        float sc[2][4];
#pragma unroll
        for (int h = 0; h < 2; h++) sc[h][0] = sc[h][1] = sc[h][2] = sc[h][3] = 0.0f;
        {
            uint32_t ak[D / 16][2][4];
            pk_attd_k_frags<D>(ak, K_s, jb, P);
            float sc2[2][4]; /* the upper half of D */
#pragma unroll
            for (int h = 0; h < 2; h++) sc2[h][0] = sc2[h][1] = sc2[h][2] = sc2[h][3] = 0.0f;
#pragma unroll
            for (int k0 = 0; k0 < D; k0 += 16) {
                const uint32_t b0 = qv ? *(const uint32_t *)(qr + k0) : 0u;
                const uint32_t b1 = qv ? *(const uint32_t *)(qr + k0 + 8) : 0u;
#pragma unroll
                for (int h = 0; h < 2; h++)
                    pk_mma_16816(k0 >= D / 2 ? sc2[h] : sc[h], ak[k0 / 16][h], b0, b1);
            }
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int u = 0; u < 4; u++) sc[h][u] += sc2[h][u];
        }
        /* online softmax per column over this block's 32 positions (4 in this lane, the rest in
         * the 8 lanes of its tig) */
        float bm[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int j = jb + 16 * h + gid + 8 * (u >> 1);
                sc[h][u] = j < P ? sc[h][u] * scale : -INFINITY;
                bm[u & 1] = fmaxf(bm[u & 1], sc[h][u]);
            }
        float alpha[2];
#pragma unroll
        for (int c = 0; c < 2; c++) {
            bm[c] = fmaxf(bm[c], __shfl_xor_sync(PK_DEV_FULL_MASK, bm[c], 4));
            bm[c] = fmaxf(bm[c], __shfl_xor_sync(PK_DEV_FULL_MASK, bm[c], 8));
            bm[c] = fmaxf(bm[c], __shfl_xor_sync(PK_DEV_FULL_MASK, bm[c], 16));
            const float mn = fmaxf(m[c], bm[c]); /* finite: position jb is < P */
            alpha[c] = pk_attd_exp(m[c] - mn);   /* 0 on the first block: m = -inf */
            m[c] = mn;
        }
        float ls[2] = {0.0f, 0.0f};
        /* P^T as the B fragments of the 16 positions kk: hi (and lo) parts, b0 and b1 */
        uint32_t pbh[2][2], pbl[2][2];
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int r = 0; r < 2; r++) { /* r: positions gid (c0 c1), gid + 8 (c2 c3) */
                const float e0 = pk_attd_exp(sc[h][2 * r] - m[0]), e1 = pk_attd_exp(sc[h][2 * r + 1] - m[1]);
                const __nv_bfloat162 hb = __floats2bfloat162_rn(e0, e1); /* .x = e0: the low half */
                const float h0 = __low2float(hb), h1 = __high2float(hb);
                ls[0] += e0;
                ls[1] += e1;
                const uint32_t th = pk_attd_movt(*(const uint32_t *)&hb);
                pbh[h][r] = qv ? th : 0u; /* head gid: columns past G zero, as the q fragments */
                const __nv_bfloat162 lb = __floats2bfloat162_rn(e0 - h0, e1 - h1);
                const uint32_t tl = pk_attd_movt(*(const uint32_t *)&lb);
                pbl[h][r] = qv ? tl : 0u;
            }
#pragma unroll
        for (int c = 0; c < 2; c++) l[c] = fmaf(l[c], alpha[c], ls[c]);
#pragma unroll
        for (int t = 0; t < DT; t++) {
            acc[t][0] *= alpha[0];
            acc[t][1] *= alpha[1];
            acc[t][2] *= alpha[0];
            acc[t][3] *= alpha[1];
        }
        /* out^T += V^T · P^T per 16 positions kk: A = V^T (dims d0 .. + 15, positions), B = P^T
         * (positions 2 tig, + 1 and + 8; column gid) */
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            const int vr = min(jb + 16 * kk + vrow, P - 1);
            uint32_t av[DT][4];
#pragma unroll
            for (int t = 0; t < DT; t++) pk_ldsm4<true>(av[t], V_s + pk_attd_kidx(vr, 16 * t + vcol, D));
#pragma unroll
            for (int t = 0; t < DT; t++) pk_mma_16816(acc[t], av[t], pbh[kk][0], pbh[kk][1]);
#pragma unroll
            for (int t = 0; t < DT; t++) pk_mma_16816(acc[t], av[t], pbl[kk][0], pbl[kk][1]);
        }
    }
#pragma unroll
    for (int c = 0; c < 2; c++) {
        l[c] += __shfl_xor_sync(PK_DEV_FULL_MASK, l[c], 4);
        l[c] += __shfl_xor_sync(PK_DEV_FULL_MASK, l[c], 8);
        l[c] += __shfl_xor_sync(PK_DEV_FULL_MASK, l[c], 16);
    }
#pragma unroll
    for (int c = 0; c < 2; c++) m[c] *= 0.6931471805599453f; /* the fold's base e */
    __syncwarp(); /* the warp's last block before its slice of red takes the sums */
    if (gid == 0) {
        if (h0v) {
            red_m[warp * G + 2 * tig] = m[0];
            red_l[warp * G + 2 * tig] = l[0];
        }
        if (h1v) {
            red_m[warp * G + 2 * tig + 1] = m[1];
            red_l[warp * G + 2 * tig + 1] = l[1];
        }
    }
    float *o = red + warp * G * D;
#pragma unroll
    for (int t = 0; t < DT; t++) {
        const int d = 16 * t + gid;
        if (h0v) {
            o[(2 * tig) * D + d] = acc[t][0];
            o[(2 * tig) * D + d + 8] = acc[t][2];
        }
        if (h1v) {
            o[(2 * tig + 1) * D + d] = acc[t][1];
            o[(2 * tig + 1) * D + d + 8] = acc[t][3];
        }
    }
}

/* The fold of the 8 warps' sums (after the block loop and a CTA barrier): orow[h][d] =
 * bf16(Σ_w f_w · acc_w / Σ_w f_w · l_w), f_w = exp(m_w - M), warps in order (a warp without
 * positions has m = -inf: f = 0); or, orow NULL, (num, M, den) into part_out [G][D + 2]. Thread i
 * folds element i of [G][D] (red [8][G][D], red_m / red_l [8][G]). */
__device__ __forceinline__ void pk_attd_fold(int G, int D, const float *red, const float *red_m,
                                             const float *red_l, pk_bf16 *orow, float *part_out) {
    for (int i = threadIdx.x; i < G * D; i += PK_CUDA_THREADS) {
        const int h = i / D, d = i - h * D;
        float M = -INFINITY;
        for (int w = 0; w < PK_DEV_WARPS; w++) M = fmaxf(M, red_m[w * G + h]);
        float num = 0.0f, den = 0.0f;
        for (int w = 0; w < PK_DEV_WARPS && M != -INFINITY; w++) { /* M = -inf: no position (P 0) */
            const float f = expf(red_m[w * G + h] - M);
            num = fmaf(red[w * G * D + i], f, num);
            den = fmaf(red_l[w * G + h], f, den);
        }
        pk_att_put(orow, part_out, i, h, d, D, num, den, M);
    }
}

/* out != NULL: the normalised bf16 heads at out + g · G · D; out == NULL: the split's (acc, m, l)
 * per head into part_out [G][D + 2] (pk_dev_attention_split's layout; (0, -inf, 0) when the split
 * has no position). GC: G when the caller knows it at compile time (the generated kernel), so
 * only the block loop that G takes is compiled; 0: both, chosen at run time (the harness).
 * late: the runtime left the task's dependency wait and the stage's copy wait to this function
 * (rows.cuh's pk_dev_dep_wait): both happen right before phase A, after the set-up. */
template <int NP, int GC = 0>
__device__ inline void pk_dev_attention_decode(const pk_layer_params *p, int kv0, const pk_bf16 *qkv,
                                               pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                               const pk_bf16 *k_norm, pk_bf16 *out, float *part_out, char *smem,
                                               bool late = false) {
    const int D = p->head_dim, Hkv = p->num_kv_heads, G = p->num_q_heads / Hkv, g = kv0;
    const int half = D / 2, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int *hdr = (const int *)(smem + pk_attd_layout_of(D, G, 0).hdr); /* L.hdr: D and G alone */
    const int P = hdr[0], new_slot = hdr[3]; /* new_slot -1: pos is not this split's */
    const pk_attd_layout L = pk_attd_layout_of(D, G, P);
    const float *cs_s = (const float *)(smem + L.cs), *sn_s = (const float *)(smem + L.sn);
    float *q_s = (float *)(smem + L.q), *red = (float *)(smem + L.red);
    float *red_m = (float *)(smem + L.red_m), *red_l = (float *)(smem + L.red_l);
    pk_bf16 *K_s = (pk_bf16 *)(smem + L.k), *V_s = (pk_bf16 *)(smem + L.v);
    const float eps = p->qk_norm_eps;
    /* the tensor-core path (q kept as bf16) for G >= PK_ATTD_MMA_MIN_G */
    constexpr bool can_mma = PK_ATTD_USE_MMA(NP) && (GC == 0 || GC >= PK_ATTD_MMA_MIN_G);
    constexpr bool can_scalar = GC == 0 || !can_mma;
    const bool mma = can_mma && D == 64 * NP && G >= PK_ATTD_MMA_MIN_G;
    if (!mma && !can_scalar) __trap(); /* GC != G or D != 64 · NP: the generated code's arguments */
    const pk_bf16 *grp = qkv + (int64_t)g * (G + 2) * D; /* q heads [G][D], K [D], V [D] of head g */
    if (late) pk_dev_dep_wait_staged();

    /* phase A: item 0 (warp 0) writes K of position pos to the cache and to K_s, item G + 1 its V
     * (another warp: V's loads are not queued behind K's round trip); items 1 .. G rotate q head
     * item - 1 into q_s */
    for (int item = warp; item <= G + 1; item += PK_DEV_WARPS) {
        if ((item == 0 || item == G + 1) && new_slot < 0) continue;
        if (item == G + 1) { /* V: bf16 pairs (2i, 2i + 1), all loaded before any store */
            const int64_t off = ((int64_t)new_slot * Hkv + g) * D;
            const pk_bf16 *vx = grp + (int64_t)(G + 1) * D;
            uint32_t u[NP];
#pragma unroll
            for (int ii = 0; ii < NP; ii++) {
                const int i = lane + 32 * ii;
                if (i < half)
                    u[ii] = pk_dev_aligned4(vx) ? pk_dev_ldcg4(vx + 2 * i)
                                                : (uint32_t)pk_dev_ldcg_bf16(vx + 2 * i) |
                                                      (uint32_t)pk_dev_ldcg_bf16(vx + 2 * i + 1) << 16;
            }
#pragma unroll
            for (int ii = 0; ii < NP; ii++) {
                const int i = lane + 32 * ii;
                if (i < half) {
                    *(uint32_t *)(v_cache + off + 2 * i) = u[ii];
                    *(uint32_t *)(V_s + pk_attd_kidx(P - 1, 2 * i, D)) = u[ii];
                }
            }
            continue;
        }
        float cs[NP], sn[NP];
#pragma unroll
        for (int ii = 0; ii < NP; ii++) {
            const int i = lane + 32 * ii;
            cs[ii] = i < half ? cs_s[i] : 0.0f;
            sn[ii] = i < half ? sn_s[i] : 0.0f;
        }
        /* one rotation code path for K and the q heads (instruction fetches: see below) */
        float ya[NP], yb[NP];
        const pk_bf16 *nrm = !q_norm ? nullptr : item > 0 ? (const pk_bf16 *)(smem + L.nq) : (const pk_bf16 *)(smem + L.nk);
        pk_att_head<NP, true>(grp + (int64_t)(item > 0 ? item - 1 : G) * D, nrm, eps, cs, sn, D, lane, ya, yb);
        if (item > 0) {
            /* the rotated head holds bf16 values (pk_att_head rounds): bf16 for the tensor cores
             * loses nothing */
            float *q = q_s + (item - 1) * D;
            pk_bf16 *qb = (pk_bf16 *)q_s + (item - 1) * (D + 8);
#pragma unroll
            for (int ii = 0; ii < NP; ii++) {
                const int i = lane + 32 * ii;
                if (i < half && mma) {
                    qb[i] = pk_dev_f32_to_bf16(ya[ii]);
                    qb[i + half] = pk_dev_f32_to_bf16(yb[ii]);
                } else if (i < half) {
                    q[i] = ya[ii];
                    q[i + half] = yb[ii];
                }
            }
            continue;
        }
        const int64_t off = ((int64_t)new_slot * Hkv + g) * D;
#pragma unroll
        for (int ii = 0; ii < NP; ii++) {
            const int i = lane + 32 * ii;
            if (i < half) {
                const pk_bf16 a = pk_dev_f32_to_bf16(ya[ii]), b = pk_dev_f32_to_bf16(yb[ii]);
                k_cache[off + i] = a;
                k_cache[off + i + half] = b;
                K_s[pk_attd_kidx(P - 1, i, D)] = a; /* pos is the last local row */
                K_s[pk_attd_kidx(P - 1, i + half, D)] = b;
            }
        }
    }
    const uint32_t bar = (uint32_t)__cvta_generic_to_shared(smem + L.hdr + PK_ATTD_BAR_OFF); /* bulk rows */
    if constexpr (pk_attd_bulk) pk_dev_mbar_wait(bar, 0); /* the staged rows */
    pk_cta_sync();
    if constexpr (pk_attd_bulk)
        if (threadIdx.x == 0) pk_dev_mbar_inval(bar); /* every thread has passed its wait */

    constexpr int passes = 1;
    for (int pass = 0; pass < passes; pass++) {
        if constexpr (can_mma)
            if (mma) {
                pk_attd_warp_blocks_mmat<NP>(G, P, (const pk_bf16 *)q_s, K_s, V_s, red, red_m, red_l);
            }
        if constexpr (can_scalar)
            if (!mma) pk_attd_warp_blocks<NP>(D, G, P, q_s, K_s, V_s, red, red_m, red_l);
        pk_cta_sync();
    }

    pk_attd_fold(G, D, red, red_m, red_l, out ? out + (int64_t)g * G * D : nullptr, part_out);
}

#endif /* PK_CUDA_ATTENTION_DECODE_CUH */
