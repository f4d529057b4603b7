// SPDX-License-Identifier: Apache-2.0
/* dispatch.cuh — what generated dispatch code (kernel.cu's pk_gen_run_task) builds its calls
 * from: the compact task table entry, weight row accessors, row clipping, and one call-through
 * per task kind. Views are resolved at code-generation time: on the GPU every weight is one
 * buffer in the layout the kernels read (a fused tensor's rows already interleaved), so a weight
 * is a plain one-segment pk_rows.
 *
 * The call-throughs are __noinline__: each kind's kernel is compiled once, however many layers
 * call it, so nvcc's time grows with the task kinds, not the model's depth (inlining every
 * layer's call took minutes for a 12-layer graph). The layer's shapes stay literals at the call.
 */
#ifndef PK_CUDA_DISPATCH_CUH
#define PK_CUDA_DISPATCH_CUH

#include <stdint.h>

/* The buffer table (tensor id -> device base, pk_dev_state's buf) in constant memory, written
 * before every launch (runtime.cuh): the generated dispatch reads B[id] with literal ids, which
 * become constant-bank operands instead of a load of S->buf and a dependent load of its entry on
 * every task's path after the dependency wait. Larger tables (> 32 KB) stay in global memory. */
#if PK_GEN_NUM_BUFFERS <= 4096
#define PK_GEN_CBUF 1
__constant__ void *pk_gen_cbuf[PK_GEN_NUM_BUFFERS];
#define PK_GEN_BUFS(S) ((void *const *)pk_gen_cbuf)
#else
#define PK_GEN_CBUF 0
#define PK_GEN_BUFS(S) ((S)->buf)
#endif

/* A task as the device sees it: kind and shapes come from its layer's case in the dispatch. */
typedef struct pk_gen_task {
    uint32_t layer;      /* index into pk_gen_layers; 0xffffffff for the BEGIN task */
    uint32_t index;      /* position in the layer's grid */
    uint32_t dep_event;  /* waited on (PK_NO_EVENT: none) */
    uint32_t trig_event; /* signalled when done */
} pk_gen_task;

/* A layer's weight tiles as byte ranges, for the shared-memory staging of runtime.cuh (codegen.c's emit_prefetch_entry):
 * task idx's tile is bytes [off0 + idx · step, + bytes) of buffer `buffer`; bytes 0: none.
 * Uneven tiles: step PK_GEN_STEP_UNEVEN, and the tile is rows [idx · rows / parts, (idx + 1) ·
 * rows / parts) of the weight (pk_gen_splits[layer], pk_task_tile); bytes is the largest tile's.
 * The uneven branch is compiled only into graphs that have uneven tiles (PK_GEN_UNEVEN): in every
 * kernel it slowed the graphs whose tiles are all equal. */
#define PK_GEN_STEP_UNEVEN (~0ull)
#ifndef PK_GEN_UNEVEN
#define PK_GEN_UNEVEN 0 /* kernel.cu defines it: 1 when a layer's tiles are uneven */
#endif
#ifndef PK_GEN_ATT_HEAD
#define PK_GEN_ATT_HEAD 0u /* kernel.cu defines it: the decode attention layout's hdr offset */
#endif
#ifndef PK_GEN_MLP_FUSED
#define PK_GEN_MLP_FUSED 0 /* kernel.cu defines it: 1 when a layer is RMSNORM_SWIGLU_DOWN */
#endif
typedef struct pk_gen_prefetch {
    uint32_t buffer;
    uint32_t bytes;     /* the tile: whole rows */
    uint32_t row_bytes; /* one row (a multiple of 16 when bytes != 0) */
    uint64_t off0, step;
} pk_gen_prefetch;

/* An uneven layer's split (its weight's rows, its grid; rows · grid < 2^32, codegen.c). */
typedef struct pk_gen_split {
    uint32_t rows, parts;
} pk_gen_split;

/* A plain weight of `rows` rows of `stride` elements at base. */
__device__ __forceinline__ pk_rows pk_gen_rows(const void *base, uint32_t rows, uint64_t stride) {
    pk_rows w;
    for (int i = 0; i < PK_FUSE_MAX; i++) {
        w.seg[i] = (const pk_bf16 *)base;
        w.seg_rows[i] = 0;
    }
    w.seg_rows[0] = rows;
    w.nseg = 1;
    w.row_stride = stride;
    return w;
}

/* Rows [row0, row0 + rows) of a tile that hold tokens this step (n_tok of them). */
__device__ __forceinline__ int pk_gen_live_rows(int row0, int rows, int n_tok) {
    int end = row0 + rows < n_tok ? row0 + rows : n_tok;
    return end > row0 ? end - row0 : 0;
}

__device__ __noinline__ void pk_gen_call_embedding(const int32_t *tokens, int n_tok, const pk_rows *w, int col0,
                                                  int ncols, pk_bf16 *out, int64_t out_stride, char *smem) {
    pk_dev_embedding(tokens, n_tok, w, col0, ncols, out, out_stride, smem);
}
__device__ __noinline__ void pk_gen_call_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w, int n_tok,
                                                int hidden, float eps, pk_bf16 *out, int64_t out_stride, char *smem) {
    pk_dev_rmsnorm(x, x_stride, w, n_tok, hidden, eps, out, out_stride, smem);
}
/* The linear kinds take the rows of their tile staged in shared memory (wst, wst_rows; 0: none). */
#define PK_GEN_WST , wst, wst_rows
/* The GEMV call-throughs are templates on KT = PK_GEN_K(K) (codegen.c): one instance per input
 * size K up to PK_LIN_SPECIALISE_K_MAX, each called only by the layers of that K, so nvcc
 * specialises it to their shapes (constant loop bounds and strides); larger K share the KT = 0
 * instance, which takes K at run time (nvcc still propagates a K that all its callers share). A
 * single instance called with two K (Qwen3-0.6B's o_proj 2048 and down_proj 3072) made the o_proj
 * task slower; specialising the larger K (the Qwen3-8B's 4096 and 12288) made it slower too. */
#define PK_LIN_SPECIALISE_K_MAX 2048
#define PK_GEN_K(k) ((k) <= PK_LIN_SPECIALISE_K_MAX ? (k) : 0)
template <int KT>
__device__ __noinline__ void pk_gen_call_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K_arg, const pk_rows *w,
                                               int n0, int ncols, const pk_bf16 *residual, int64_t res_stride,
                                               pk_bf16 *out, int64_t out_stride, char *smem, const pk_bf16 *wst,
                                               int wst_rows, pk_lin_chunk ch) {
    (void)wst, (void)wst_rows;
    const int K = KT ? KT : K_arg;
    pk_dev_linear(x, x_stride, n_tok, K, w, n0, ncols, residual, res_stride, out, out_stride, smem PK_GEN_WST, ch);
}
/* acc (RMSNORM_LINEAR's PK_V_NL_ACC, or nullptr): x is x + acc, and the task stores its columns
 * [sum0, sum1) of that into sum. */
template <int KT>
__device__ __noinline__ void pk_gen_call_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *norm_w,
                                                       float eps, int n_tok, int K_arg, const pk_rows *w, int n0,
                                                       int ncols, pk_bf16 *out, int64_t out_stride, char *smem,
                                                       const pk_bf16 *wst, int wst_rows,
                                                       const int64_t *acc, int64_t acc_stride, pk_bf16 *sum,
                                                       int64_t sum_stride, int sum0, int sum1, pk_lin_chunk ch) {
    (void)wst, (void)wst_rows;
    const int K = KT ? KT : K_arg;
    pk_dev_rmsnorm_linear(x, x_stride, norm_w, eps, n_tok, K, w, n0, ncols, out, out_stride, smem PK_GEN_WST, acc,
                          acc_stride, sum, sum_stride, sum0, sum1, ch);
}
/* RMSNORM_SWIGLU_DOWN: the task's tile is tile_rows rows of K (its gate and up blocks, then its
 * column block of down_proj, ib · K elements as [K][ib]). In a one-token step whose whole tile is
 * staged (runtime.cuh's pk_stage_mlp keeps room above it), gu [2 · ib] and act_s [ib] fp32 go in
 * shared memory right above the tile; otherwise gu is the scratch tile in global memory and
 * act_s lies at smem (the GEMV is done with the kernels' area by then). */
__device__ __forceinline__ int pk_gen_mlp_staged(int wst_rows, int n_tok, int tile_rows) {
    return n_tok == 1 && wst_rows > 0 && (wst_rows & ~PK_STAGED_LATE) >= tile_rows;
}
__device__ __forceinline__ pk_bf16 *pk_gen_mlp_gu(pk_bf16 *scratch, const pk_bf16 *wst, int wst_rows, int n_tok,
                                                  int tile_rows, int K) {
    return pk_gen_mlp_staged(wst_rows, n_tok, tile_rows) ? (pk_bf16 *)wst + (int64_t)tile_rows * K : scratch;
}
/* The second half, after pk_gen_call_rmsnorm_linear wrote gu (pk_gen_mlp_gu's): silu · mul, then the
 * partial sums over the task's ib features from its column block (the tile's last ib rows: at
 * row r0 of the weight, or staged) added to acc [T, N]. smem_bytes: the shared memory the CTA may
 * use once the GEMV is done (the kernels' area and the staging area above it). */
__device__ __noinline__ void pk_gen_call_mlp_down(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ib,
                                                 const pk_rows *w, int r0, int tile_rows, int N, int64_t *acc,
                                                 int64_t acc_stride, char *smem, uint32_t smem_bytes,
                                                 const pk_bf16 *wst, int wst_rows) {
    const bool staged = pk_gen_mlp_staged(wst_rows, n_tok, tile_rows);
    const pk_bf16 *wd = staged ? wst + (int64_t)(tile_rows - ib) * N : pk_dev_rows_get(w, (uint32_t)r0);
    if (!staged && n_tok == 1 && pk_dev_mlp_down_stream(gu, ib, wd, N, acc, smem, smem_bytes))
        return;
    float *act_s = staged ? (float *)(smem + (((uintptr_t)(gu + 2 * ib) - (uintptr_t)smem + 15) & ~(uintptr_t)15))
                          : (float *)smem;
    pk_dev_mlp_down_add(gu, gu_stride, !staged, n_tok, ib, wd, N, acc, acc_stride, act_s);
}
/* LINEAR_RESIDUAL's PK_V_LR_CLEAR: zeroes columns [c0, c1) of rows [0, n_tok) of acc, after the
 * task's GEMV (which waited for the task's event: every reader of acc is done). */
__device__ __noinline__ void pk_gen_call_acc_clear(int64_t *acc, int64_t stride, int n_tok, int c0, int c1) {
    const int n = c1 - c0;
    for (int e = threadIdx.x; e < n_tok * n; e += PK_CUDA_THREADS) {
        const int t = e / n;
        __stcg(acc + t * stride + c0 + (e - t * n), 0ll);
    }
}
template <int KT>
__device__ __noinline__ void pk_gen_call_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K_arg,
                                                        const pk_rows *w, int n0, int ncols, const pk_bf16 *residual,
                                                        int64_t res_stride, pk_bf16 *out, int64_t out_stride,
                                                        char *smem, const pk_bf16 *wst, int wst_rows, pk_lin_chunk ch) {
    (void)wst, (void)wst_rows;
    const int K = KT ? KT : K_arg;
    pk_dev_silu_mul_linear(x, x_stride, n_tok, K, w, n0, ncols, residual, res_stride, out, out_stride, smem PK_GEN_WST,
                           ch);
}
__device__ __noinline__ void pk_gen_call_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I, int i0,
                                                 int ncols, pk_bf16 *out, int64_t out_stride, char *smem) {
    pk_dev_silu_mul(x, x_stride, n_tok, I, i0, ncols, out, out_stride, smem);
}
/* LINEAR_SPLITK_RESIDUAL: the task's K block added to acc; the layer's last task writes out.
 * wt: the block's rows of the weight's transpose ([kc][N], uploaded transposed); wst_rows > 0: those
 * rows staged at wst (static mode; with rows.cuh's PK_STAGED_LATE the task waits itself). */
__device__ __noinline__ void pk_gen_call_linear_splitk(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc,
                                                      const pk_bf16 *wt, int N, float *acc, int64_t acc_stride,
                                                      const pk_bf16 *residual, int64_t res_stride, pk_bf16 *out,
                                                      int64_t out_stride, int grid, pk_u64 *counter, char *smem,
                                                      const pk_bf16 *wst, int wst_rows) {
    pk_dev_linear_splitk_add(x, x_stride, n_tok, kc, wt, N, acc, acc_stride, smem, wst, wst_rows);
    if (pk_last_of(counter, (pk_u64)grid)) /* the layer's last task of the step */
        pk_dev_linear_splitk_finish(n_tok, N, acc, acc_stride, residual, res_stride, out, out_stride);
}
/* RMSNORM_LINEAR_SWIGLU's second half, after pk_gen_call_rmsnorm_linear wrote the task's gu tile
 * (a step of more rows with ch.m > 1: the task's tiles of its chunk): its own call, so the GEMV's
 * instance is the one rmsnorm_linear already has. */
__device__ __noinline__ void pk_gen_call_swiglu(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ncols, int block,
                                               pk_bf16 *out, int64_t out_stride, pk_lin_chunk ch) {
    pk_cta_sync(); /* every warp's gu columns written */
    if (n_tok > 1 && ch.m > 1)
        pk_dev_swiglu_chunk(gu, gu_stride, n_tok, block, out, out_stride, ch);
    else
        pk_dev_swiglu_blocks(gu, gu_stride, n_tok, ncols, block, out, out_stride);
}
/* NP: RoPE pairs per lane for the layer's head size (attention.cuh's pk_att_pairs): one instance
 * of the attention code per head size in the kernel, not the largest one's unrolled loops. GC: the
 * layer's query heads per KV head (codegen.c attn_group; 0: decided at run time).
 * staged > 0: pk_gen_call_attention_stage staged this decode row's KV cache before the wait
 * (attention_decode.cuh); 0: the general kernel. */
template <int NP, int GC>
__device__ __noinline__ void pk_gen_call_attention(const pk_layer_params *p, const float *inv_freq, const pk_attn_step *s,
                                                  int kv0, int nkv, const pk_bf16 *qkv, int64_t qkv_stride,
                                                  pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                                  const pk_bf16 *k_norm, pk_bf16 *out, int64_t out_stride, char *smem,
                                                  int staged) {
    if (staged > 0)
        pk_dev_attention_decode<NP, GC>(p, kv0, qkv, k_cache, v_cache, q_norm, k_norm, out, nullptr, smem,
                                        (staged & PK_STAGED_LATE) != 0); /* rows.cuh */
    else
        pk_dev_attention_np<NP>(p, inv_freq, s, kv0, nkv, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out,
                                out_stride, smem);
}
/* Split `split` of `nsplit` over the KV length: (acc, m, l) per head into part, the task's tile
 * (staged as above); then the group's completion counter: the group's last task to finish folds
 * the group's nsplit tiles (group_part [T][nsplit][nheads][D + 2], row stride part_stride) into
 * group_out [T][nheads · D]. Ordering as the runtime's event signal: the CTA's writes, a barrier,
 * thread 0's acq_rel increment; the last task's thread 0 has acquired every other task's
 * increment before its barrier, and the fold reads the tiles through L2. kv_fold 2 (layers.c
 * pk_graph_attn_kv_fold): a direct step's Q blocks each over two tasks, folded per Q block
 * (pk_att_fold), its counters the group's after counter. */
template <int NP, int GC>
__device__ __noinline__ void pk_gen_call_attention_partial(const pk_layer_params *p, const float *inv_freq,
                                                          const pk_attn_step *s, int kv0, int nkv, int split, int nsplit,
                                                          const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
                                                          pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm,
                                                          float *part, int64_t part_stride, char *smem,
                                                          uint32_t att_off, int staged,
                                                          const float *group_part, pk_bf16 *group_out,
                                                          int64_t out_stride, int nheads, pk_u64 *counter,
                                                          int kv_fold) {
    const int G = p->num_kv_heads > 0 ? p->num_q_heads / p->num_kv_heads : 0;
    static_assert(PK_ATTN_DIRECT_QROWS == PK_APF_QROWS / 2, "a task's q-rows of a direct step: half a Q block");
    if (staged <= 0 && s->n_tok > 1 && G > 0 && s->n_tok >= PK_ATTN_DIRECT_ROWS(nsplit, G)) {
        /* A step of many rows (q-rows for at least half the group's tasks to get a full Q block;
         * fewer, e.g. a few decode rows at a long context, keep the split over the KV length, and
         * only they fit the partial tensor: pk_abi.h): the group's tasks share its Q blocks, each
         * over the whole KV length, and write out directly: no partials, no fold (one task per
         * group folded every row's partials, serially: near half the layer's time in a 512-row
         * step). Each writes every row's K / V (the same values) and reads only its own writes.
         * group_out is out's columns of head kv0; the kernel indexes out by absolute head. Head
         * sizes without the tensor-core path: split 0 takes the group alone. No task of such a step
         * calls pk_last_of, so the counter stays whole. With kv_fold 2 (the group's Q blocks of
         * a full step would leave half its tasks idle) tasks 2i and 2i + 1 take Q blocks i, i +
         * nsplit / 2, ..., each half of the block's positions, and fold per Q block. */
        const bool mma = pk_att_prefill_ok<NP>(p->head_dim, G);
        pk_bf16 *out = group_out - (int64_t)kv0 * G * p->head_dim;
        if (mma && kv_fold == 2) {
            const pk_att_fold f = {part - (int64_t)split * nheads * (p->head_dim + 2), part_stride, nsplit, counter + 1};
            pk_dev_attention_split<NP>(p, inv_freq, s, kv0, nkv, split % 2, 2, qkv, qkv_stride, k_cache, v_cache, q_norm,
                                       k_norm, out, out_stride, nullptr, 0, smem, split / 2, nsplit / 2, &f);
            return;
        }
        if (mma || split == 0)
            pk_dev_attention_split<NP>(p, inv_freq, s, kv0, nkv, 0, 1, qkv, qkv_stride, k_cache, v_cache, q_norm,
                                       k_norm, out, out_stride, nullptr, 0, smem, mma ? split : 0, mma ? nsplit : 1);
        return;
    }
    if (staged > 0)
        pk_dev_attention_decode<NP, GC>(p, kv0, qkv, k_cache, v_cache, q_norm, k_norm, nullptr, part, smem + att_off,
                                        (staged & PK_STAGED_LATE) != 0); /* rows.cuh */
    else
        pk_dev_attention_split<NP>(p, inv_freq, s, kv0, nkv, split, nsplit, qkv, qkv_stride, k_cache, v_cache, q_norm,
                                   k_norm, nullptr, 0, part, part_stride, smem);
    if (!pk_last_of(counter, (pk_u64)nsplit)) return;
    pk_dev_attention_combine(s->n_tok, nheads, p->head_dim, nsplit, group_part, part_stride, group_out, out_stride,
                             smem, PK_CUDA_SMEM_BYTES);
}
/* Before the dependency wait (static mode): stages a decode row's KV cache (of split `split` of
 * `nsplit`; 1: all of it); returns 0 when nothing is staged (run the general kernel), else 1 + the
 * rows staged. smem_bytes: what this launch's block has. */
template <int NP>
__device__ __noinline__ int pk_gen_call_attention_stage(const pk_layer_params *p, const float *inv_freq,
                                                       const pk_attn_step *s, int kv0, int nkv, int split, int nsplit,
                                                       const pk_bf16 *k_cache, const pk_bf16 *v_cache,
                                                       const pk_bf16 *q_norm, const pk_bf16 *k_norm, char *smem,
                                                       int smem_bytes) {
    return pk_dev_attention_decode_stage<NP>(p, inv_freq, s, kv0, nkv, split, nsplit, k_cache, v_cache, q_norm, k_norm,
                                             smem, smem_bytes);
}
/* ARGMAX_PARTIAL: task `part` of `nparts` writes its (value, index) into column `part` of val /
 * idx [T, nparts]; the layer's last task to finish (counter) reduces every column into out [T].
 * RMSNORM_LINEAR_ARGMAX calls it after its GEMV and a barrier (codegen.c emits it), so that the
 * logits every thread of the CTA wrote are issued before any thread reads them back (through L2). */
__device__ __noinline__ void pk_gen_call_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok, int v0,
                                                       int nv, float *val, int32_t *idx, int64_t part_stride,
                                                       int part, int nparts, int32_t *out, pk_u64 *counter, int f,
                                                       const pk_bf16 *logits0, int V, const int32_t *sample_slot,
                                                       const int32_t *sample_params, const int32_t *token_pos,
                                                       char *smem) {
    /* rows [f, n_tok): those that draw a token (step_info's FIRST_SAMPLE) */
    logits += f * stride, logits0 += f * stride, val += f * part_stride, idx += f * part_stride;
    out += f, sample_slot += f, token_pos += f, n_tok -= f;
    pk_dev_argmax_partial(logits, stride, n_tok, v0, nv, val + part, idx + part, part_stride, smem);
    if (pk_last_of(counter, (pk_u64)nparts)) {
        pk_dev_argmax_reduce(val, idx, part_stride, n_tok, nparts, out, smem);
        pk_cta_sync(); /* out[] of every row written before the sampling rows read it */
        pk_dev_sample_rows(logits0, stride, V, n_tok, sample_slot, sample_params, token_pos, out, smem);
    }
}

#endif /* PK_CUDA_DISPATCH_CUH */
