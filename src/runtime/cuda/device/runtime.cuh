// SPDX-License-Identifier: Apache-2.0
/* runtime.cuh — the persistent kernel and the entry points of a generated kernel.so.
 *
 * Included at the end of kernel.cu, after the generated tables (pk_gen_tasks, pk_gen_events,
 * pk_gen_sched_*, pk_gen_layers), the PK_GEN_* constants and pk_gen_run_task.
 *
 * One launch runs a whole generation. Blocks 0 .. W-1 are workers (PK_CUDA_THREADS threads);
 * in dynamic mode block W holds the scheduler warps. All blocks must be resident at once (spin
 * waits): launched cooperatively, after an occupancy check that names the numbers.
 *   static:  worker w walks pk_gen_sched_tasks of w every step: before each task's wait a copy
 *            of the task's weight tile into shared memory when it fits (pk_stage_weights), the
 *            first stages of a streamed GEMV (pk_lin_pre_task), or of what else the task reads
 *            that the wait does not guard (pk_gen_stage_task: a decode row's KV cache), wait
 *            (dep event ≥ triggers · step), run, __syncthreads, thread 0 adds 1 to the trigger event. The add that
 *            completes END_OF_GRAPH runs prepare_next_step (decode_step.h, one thread) and adds 1
 *            to BEGIN, which starts the next step or, with `terminate` set, ends the kernel.
 *   dynamic: as the CPU runtime: the add that completes an event pushes it to scheduler queue
 *            e % S; scheduler warps (lane 0) push the event's tasks to the workers' queues
 *            round-robin; the END_OF_GRAPH scheduler runs prepare_next_step.
 * Tokens stream out through mapped host memory: prepare_next_step appends to step->emitted
 * (mapped) and publishes the count after __threadfence_system(); the host polls it.
 * Step times (pk_run_step_times): the thread running prepare_next_step stores one %globaltimer
 * stamp per step into step->rec (device memory, copied back after the kernel ends).
 */
#ifndef PK_CUDA_RUNTIME_CUH
#define PK_CUDA_RUNTIME_CUH

#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/stage_layout.h"

/* ================================ device ================================ */

/* prepare_next_step, the part the next step needs: reads the sampled tokens, plans the next
 * step and writes its step tensors; returns 1 if another step was planned. One thread. Its start
 * is the end of the step that ran (one %globaltimer store when step times are on). It runs on a
 * copy of the state struct: the PK_HD code reads and writes the state's fields one after another
 * through a pointer the compiler must assume aliases the arrays it stores to, so every field read
 * after a store was a dependent round trip to L2 (the acquire of every wait drops the SM's L1);
 * the copy's loads go out together, its fields then live in local memory, and it is written back
 * once at the end (nobody else reads the state during the step: the host after the kernel). */
__device__ __noinline__ int pk_step_advance(const pk_dev_state *S) {
    const int cancel = pk_ld_volatile_int(S->cancel); /* pk_cancel: the step ends the run */
    pk_step_state s = *S->step;
    pk_step_mark_end(&s, pk_dev_globaltimer());
    pk_step_finish(&s);
    const int more = !cancel && pk_step_plan(&s);
    *S->step = s;
    return more;
}

/* prepare_next_step, the part only the host waits for: publishes the tokens pk_step_advance
 * appended (mapped memory) to the host's poll. After the next step's BEGIN: the system-scope
 * fence waits for the mapped stores to land, which the next step need not wait for. One thread,
 * the one that ran pk_step_advance. */
__device__ __forceinline__ void pk_step_publish(const pk_dev_state *S) {
    __threadfence_system(); /* the emitted tokens before their count */
    *S->host_nemitted = S->step->nemitted;
}


/* The step is over (every task of it done and visible to the calling thread): plans the next one
 * and releases its BEGIN. One thread. */
__device__ __forceinline__ void pk_step_end(const pk_dev_state *S, pk_u64 step) {
    if (!pk_step_advance(S)) *(volatile int *)S->terminate = 1;
    pk_atom_add_acq_rel(pk_event_ctr(S, PK_GEN_BEGIN_EVENT), 1);
    pk_step_publish(S);
}

/* The first step, before any task runs. One thread. Step 1's time starts here. */
__device__ int pk_first_step(const pk_dev_state *S) {
    pk_step_mark_start(S->step, pk_dev_globaltimer());
    pk_step_reset(S->step);
    return pk_step_plan(S->step);
}

/* The rows holding a token in this step (step info, written by prepare_next_step before BEGIN). */
__device__ __forceinline__ int pk_step_rows(const pk_dev_state *S) {
    return __ldcg((const int *)PK_GEN_BUFS(S)[PK_GEN_STEP_INFO_BUF] + PK_STEP_INFO_NUM_TOKENS);
}

/* One trace record (thread 0). The caller reads %globaltimer for t1 before its signal and calls
 * this after it, and keeps the worker's record count *n in a register (read once from
 * S->trace_n): a record's stores, and above all a load of the count from L2, before the signal
 * would sit on every hand-off's path. */
__device__ __forceinline__ void pk_trace(const pk_dev_state *S, uint32_t w, pk_u64 *n, uint32_t t, pk_u64 step,
                                         pk_u64 t0, pk_u64 t1) {
    if (*n < S->trace_cap) {
        pk_gen_trace_rec *r = &S->trace[(pk_u64)w * S->trace_cap + *n];
        r->task = t;
        r->step = (uint32_t)step;
        r->start_ns = t0;
        r->end_ns = t1;
    }
    S->trace_n[w] = ++*n;
}

#if PK_GEN_UNEVEN
/* An uneven layer's tile (pk_gen_splits): rows [idx · rows / parts, (idx + 1) · rows / parts), as
 * codegen's rows_expr; sets p->bytes to this task's. Compiled only into graphs that have one
 * (codegen's PK_GEN_UNEVEN), out of line. */
__device__ __noinline__ const char *pk_task_tile_uneven(const pk_dev_state *S, const pk_gen_task task,
                                                        pk_gen_prefetch *p) {
    const pk_gen_split sp = pk_gen_splits[task.layer];
    const uint32_t r0 = task.index * sp.rows / sp.parts, r1 = (task.index + 1) * sp.rows / sp.parts;
    p->bytes = (r1 - r0) * p->row_bytes;
    return (const char *)PK_GEN_BUFS(S)[p->buffer] + p->off0 + (pk_u64)r0 * p->row_bytes;
}
#endif

/* Task t's weight tile (codegen's pk_gen_prefetches entry in *p) and its first byte; NULL when
 * the task has no tile (BEGIN, a kind without weight rows, rows not a multiple of 16 bytes). */
__device__ __forceinline__ const char *pk_task_tile(const pk_dev_state *S, uint32_t t, pk_gen_prefetch *p) {
    const pk_gen_task task = pk_gen_tasks[t];
    if (task.layer >= PK_GEN_NUM_LAYERS) return nullptr;
    *p = pk_gen_prefetches[task.layer];
    if (p->bytes == 0) return nullptr;
#if PK_GEN_UNEVEN
    if (p->step == PK_GEN_STEP_UNEVEN) return pk_task_tile_uneven(S, task, p);
#endif
    return (const char *)PK_GEN_BUFS(S)[p->buffer] + p->off0 + (pk_u64)task.index * p->step;
}

/* Shared-memory weight staging (static mode): before waiting on task t's dependency, every
 * thread issues 16-byte cp.async copies of t's weight tile, when the whole tile fits in
 * PK_WSTAGE_BYTES (stage_layout.h), into the area after the kernels' own
 * PK_CUDA_SMEM_BYTES. The copy runs while the CTA waits (the hand-off gap and the skew of the
 * layer before), so when the event fires the task reads those rows from shared memory instead
 * of starting a DRAM round trip. Returns the rows staged (0: none). Every thread calls it. */
/* (pk_stage_copy, the copy itself: rows.cuh) */

/* Offset low (off = pk_stage_lo's, not the default PK_CUDA_SMEM_BYTES) when the next task's
 * attention is to stage above the tile (pk_att_early): only when the tile's GEMV leaves
 * [PK_STAGE_LO, PK_CUDA_SMEM_BYTES) free and the tile ends below the area's top. */
#define PK_STAGE_LO (16u << 10)
__device__ __forceinline__ int pk_stage_weights(const pk_dev_state *S, uint32_t t, char *smem, uint32_t off) {
    pk_gen_prefetch p;
    const char *src = PK_WSTAGE_BYTES ? pk_task_tile(S, t, &p) : nullptr;
    if (!src) return 0;
    /* whole tiles only: staging the first rows of a larger tile is slower (the CTA waits for its
     * copies, then streams the rest anyway). S->wstage_bytes: the area this launch has (less than PK_WSTAGE_BYTES, or 0, on GPUs with
     * less shared memory per block than the H100 / H200's 227 KB) */
    if (p.row_bytes == 0 || p.bytes > PK_WSTAGE_BYTES || p.bytes > S->wstage_bytes ||
        off + p.bytes > PK_CUDA_SMEM_BYTES + S->wstage_bytes)
        return 0;
    pk_stage_copy(src, p.bytes, smem, off);
    return (int)(p.bytes / p.row_bytes);
}

/* The next task's attention staged during this one (static mode, one-token steps). A decode
 * attention task stages its row's KV cache before its dependency wait (attention_decode.cuh), but
 * on a worker that runs a qkv tile just before it, that wait is the qkv tile's own end: the
 * copies start after the qkv layer, and the layer's attention span carries their latency (the
 * "skew").
 * Here such a worker issues the attention's stage before the qkv task's wait, into the shared
 * memory above what the qkv task uses (its staged tile, moved low to PK_STAGE_LO, or its async
 * rings), when the attention's layout fits there; the attention then runs from smem + *off
 * (pk_gen_run_task's wst_off). Returns the stage's result (0: not staged early; the attention
 * stages as before). fp_end: the end of the bytes task t uses. Every thread calls it.
 * Which tasks: codegen.c's pk_gen_sched_next, PK_NEXT_ATT (the attention waits on the layer of the task
 * before it). Not a worker that runs, say, a down_proj tile before its attention task: there
 * the stage's dependent loads only delay that tile (which the next layer waits for), and the
 * attention stages early enough in its own iteration, its wait being the qkv layer's.
 * Only the unsplit attention: a split one's many KV copies in flight during the qkv layer would
 * queue its x reads and polls behind them. */
/* Where task t's tile is staged when an attention is to stage above it (0: not moved low). Its
 * staged one-token GEMV uses linear's header and xs [K] bf16 of the kernels' area
 * (pk_lin_rows<XN, 1, ...>), so the tile may start right above them, on a 128-byte line: for
 * the Qwen3-0.6B's qkv tile (K 1024) at 4,608 bytes instead of PK_STAGE_LO's 16 KB, which leaves
 * the attention's stage above it room for more positions (attention_decode_layout.h: 548 bytes per
 * position at D 128, G 2). Tiles whose GEMV leaves [PK_STAGE_LO, PK_CUDA_SMEM_BYTES) free move. */
__device__ __forceinline__ uint32_t pk_stage_lo(const pk_dev_state *S, uint32_t t) {
    pk_gen_prefetch p;
    if (!pk_task_tile(S, t, &p) || !p.row_bytes || PK_LIN_HDR + p.row_bytes > PK_STAGE_LO) return 0;
    return (PK_LIN_HDR + p.row_bytes + 127u) & ~127u;
}
/* Whether task t is RMSNORM_SWIGLU_DOWN's (compiled only into graphs that have one). */
__device__ __forceinline__ bool pk_task_is_mlp(uint32_t t) {
#if PK_GEN_MLP_FUSED
    const pk_gen_task task = pk_gen_tasks[t];
    return task.layer < PK_GEN_NUM_LAYERS && pk_gen_layers[task.layer].kind == PK_TASK_RMSNORM_SWIGLU_DOWN;
#else
    (void)t;
    return false;
#endif
}
/* The bytes a staged RMSNORM_SWIGLU_DOWN task t needs above its tile: gu [2 · ib] bf16 and act
 * [ib] fp32 (dispatch.cuh's pk_gen_mlp_gu), 16-byte aligned, on a 128-byte line. */
__device__ __forceinline__ uint32_t pk_mlp_room(uint32_t t) {
    return (8u * (uint32_t)pk_gen_layers[pk_gen_tasks[t].layer].swiglu_block + 16u + 127u) & ~127u;
}
/* RMSNORM_SWIGLU_DOWN's staging, in one-token steps only: its tile (gate, up and down rows: 144 KB
 * for the Qwen3-0.6B, more than the area above the kernels' own) from pk_stage_lo's offset, where
 * its one-token GEMV leaves the kernels' area free, and room above it for the task's gu [2 · ib]
 * bf16 and act [ib] fp32 (dispatch.cuh's pk_gen_mlp_gu), when all of it ends below the top.
 * Returns the rows staged (0: none) and their offset in *off. Every thread calls it. */
__device__ __forceinline__ int pk_stage_mlp(const pk_dev_state *S, uint32_t t, char *smem, uint32_t *off, int n_tok) {
#if !PK_GEN_MLP_FUSED
    (void)S, (void)t, (void)smem, (void)off, (void)n_tok;
    return 0;
#else
    if (n_tok != 1 || !S->wstage_bytes) return 0;
    pk_gen_prefetch p;
    const char *src = pk_task_tile(S, t, &p);
    const uint32_t lo = src ? pk_stage_lo(S, t) : 0u;
    const uint32_t room = pk_mlp_room(t);
    if (!lo || lo + p.bytes + room > PK_CUDA_SMEM_BYTES + S->wstage_bytes) return 0;
    pk_stage_copy(src, p.bytes, smem, lo);
    *off = lo;
    return (int)(p.bytes / p.row_bytes);
#endif
}
/* The fused MLP's tile staged during the task before it (static mode, one-token steps): a
 * RMSNORM_SWIGLU_DOWN task's tile (the Qwen3-0.6B's 144 KB) would start copying only once its
 * worker's o_proj task is done, and its layer waited for them (the trace's gap, ~3 us: 18.9 MB at
 * DRAM rate). Instead the worker stages the o_proj tile high (pk_stage_hi) and, before o_proj's
 * wait, the MLP's tile below it, at the offset both tasks' GEMVs leave free (pk_stage_lo's:
 * linear's header and xs), with pk_stage_mlp's room for gu and act above it: the copies run
 * during the attention. Issued after o_proj's wait instead, or a fixed time after the attention's
 * start, the copies delay o_proj by more than they save.
 * The early tile is paced (sm_90+): all of it at once (the Qwen3-0.6B's 144 KB per worker) would
 * queue every L2 round trip of the attention that runs meanwhile behind it. A worker keeps only
 * PK_MLP_PACE_KB in flight: thread 0 issues the tile as bulk copies of PK_PACE_CHUNK, each on an
 * mbarrier slot, and between its polls of o_proj's event issues the next chunk into the slot
 * whose copy has landed. The DRAM needs ~4 MB in flight to run at its rate (4.3 TB/s x ~1 us);
 * 120 workers x 32 KB is 3.8 MB (less left the tile short when its event fired, more queued the
 * attention again). What is left when the event fires goes out as one copy after the o_proj task,
 * on slot PK_PACE_SLOTS; the MLP task's iteration waits for every slot before it runs. */
#define PK_MLP_PACE_KB 32
#define PK_PACE_CHUNK (16u << 10) /* one bulk copy */
#define PK_PACE_ON (PK_GEN_MLP_FUSED && PK_DEV_HAVE_BULK)
#define PK_PACE_SLOTS ((PK_MLP_PACE_KB * 1024 + PK_PACE_CHUNK - 1) / PK_PACE_CHUNK)
static_assert(PK_PACE_SLOTS >= 1 && PK_PACE_SLOTS < 16, "PK_MLP_PACE_KB: 1 .. 15 chunks of PK_PACE_CHUNK");
/* slots 0 .. PK_PACE_SLOTS - 1 for the chunks, PK_PACE_SLOTS for the rest; bit s of pk_pace_busy:
 * slot s has a copy in flight, of pk_pace_parity: the parity of the phase that copy completes */
__shared__ uint64_t pk_pace_bar[PK_PACE_SLOTS + 1];
__shared__ uint32_t pk_pace_busy, pk_pace_parity;
/* the tile being paced (thread 0's; in shared memory, not registers: the persistent kernel
 * spilled with it in its loop) */
struct pk_pace {
    const char *src; /* the tile */
    uint32_t dst;    /* its shared-memory address */
    uint32_t bytes, done; /* the tile's size, bytes issued */
};
__shared__ pk_pace pk_pace_st;
__device__ __forceinline__ uint32_t pk_pace_bar_of(uint32_t s) {
    return (uint32_t)__cvta_generic_to_shared(&pk_pace_bar[s]);
}
/* Thread 0, once per launch: the slots' mbarriers. */
__device__ __forceinline__ void pk_pace_init(void) {
    if (!PK_PACE_ON || threadIdx.x != 0) return;
    for (uint32_t s = 0; s <= PK_PACE_SLOTS; s++) pk_dev_mbar_init(pk_pace_bar_of(s), 1);
    pk_dev_mbar_init_fence();
    pk_pace_busy = pk_pace_parity = 0;
}
/* Thread 0: `n` bytes from pc->done on slot s (free). */
__device__ __forceinline__ void pk_pace_issue(uint32_t s, uint32_t n) {
    pk_pace *pc = &pk_pace_st;
    const uint32_t bar = pk_pace_bar_of(s);
    pk_dev_mbar_arrive_expect_tx(bar, n);
    pk_dev_bulk_copy_w(pc->dst + pc->done, pc->src + pc->done, n, bar, pk_dev_weight_policy());
    pk_pace_busy |= 1u << s;
    pc->done += n;
}
/* Thread 0: whether slot s is free, marking it so when its copy has landed (no suspend). */
__device__ __forceinline__ bool pk_pace_reap(uint32_t s) {
    const uint32_t bit = 1u << s;
    if (!(pk_pace_busy & bit)) return true;
    if (!pk_dev_mbar_test_now(pk_pace_bar_of(s), (pk_pace_parity >> s) & 1u)) return false;
    pk_pace_busy &= ~bit;
    pk_pace_parity ^= bit;
    return true;
}
/* Thread 0: the next chunk, if its slot is free. */
__device__ __forceinline__ bool pk_pace_step(void) {
    const pk_pace *pc = &pk_pace_st;
    if (pc->done >= pc->bytes) return false;
    const uint32_t s = (pc->done / PK_PACE_CHUNK) % PK_PACE_SLOTS;
    if (!pk_pace_reap(s)) return false;
    const uint32_t left = pc->bytes - pc->done;
    pk_pace_issue(s, left < PK_PACE_CHUNK ? left : PK_PACE_CHUNK);
    return true;
}
/* pk_stage_mlp_next's copies, paced: the first PK_PACE_SLOTS chunks now. Every thread calls it
 * (the copy engine writes where the generic proxy read and wrote before: every thread's proxy
 * fence, then the barrier, then thread 0 issues). */
__device__ __forceinline__ void pk_pace_start(const char *src, uint32_t bytes, char *smem, uint32_t off) {
    pk_dev_fence_proxy_async_smem();
    pk_cta_sync();
    if (threadIdx.x == 0) {
        pk_pace_st = pk_pace{src, (uint32_t)__cvta_generic_to_shared(smem + off), bytes, 0u};
        for (uint32_t s = 0; s < PK_PACE_SLOTS; s++)
            if (!pk_pace_step()) break;
    }
}
/* The wait of the task during which the tile is paced (pk_wait_event's place): thread 0 polls the
 * event and, between polls, issues the next chunk wherever a slot has landed. Every thread. */
__device__ __forceinline__ void pk_wait_event_paced(const pk_dev_state *S, uint32_t event, pk_u64 need) {
    if (threadIdx.x == 0) {
        const unsigned long long *ctr = pk_event_ctr(S, event);
        while (pk_dev_ld_acquire_u64(ctr) < need)
            if (!pk_pace_step()) __nanosleep(PK_SPIN_SLEEP_NS);
    }
    pk_cta_sync();
}
/* Thread 0: what is left of the tile, as one copy on the rest slot (free: drained before). */
__device__ __forceinline__ void pk_pace_rest(void) {
    if (threadIdx.x == 0 && pk_pace_st.done < pk_pace_st.bytes)
        pk_pace_issue(PK_PACE_SLOTS, pk_pace_st.bytes - pk_pace_st.done);
}
/* Every thread, before the task that reads the tile: every slot's copy has landed. */
__device__ __forceinline__ void pk_pace_drain(void) {
    pk_cta_sync(); /* thread 0's last issues are in the masks */
    const uint32_t busy = pk_pace_busy, parity = pk_pace_parity;
    for (uint32_t s = 0; s <= PK_PACE_SLOTS; s++)
        if (busy & (1u << s)) pk_dev_mbar_wait(pk_pace_bar_of(s), (parity >> s) & 1u);
    pk_cta_sync(); /* everyone has read the masks */
    if (threadIdx.x == 0) {
        pk_pace_parity ^= busy;
        pk_pace_busy = 0;
    }
}
enum { PK_NEXT_ATT = 1, PK_NEXT_MLP = 2 }; /* codegen.c's pk_gen_sched_next */
/* Where task t's tile goes when the next task's tile is to stage below it: the top of the area
 * (PK_CUDA_SMEM_BYTES when it does not fit there: the default place). */
__device__ __forceinline__ uint32_t pk_stage_hi(const pk_dev_state *S, uint32_t t) {
    pk_gen_prefetch p;
    const uint32_t top = PK_CUDA_SMEM_BYTES + S->wstage_bytes;
    if (!pk_task_tile(S, t, &p) || p.bytes > top || ((top - p.bytes) & ~127u) < PK_CUDA_SMEM_BYTES)
        return PK_CUDA_SMEM_BYTES;
    return (top - p.bytes) & ~127u;
}
/* Stages RMSNORM_SWIGLU_DOWN task `next`'s tile while task t (tile staged at t_off) waits or runs:
 * below t's tile, above what both GEMVs use of the kernels' area. Returns the rows staged (0:
 * none) and their offset in *off. Every thread calls it. */
__device__ __forceinline__ int pk_stage_mlp_next(const pk_dev_state *S, uint32_t t, uint32_t t_off, uint32_t next,
                                                 char *smem, uint32_t *off) {
#if !PK_GEN_MLP_FUSED
    (void)S, (void)t, (void)t_off, (void)next, (void)smem, (void)off;
    return 0;
#else
    pk_gen_prefetch q;
    const char *src = pk_task_tile(S, next, &q);
    const uint32_t lo_t = pk_stage_lo(S, t), lo_n = src ? pk_stage_lo(S, next) : 0u;
    if (!lo_t || !lo_n) return 0;
    const uint32_t o = lo_t > lo_n ? lo_t : lo_n;
    if (o + q.bytes + pk_mlp_room(next) > t_off) return 0;
    if (PK_PACE_ON)
        pk_pace_start(src, q.bytes, smem, o);
    else
        pk_stage_copy(src, q.bytes, smem, o);
    *off = o;
    return (int)(q.bytes / q.row_bytes);
#endif
}
/* The end of the bytes task t uses while it runs: its tile staged whole at wst_off, or the async
 * GEMV's header, xs and rings (PK_WST_ASYNC); 0 for anything else. */
__device__ __forceinline__ uint32_t pk_task_smem_end(const pk_dev_state *S, uint32_t t, bool tile_staged,
                                                     uint32_t wst_off, int staged) {
    pk_gen_prefetch p;
    if (!pk_task_tile(S, t, &p)) return 0;
    if (tile_staged) return wst_off + p.bytes;
    if (pk_task_is_mlp(t)) /* its down part may fill the area after the GEMV */
        return PK_CUDA_SMEM_BYTES + S->wstage_bytes;
    if (staged == PK_WST_ASYNC)
        return (uint32_t)(pk_lin_async_off((int)(p.row_bytes / 2)) + pk_lin_async_bytes<4>(PK_LIN_ASYNC_STAGES));
    return 0;
}
__device__ __forceinline__ int pk_att_early(const pk_dev_state *S, uint32_t fp_end, uint32_t next, char *smem,
                                            uint32_t *off) {
    const uint32_t top = PK_CUDA_SMEM_BYTES + S->wstage_bytes, base = (fp_end + 127u) & ~127u;
    if (base + 4096u > top) return 0;
    /* the layout's first bytes (q, red: attention_decode_layout.h's [0, hdr), PK_GEN_ATT_HEAD from
     * codegen) are written only by the attention task, after this task is done: they may lie over
     * this task's last bytes, so that the stage from hdr on keeps the room above them (the
     * Qwen3-0.6B: 288 positions instead of 272) */
    const uint32_t lo = base >= PK_GEN_ATT_HEAD ? base - PK_GEN_ATT_HEAD : base;
    const int r = pk_gen_stage_task(S, next, smem + lo, (int)(top - lo));
    *off = lo;
    return r;
}

/* The async decode GEMV's first stages (kernels/cuda/linear.cuh, pk_lin_async_pre), issued
 * before a linear task's dependency wait when its tile was not staged whole: the task starts with
 * PK_LIN_ASYNC_STAGES - 1 stages (176 KB per CTA at 12) landed or in flight instead of issuing them
 * after the event fires. Returns what pk_gen_run_task takes as wst_rows (PK_WST_ASYNC, or 0).
 * Every thread calls it. */
/* A task whose first stages were issued before its wait (PK_WST_ASYNC), whose tile was staged
 * whole, or a decode attention task whose KV cache was staged, is called before the event fires
 * and waits itself, after its dispatch (linear.cuh's PK_WST_ASYNC_LATE, rows.cuh's PK_STAGED_LATE;
 * attention_decode.cuh's `late`, before its phase A): the switch, the call-through and the set-up
 * run during the wait. Never with the debug build's spin limit, whose timeout report needs the
 * runtime's wait. */
constexpr bool pk_wait_late = pk_gen_tuning::debug_spin_limit_ms == 0;
/* What a task has staged in shared memory before its wait (pk_defer_wait) */
enum { PK_STAGED_NONE = 0, PK_STAGED_TILE = 1, PK_STAGED_ATT = 2 };
/* Whether task t's wait is left to the task (rows.cuh's pk_dev_dep_wait), when nothing was issued
 * after its own copies (the kernel then waits for all of them): a streamed GEMV whose first
 * stages were issued (*staged PK_WST_ASYNC becomes PK_WST_ASYNC_LATE), a GEMV whose tile was
 * staged whole or a decode attention whose KV cache was staged — those two get rows.cuh's PK_STAGED_LATE bit in *staged. The event goes
 * to pk_dep_ctr / pk_dep_need. Else the caller waits. Every thread calls it. */
__device__ __forceinline__ bool pk_defer_wait(const pk_dev_state *S, int *staged, int what, bool others, uint32_t event,
                                              pk_u64 need) {
    if (pk_wait_late && *staged == PK_WST_ASYNC)
        *staged = PK_WST_ASYNC_LATE;
    else if (!others && *staged > 0 && pk_wait_late && (what == PK_STAGED_TILE || what == PK_STAGED_ATT))
        *staged |= PK_STAGED_LATE;
    else
        return false;
    if (threadIdx.x == 0) {
        pk_dep_ctr = pk_event_ctr(S, event);
        pk_dep_need = need;
    }
    pk_cta_sync();
    return true;
}
/* After a deferred task (thread 0): it must have waited — a path that did not would have read
 * its inputs early, so trap rather than go on — and its trace record starts when it saw the
 * event, as the others' do. */
__device__ __forceinline__ void pk_defer_end(pk_u64 *t0) {
    if (threadIdx.x != 0) return;
    if (pk_dep_ctr) __trap();
    *t0 = pk_dep_seen;
}
__device__ __forceinline__ int pk_lin_pre_task(const pk_dev_state *S, uint32_t t, char *smem, int n_tok) {
    const pk_gen_task task = pk_gen_tasks[t];
    if (task.layer >= PK_GEN_NUM_LAYERS) return 0;
    const int kind = pk_gen_layers[task.layer].kind;
    if (kind != PK_TASK_LINEAR && kind != PK_TASK_LINEAR_RESIDUAL && kind != PK_TASK_RMSNORM_LINEAR &&
        kind != PK_TASK_SILU_MUL_LINEAR_RESIDUAL && kind != PK_TASK_RMSNORM_LINEAR_SWIGLU &&
        kind != PK_TASK_RMSNORM_LINEAR_ARGMAX)
        return 0;
    pk_gen_prefetch p;
    const char *base = pk_task_tile(S, t, &p);
    if (!base || p.row_bytes == 0) return 0;
    return pk_lin_async_pre((const pk_bf16 *)base, (int)(p.row_bytes / 2), (int)(p.bytes / p.row_bytes), n_tok, smem);
}

/* Static mode signals with pk_red_add_release where the old count is not needed (sync.cuh).
 * Where the generated graph allows it (PK_GEN_END_BY_COUNTER: every END trigger a task of one
 * argmax layer), the argmax's last task ends the step, without END's adds. */

__device__ void pk_static_worker(const pk_dev_state *S, uint32_t w, char *smem) {
    __shared__ int sh_stop, sh_rows;
    const uint32_t lo = pk_gen_sched_offset[w], hi = pk_gen_sched_offset[w + 1];
    const bool tracing = S->trace != nullptr;
    const pk_u64 end_triggers = pk_gen_events[PK_GEN_END_EVENT].num_triggers;
    pk_u64 trace_n = tracing && threadIdx.x == 0 ? S->trace_n[w] : 0; /* thread 0's record count */
    /* what pk_gen_stage_task may fill */
    const int stage_limit = (int)(PK_CUDA_SMEM_BYTES + S->wstage_bytes);
    /* task i's tile when the iteration before staged it (pk_stage_mlp_next): rows (0: not) and offset */
    int next_rows = 0;
    uint32_t next_off = 0;
    /* task i's attention stage when the iteration before issued it (pk_att_early), and its offset */
    int early_rows = 0;
    uint32_t early_off = 0;
    /* the fused MLP's tile paced during the task before it (PK_MLP_PACE_KB): paced while that
     * task waits, pace_drain before the MLP task */
    bool paced = false, pace_drain = false;
    pk_pace_init(); /* the first step's barrier below publishes it */
    for (pk_u64 step = 1;; step++) {
        /* BEGIN, then what prepare_next_step wrote before it: whether to stop and the step's rows
         * (read once per step, not after every task's wait), two loads in one round trip */
        if (threadIdx.x == 0) {
            pk_wait_event_thread(S, PK_GEN_BEGIN_EVENT, step, 0);
            sh_stop = pk_ld_volatile_int(S->terminate);
            sh_rows = pk_step_rows(S);
        }
        pk_cta_sync();
        if (sh_stop) break;
        const int n_tok = sh_rows;
        /* the next task's stages only in one-token steps (the staged GEMV of more rows fills the
         * kernels' area) */
        const bool stage_next = n_tok == 1;
        next_rows = early_rows = 0;
        for (uint32_t i = lo; i < hi; i++) {
            const uint32_t t = pk_gen_sched_tasks[i];
            const pk_gen_task task = pk_gen_tasks[t];
            pk_u64 need = (pk_u64)pk_gen_events[task.dep_event].num_triggers * step;
            if (t == pk_gen_tuning::debug_stall_task) need++;
            int staged = 0;
            uint32_t wst_off = PK_CUDA_SMEM_BYTES; /* where a staged tile is */
            bool tile_staged = false;              /* staged: rows of t's weight tile */
            /* the next task is an attention whose stage may go in above this task's bytes */
            const bool att_next = n_tok == 1 && pk_gen_sched_next[i] == PK_NEXT_ATT;
            /* the next task is the fused MLP's, whose tile may stage during this one (pk_stage_mlp_next) */
            const bool mlp_next = PK_GEN_MLP_FUSED && stage_next && pk_gen_sched_next[i] == PK_NEXT_MLP;
            int staged_what = PK_STAGED_NONE; /* what `staged` counts */
            if (early_rows) { /* this attention's stage was issued during the task before */
                staged = early_rows, wst_off = early_off;
                early_rows = 0;
                staged_what = PK_STAGED_ATT;
            } else if (next_rows) { /* copied during the task before */
                staged = next_rows, wst_off = next_off, tile_staged = true;
                next_rows = 0;
            } else {
                const uint32_t low_off = att_next ? pk_stage_lo(S, t) : 0u;
                if (low_off)
                    wst_off = low_off;
                else if (mlp_next)
                    wst_off = pk_stage_hi(S, t);
                if (PK_GEN_MLP_FUSED && pk_task_is_mlp(t)) /* its own rule: room for gu above */
                    tile_staged = (staged = pk_stage_mlp(S, t, smem, &wst_off, n_tok)) > 0;
                else
                    tile_staged = (staged = pk_stage_weights(S, t, smem, wst_off)) > 0;
                if (!staged) staged = pk_lin_pre_task(S, t, smem, n_tok);
            }
            const uint32_t t_end = att_next ? pk_task_smem_end(S, t, tile_staged, wst_off, staged) : 0u;
            if (t_end) /* the attention's stage above t's bytes */
                early_rows = pk_att_early(S, t_end, pk_gen_sched_tasks[i + 1], smem, &early_off);
            else if (mlp_next && tile_staged)
                paced = (next_rows = pk_stage_mlp_next(S, t, wst_off, pk_gen_sched_tasks[i + 1], smem, &next_off)) > 0 &&
                        PK_PACE_ON;
            if (!staged && (staged = pk_gen_stage_task(S, t, smem, stage_limit)) > 0) {
                wst_off = 0; /* the attention's layout from smem */
                staged_what = PK_STAGED_ATT;
            }
            /* a streamed GEMV or a staged decode attention waits for its event itself, after its
             * dispatch (pk_defer_wait) */
            if (tile_staged) staged_what = PK_STAGED_TILE;
            const bool late = pk_defer_wait(S, &staged, staged_what, next_rows || early_rows, task.dep_event, need);
            /* a root task's BEGIN was waited for above (need = step: BEGIN has one trigger) */
            const bool begun = task.dep_event == PK_GEN_BEGIN_EVENT && t != pk_gen_tuning::debug_stall_task;
            if (!late && !begun) {
                if (paced)
                    pk_wait_event_paced(S, task.dep_event, need);
                else
                    pk_wait_event(S, task.dep_event, need, t);
            }
            if (pace_drain) { /* this task's tile was paced in bulk copies during the task before */
                pk_pace_drain();
                pace_drain = false;
            }
            if (staged > 0 && !late) {
                if ((next_rows && !paced) || early_rows) /* the newest group is the next task's tile or KV cache */
                    asm volatile("cp.async.wait_group 1;" ::: "memory");
                else
                    asm volatile("cp.async.wait_all;" ::: "memory");
                pk_cta_sync(); /* every thread's copies are in shared memory */
            }
            pk_u64 t0 = tracing && threadIdx.x == 0 ? pk_dev_globaltimer() : 0;
            pk_gen_run_task(S, t, task, smem, staged, wst_off, n_tok);
            pk_cta_sync(); /* the task's writes are issued by every thread */
            if (late) pk_defer_end(&t0);
            if (threadIdx.x == 0) {
                const pk_u64 t1 = tracing ? pk_dev_globaltimer() : 0;
                if (PK_GEN_END_BY_COUNTER && task.trig_event == PK_GEN_END_EVENT) {
                    /* the argmax layer's last task (pk_last_of, in the task) has every task of the
                     * step behind it: it ends the step without END's adds and their round trip */
                    if (pk_sh_last_of) {
                        pk_step_end(S, step);
                    }
                } else if (task.trig_event != PK_GEN_END_EVENT) {
                    pk_red_add_release(pk_event_ctr(S, task.trig_event), 1);
                } else {
                    pk_u64 old = pk_atom_add_acq_rel(pk_event_ctr(S, task.trig_event), 1);
                    if (task.trig_event == PK_GEN_END_EVENT && old + 1 == end_triggers * step) pk_step_end(S, step);
                }
                if (tracing) pk_trace(S, w, &trace_n, t, step, t0, t1);
            }
            if (paced) { /* the next task reads the paced tile: what is left goes out after the signal */
                pk_pace_rest();
                paced = false;
                pace_drain = true;
            }
        }
    }
}

__device__ void pk_dynamic_worker(const pk_dev_state *S, uint32_t w, char *smem) {
    __shared__ uint32_t sh_task;
    __shared__ pk_u64 sh_step;
    const bool tracing = S->trace != nullptr;
    pk_u64 trace_n = tracing && threadIdx.x == 0 ? S->trace_n[w] : 0; /* thread 0's record count */
    for (;;) {
        if (threadIdx.x == 0) {
            sh_task = pk_ring_pop(S, &S->worker_q[w]);
            sh_step = *(volatile pk_u64 *)S->cur_step;
        }
        pk_cta_sync();
        const uint32_t t = sh_task;
        if (t >= PK_GEN_NUM_TASKS) break; /* TERMINATE */
        pk_u64 t0 = tracing && threadIdx.x == 0 ? pk_dev_globaltimer() : 0;
        const int n_tok = pk_step_rows(S);
        pk_gen_run_task(S, t, pk_gen_tasks[t], smem, 0, PK_CUDA_SMEM_BYTES, n_tok);
        pk_cta_sync(); /* the task's writes; sh_task is read by all before thread 0 rewrites it */
        if (threadIdx.x == 0) {
            const pk_u64 t1 = tracing ? pk_dev_globaltimer() : 0;
            const uint32_t e = pk_gen_tasks[t].trig_event;
            pk_u64 old = pk_atom_add_acq_rel(pk_event_ctr(S, e), 1);
            if ((old + 1) % pk_gen_events[e].num_triggers == 0) pk_ring_push(S, &S->sched_q[e % S->S], e);
            if (tracing) pk_trace(S, w, &trace_n, t, sh_step, t0, t1);
        }
    }
}

/* Pushes the event's tasks to the workers round-robin; rr is the scheduler's own cursor. */
__device__ void pk_dispatch_event(const pk_dev_state *S, uint32_t e, uint32_t *rr) {
    const pk_event ev = pk_gen_events[e];
    for (uint32_t t = ev.first_task; t < ev.last_task; t++) {
        pk_ring_push(S, &S->worker_q[*rr % S->W], t);
        (*rr)++;
    }
}

/* No step left: every worker gets TERMINATE, every scheduler queue EXIT. */
__device__ void pk_terminate_all(const pk_dev_state *S) {
    for (uint32_t w = 0; w < S->W; w++) pk_ring_push(S, &S->worker_q[w], PK_GEN_NUM_TASKS);
    for (uint32_t q = 0; q < S->S; q++) pk_ring_push(S, &S->sched_q[q], PK_GEN_NUM_EVENTS);
}

/* Scheduler warp j (lane 0) serves queues j, j + nwarps, ... < S. */
__device__ void pk_scheduler(const pk_dev_state *S) {
    const uint32_t warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if ((threadIdx.x & 31) != 0 || warp >= S->S) return;
    uint32_t rr = warp;
    if (warp == 0) {
        if (!pk_first_step(S)) {
            pk_terminate_all(S);
            return;
        }
        *(volatile pk_u64 *)S->cur_step = 1;
        pk_atom_add_acq_rel(pk_event_ctr(S, PK_GEN_BEGIN_EVENT), 1);
        pk_dispatch_event(S, PK_GEN_BEGIN_EVENT, &rr);
    }
    for (;;) {
        for (uint32_t q = warp; q < S->S; q += nwarps) {
            uint32_t e;
            if (!pk_ring_try_pop(&S->sched_q[q], &e)) continue;
            if (e >= PK_GEN_NUM_EVENTS) return; /* EXIT */
            if (e == PK_GEN_END_EVENT) {
                if (!pk_step_advance(S)) {
                    pk_step_publish(S);
                    pk_terminate_all(S);
                    return;
                }
                *(volatile pk_u64 *)S->cur_step = *(volatile pk_u64 *)S->cur_step + 1;
                pk_atom_add_acq_rel(pk_event_ctr(S, PK_GEN_BEGIN_EVENT), 1);
                pk_step_publish(S);
                e = PK_GEN_BEGIN_EVENT;
            }
            pk_dispatch_event(S, e, &rr);
        }
        __nanosleep(32);
    }
}

/* The dynamic area starts on a 128-byte boundary: every staged tile and attention layout below
 * is placed by offsets from pk_smem that are multiples of 128, and the whole step is much slower
 * when the area itself is not (likely the bulk and cp.async copies' destinations off 128-byte
 * lines). At the default alignment of 16 the area would begin past the kernel's static
 * __shared__ variables, and any code that added one would move it. The 1 KB that
 * pk_gen_run_inner leaves beside the dynamic area holds the static variables. */
#define PK_SMEM_ALIGN 128

/* Two entry points over one body. Static mode runs one worker CTA per SM, so its kernel may use
 * up to 255 registers per thread (__launch_bounds__(256, 1)): at the 128-register cap the GEMV
 * and the decode attention spilled (the Qwen3-8B kernel's attention, stores in the task switch).
 * Dynamic mode puts its scheduler
 * CTA beside a worker on one SM, so its kernel keeps at most 128 registers (2 CTAs per SM). */
__device__ __forceinline__ void pk_gen_main(const pk_dev_state *S, int dynamic) {
    extern __shared__ __align__(PK_SMEM_ALIGN) char pk_smem[];
    if (blockIdx.x >= S->W) {
        pk_scheduler(S);
        return;
    }
    if (dynamic) {
        pk_dynamic_worker(S, blockIdx.x, pk_smem);
        return;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (!pk_first_step(S)) *(volatile int *)S->terminate = 1;
        pk_atom_add_acq_rel(pk_event_ctr(S, PK_GEN_BEGIN_EVENT), 1);
    }
    pk_static_worker(S, blockIdx.x, pk_smem);
}
extern "C" __global__ void __launch_bounds__(PK_CUDA_THREADS, 1) pk_gen_kernel(const pk_dev_state *S) {
    pk_gen_main(S, 0);
}
extern "C" __global__ void __launch_bounds__(PK_CUDA_THREADS, 2) pk_gen_kernel_dynamic(const pk_dev_state *S) {
    pk_gen_main(S, 1);
}

/* ================================ host ================================ */

static_assert(sizeof(pk_gen_step_rec) == sizeof(pk_step_rec) && alignof(pk_gen_step_rec) == alignof(pk_step_rec),
              "pk_gen_run_args.step_rec is decode_step.h's records");

static const pk_gen_info pk_gen_info_v = {
    PK_ABI_VERSION, PK_GEN_API_VERSION, PK_GEN_GRAPH_HASH, PK_GEN_NUM_TASKS, PK_GEN_NUM_EVENTS, PK_GEN_NUM_LAYERS,
    PK_GEN_NUM_BUFFERS, PK_GEN_NUM_WORKERS, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES,
    PK_GEN_PK_VERSION,
};

typedef struct pk_gen_ctx {
    pk_gen_config cfg;
    cudaStream_t stream;
    void **buf;            /* [num_buffers] device pointers (host copy) */
    void **d_buf;          /* the same table in device memory */
    pk_dev_state hs;       /* host copy of the device state */
    pk_dev_state *d_state;
    pk_step_state *d_step;
    pk_u64 *ring_mem;      /* every ring's seq, tail, head (pk_u64) */
    uint32_t *ring_val;
    size_t ring_words, ring_vals;
    volatile uint32_t *h_nemitted; /* mapped */
    pk_gen_debug *h_debug;         /* mapped */
    int *h_one;                    /* pinned 1: copied to hs.cancel on cancel_stream by pk_cancel's run */
    cudaStream_t cancel_stream;    /* non-blocking: the copy runs beside the persistent kernel */
    void *staging[2];
    cudaEvent_t staged[2];
    int next_staging;
    int broken; /* a kernel fault left the CUDA context unusable */
} pk_gen_ctx;

static int pk_gen_fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

#define PK_CU(call)                                                                                      \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess)                                                                           \
            return pk_gen_fail(err, err_len, "CUDA error in %s: %s (%s)", #call, cudaGetErrorString(e_), \
                               cudaGetErrorName(e_));                                                    \
    } while (0)

static pk_u64 pk_pow2_at_least(pk_u64 n) {
    pk_u64 c = 64;
    while (c < n) c <<= 1;
    return c;
}

extern "C" const pk_gen_info *pk_gen_get_info(void) { return &pk_gen_info_v; }

extern "C" void pk_gen_destroy(void *vctx);

static int pk_gen_create_inner(pk_gen_ctx *c, const pk_gen_config *cfg, char *err, size_t err_len) {
    c->cfg = *cfg;
    if (cfg->num_buffers != PK_GEN_NUM_BUFFERS || cfg->num_workers != PK_GEN_NUM_WORKERS)
        return pk_gen_fail(err, err_len, "kernel.so was generated for %u buffers and %u workers, not %u and %u",
                           PK_GEN_NUM_BUFFERS, PK_GEN_NUM_WORKERS, cfg->num_buffers, cfg->num_workers);
    PK_CU(cudaSetDevice(cfg->device));
    PK_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    c->buf = (void **)calloc(PK_GEN_NUM_BUFFERS, sizeof(void *));
    if (!c->buf) return pk_gen_fail(err, err_len, "out of host memory");
    for (uint32_t i = 0; i < PK_GEN_NUM_BUFFERS; i++) {
        if (!cfg->buffer_bytes[i]) continue;
        PK_CU(cudaMalloc(&c->buf[i], cfg->buffer_bytes[i]));
        PK_CU(cudaMemsetAsync(c->buf[i], 0, cfg->buffer_bytes[i], c->stream));
    }
    PK_CU(cudaMalloc((void **)&c->d_buf, PK_GEN_NUM_BUFFERS * sizeof(void *)));
    PK_CU(cudaMemcpy(c->d_buf, c->buf, PK_GEN_NUM_BUFFERS * sizeof(void *), cudaMemcpyHostToDevice));

    pk_dev_state *h = &c->hs;
    memset(h, 0, sizeof *h);
    h->buf = c->d_buf;
    h->W = cfg->num_workers;
    h->S = cfg->num_schedulers;
    PK_CU(cudaMalloc((void **)&h->counters, PK_COUNTER_WORDS * sizeof(pk_u64)));
    PK_CU(cudaMalloc((void **)&h->terminate, sizeof(int)));
    PK_CU(cudaMalloc((void **)&h->cancel, sizeof(int)));
    PK_CU(cudaHostAlloc((void **)&c->h_one, sizeof(int), cudaHostAllocDefault));
    *c->h_one = 1;
    PK_CU(cudaStreamCreateWithFlags(&c->cancel_stream, cudaStreamNonBlocking));
    PK_CU(cudaMalloc((void **)&h->cur_step, sizeof(pk_u64)));
    PK_CU(cudaMalloc((void **)&c->d_step, sizeof(pk_step_state)));
    h->step = c->d_step;
    /* rings: W worker queues of ≥ tasks + 2 slots, S scheduler queues of ≥ events + 2 */
    pk_u64 wcap = pk_pow2_at_least(PK_GEN_NUM_TASKS + 2), scap = pk_pow2_at_least(PK_GEN_NUM_EVENTS + 2);
    uint32_t W = h->W, S = h->S;
    c->ring_vals = (size_t)(W * wcap + S * scap);
    c->ring_words = c->ring_vals + 2 * (size_t)(W + S);
    PK_CU(cudaMalloc((void **)&c->ring_mem, c->ring_words * sizeof(pk_u64)));
    PK_CU(cudaMalloc((void **)&c->ring_val, c->ring_vals * sizeof(uint32_t)));
    pk_dev_ring *rings = (pk_dev_ring *)calloc(W + S, sizeof(pk_dev_ring));
    if (!rings) return pk_gen_fail(err, err_len, "out of host memory");
    pk_u64 *seq = c->ring_mem, *ends = c->ring_mem + c->ring_vals;
    uint32_t *val = c->ring_val;
    for (uint32_t i = 0; i < W + S; i++) {
        pk_u64 cap = i < W ? wcap : scap;
        rings[i].seq = seq;
        rings[i].val = val;
        rings[i].mask = cap - 1;
        rings[i].tail = ends + 2 * i;
        rings[i].head = ends + 2 * i + 1;
        seq += cap;
        val += cap;
    }
    cudaError_t e1 = cudaMalloc((void **)&h->worker_q, (W + S) * sizeof(pk_dev_ring));
    if (e1 == cudaSuccess)
        e1 = cudaMemcpy(h->worker_q, rings, (W + S) * sizeof(pk_dev_ring), cudaMemcpyHostToDevice);
    free(rings);
    PK_CU(e1);
    h->sched_q = h->worker_q + W;
    /* mapped host memory: the token count and the debug report */
    void *p;
    PK_CU(cudaHostAlloc(&p, sizeof(uint32_t), cudaHostAllocMapped));
    c->h_nemitted = (volatile uint32_t *)p;
    PK_CU(cudaHostGetDevicePointer((void **)&h->host_nemitted, p, 0));
    PK_CU(cudaHostAlloc(&p, sizeof(pk_gen_debug), cudaHostAllocMapped));
    c->h_debug = (pk_gen_debug *)p;
    memset(p, 0, sizeof(pk_gen_debug));
    PK_CU(cudaHostGetDevicePointer((void **)&h->debug, p, 0));
    PK_CU(cudaMalloc((void **)&h->debug_claim, sizeof(uint32_t)));
    PK_CU(cudaMalloc((void **)&c->d_state, sizeof(pk_dev_state)));
    /* pinned staging for uploads, double-buffered */
    for (int i = 0; i < 2; i++) {
        PK_CU(cudaHostAlloc(&c->staging[i], cfg->staging_bytes, cudaHostAllocDefault));
        PK_CU(cudaEventCreateWithFlags(&c->staged[i], cudaEventDisableTiming));
        PK_CU(cudaEventRecord(c->staged[i], c->stream));
    }
    PK_CU(cudaStreamSynchronize(c->stream));
    return 0;
}

extern "C" void *pk_gen_create(const pk_gen_config *cfg, char *err, size_t err_len) {
    pk_gen_ctx *c = (pk_gen_ctx *)calloc(1, sizeof(pk_gen_ctx));
    if (!c) {
        pk_gen_fail(err, err_len, "out of host memory");
        return NULL;
    }
    if (pk_gen_create_inner(c, cfg, err, err_len) != 0) {
        pk_gen_destroy(c);
        return NULL;
    }
    return c;
}

/* Copies bytes from host memory (maybe memory-mapped files) into buffer `buffer` at offset,
 * through the two pinned staging buffers: while one is copied to the GPU the other is filled. */
extern "C" int pk_gen_upload(void *vctx, uint32_t buffer, uint64_t offset, const void *src, uint64_t bytes, char *err,
                             size_t err_len) {
    pk_gen_ctx *c = (pk_gen_ctx *)vctx;
    if (buffer >= PK_GEN_NUM_BUFFERS || !c->buf[buffer] || offset + bytes > c->cfg.buffer_bytes[buffer])
        return pk_gen_fail(err, err_len, "upload of %llu bytes at %llu outside buffer %u", (unsigned long long)bytes,
                           (unsigned long long)offset, buffer);
    const char *s = (const char *)src;
    while (bytes) {
        uint64_t n = bytes < c->cfg.staging_bytes ? bytes : c->cfg.staging_bytes;
        int i = c->next_staging;
        PK_CU(cudaEventSynchronize(c->staged[i])); /* its previous copy is done */
        memcpy(c->staging[i], s, n);
        PK_CU(cudaMemcpyAsync((char *)c->buf[buffer] + offset, c->staging[i], n, cudaMemcpyHostToDevice, c->stream));
        PK_CU(cudaEventRecord(c->staged[i], c->stream));
        c->next_staging = i ^ 1;
        s += n;
        offset += n;
        bytes -= n;
    }
    return 0;
}

extern "C" int pk_gen_upload_wait(void *vctx, char *err, size_t err_len) {
    pk_gen_ctx *c = (pk_gen_ctx *)vctx;
    PK_CU(cudaStreamSynchronize(c->stream));
    return 0;
}

extern "C" int pk_gen_read(void *vctx, uint32_t buffer, uint64_t offset, void *dst, uint64_t bytes, char *err,
                           size_t err_len) {
    pk_gen_ctx *c = (pk_gen_ctx *)vctx;
    if (c->broken) return pk_gen_fail(err, err_len, "the CUDA context failed in an earlier run");
    if (buffer >= PK_GEN_NUM_BUFFERS || !c->buf[buffer] || offset + bytes > c->cfg.buffer_bytes[buffer])
        return pk_gen_fail(err, err_len, "read of %llu bytes at %llu outside buffer %u", (unsigned long long)bytes,
                           (unsigned long long)offset, buffer);
    PK_CU(cudaMemcpyAsync(dst, (const char *)c->buf[buffer] + offset, bytes, cudaMemcpyDeviceToHost, c->stream));
    PK_CU(cudaStreamSynchronize(c->stream));
    return 0;
}

/* Per-run device memory, freed by pk_gen_run_free. */
typedef struct pk_gen_run_mem {
    pk_step_req *d_reqs;
    int32_t *d_prompts;
    int32_t *d_tokens;
    pk_slot *d_slots;
    int32_t *d_free_pages;
    int32_t *d_ngram_pos; /* speculation's n-gram index (decode_step.h), NULL when off */
    pk_step_token *h_emitted; /* mapped */
    pk_gen_trace_rec *d_trace;
    pk_u64 *d_trace_n;
    pk_step_rec *d_step_rec;
} pk_gen_run_mem;

static void pk_gen_run_free(pk_gen_run_mem *m) {
    cudaFree(m->d_reqs);
    cudaFree(m->d_prompts);
    cudaFree(m->d_tokens);
    cudaFree(m->d_slots);
    cudaFree(m->d_free_pages);
    cudaFree(m->d_ngram_pos);
    if (m->h_emitted) cudaFreeHost(m->h_emitted);
    cudaFree(m->d_trace);
    cudaFree(m->d_trace_n);
    cudaFree(m->d_step_rec);
    memset(m, 0, sizeof *m);
}

static void pk_gen_sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Dynamic shared memory per CTA. Static mode asks for more than half an SM's shared memory:
 * then only one worker fits per SM (a cooperative launch does not promise to spread two that
 * fit), and what lies beyond
 * the kernels' PK_CUDA_SMEM_BYTES holds staged weights. Dynamic mode keeps 96 KB so that the
 * scheduler CTA fits beside a worker. The task kernels use the first PK_CUDA_SMEM_BYTES.
 * Static mode takes all the GPU gives a block (227 KB on the H100 / H200, less 1 KB below):
 * the attention staged during a qkv tile (pk_att_early) needs its layout above the tile
 * (Qwen3-0.6B at position 223: 16 KB + 64 KB + 132 KB), and the async GEMV's 12 stages of rings
 * need 192 KB beside xs; the smaller L1 that comes with it costs nothing visible. */
#define PK_STATIC_SMEM_BYTES (227 * 1024)
static_assert(PK_STATIC_SMEM_BYTES >= PK_CUDA_SMEM_BYTES, "static mode's shared memory");

static int pk_gen_run_inner(pk_gen_ctx *c, pk_gen_run_args *a, pk_gen_run_mem *m, char *err, size_t err_len) {
    const pk_gen_config *cfg = &c->cfg;
    const uint32_t W = cfg->num_workers, blocks = W + (a->dynamic ? 1u : 0u);
    /* residency: every CTA must be on an SM at once, or spin waits never end */
    int dev = cfg->device, sms = 0, per_sm = 0, optin = 0;
    /* this thread's current device may have changed since pk_gen_create (the constant buffer
     * table below and the launch are the device's) */
    PK_CU(cudaSetDevice(dev));
    /* static mode: as much of PK_STATIC_SMEM_BYTES as the GPU gives one block (1 KB is left for
     * the kernel's own __shared__ variables); what is beyond the kernels' area stages weights */
    PK_CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int static_smem = PK_STATIC_SMEM_BYTES < optin - 1024 ? PK_STATIC_SMEM_BYTES : optin - 1024;
    if (static_smem < PK_CUDA_SMEM_BYTES) static_smem = PK_CUDA_SMEM_BYTES; /* the launch check names it */
    const int smem_bytes = a->dynamic ? PK_CUDA_SMEM_BYTES : static_smem;
    c->hs.wstage_bytes = a->dynamic ? 0u : (uint32_t)(static_smem - PK_CUDA_SMEM_BYTES);
    const void *kernel = a->dynamic ? (const void *)pk_gen_kernel_dynamic : (const void *)pk_gen_kernel;
    PK_CU(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               smem_bytes > PK_CUDA_SMEM_BYTES ? smem_bytes : PK_CUDA_SMEM_BYTES));
    PK_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int threads = PK_CUDA_THREADS;
    PK_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes));
    if ((long)per_sm * sms < (long)blocks)
        return pk_gen_fail(err, err_len,
                           "the persistent kernel needs %u resident CTAs (%u workers%s) but the GPU holds %d (%d per SM "
                           "x %d SMs at %d threads and %d bytes of shared memory each): use fewer workers",
                           blocks, W, a->dynamic ? " + 1 scheduler CTA" : "", per_sm * sms, per_sm, sms,
                           threads, smem_bytes);

    /* requests */
    int64_t total_prompt = 0, total_new = 0;
    for (int i = 0; i < a->nreqs; i++) {
        total_prompt += a->prompt_len[i];
        total_new += a->max_new_tokens[i];
    }
    PK_CU(cudaMalloc((void **)&m->d_prompts, (size_t)(total_prompt ? total_prompt : 1) * sizeof(int32_t)));
    pk_step_req *reqs = (pk_step_req *)calloc((size_t)(a->nreqs ? a->nreqs : 1), sizeof(pk_step_req));
    if (!reqs) return pk_gen_fail(err, err_len, "out of host memory");
    int64_t off = 0;
    cudaError_t e1 = cudaSuccess;
    for (int i = 0; i < a->nreqs && e1 == cudaSuccess; i++) {
        reqs[i].prompt = m->d_prompts + off;
        reqs[i].prompt_len = a->prompt_len[i];
        reqs[i].max_new_tokens = a->max_new_tokens[i];
        for (int j = 0; j < PK_SAMPLE_PARAMS; j++) reqs[i].sample[j] = a->sample_words[(size_t)i * PK_SAMPLE_PARAMS + j];
        e1 = cudaMemcpy(m->d_prompts + off, a->prompts[i], (size_t)a->prompt_len[i] * sizeof(int32_t),
                        cudaMemcpyHostToDevice);
        off += a->prompt_len[i];
    }
    if (e1 == cudaSuccess) e1 = cudaMalloc((void **)&m->d_reqs, (size_t)(a->nreqs ? a->nreqs : 1) * sizeof(pk_step_req));
    if (e1 == cudaSuccess)
        e1 = cudaMemcpy(m->d_reqs, reqs, (size_t)a->nreqs * sizeof(pk_step_req), cudaMemcpyHostToDevice);
    free(reqs);
    PK_CU(e1);

    /* the step state over device arrays */
    PK_CU(cudaMalloc((void **)&m->d_tokens, (size_t)cfg->R * (size_t)cfg->max_seq * sizeof(int32_t)));
    PK_CU(cudaMalloc((void **)&m->d_slots, (size_t)cfg->R * sizeof(pk_slot)));
    PK_CU(cudaMalloc((void **)&m->d_free_pages, (size_t)cfg->num_pages * sizeof(int32_t)));
    const int32_t ngram_cap = pk_step_ngram_cap(cfg->spec_len, cfg->spec_ngram, cfg->max_seq);
    if (ngram_cap) /* cleared per request at admission */
        PK_CU(cudaMalloc((void **)&m->d_ngram_pos, (size_t)cfg->R * (size_t)ngram_cap * sizeof(int32_t)));
    PK_CU(cudaHostAlloc((void **)&m->h_emitted, (size_t)(total_new ? total_new : 1) * sizeof(pk_step_token),
                        cudaHostAllocMapped));
    pk_step_token *d_emitted;
    PK_CU(cudaHostGetDevicePointer((void **)&d_emitted, m->h_emitted, 0));
    pk_step_state st;
    memset(&st, 0, sizeof st);
    st.R = cfg->R;
    st.T = cfg->T;
    st.max_seq = cfg->max_seq;
    st.page_size = cfg->page_size;
    st.pages_per_req = cfg->pages_per_req;
    st.num_pages = cfg->num_pages;
    st.eos = cfg->eos;
    st.spec_len = cfg->spec_len;
    st.spec_ngram = cfg->spec_ngram;
    st.all_logits = cfg->all_logits;
    st.nreqs = a->nreqs;
    st.req_mask = -1; /* every id its own entry (decode_step.h) */
    st.reqs = m->d_reqs;
    st.tokens = m->d_tokens;
    st.slots = m->d_slots;
    st.free_pages = m->d_free_pages;
    st.ngram_pos = m->d_ngram_pos;
    st.ngram_cap = ngram_cap;
    st.step_tokens = (int32_t *)c->buf[cfg->step_tokens];
    st.token_pos = (int32_t *)c->buf[cfg->token_pos];
    st.token_req = (int32_t *)c->buf[cfg->token_req];
    st.page_table = (int32_t *)c->buf[cfg->page_table];
    st.sample_params = (int32_t *)c->buf[cfg->sample_params];
    st.sample_slot = (int32_t *)c->buf[cfg->sample_slot];
    st.step_info = (int32_t *)c->buf[cfg->step_info];
    st.step_output = (const int32_t *)c->buf[cfg->step_output];
    st.emitted = d_emitted;
    if (a->step_rec_cap > 0 && a->step_rec) {
        size_t rec_bytes = (size_t)(a->step_rec_cap + 1) * sizeof(pk_step_rec);
        PK_CU(cudaMalloc((void **)&m->d_step_rec, rec_bytes));
        PK_CU(cudaMemset(m->d_step_rec, 0, rec_bytes));
        st.rec = m->d_step_rec;
        st.rec_cap = a->step_rec_cap;
    }
    PK_CU(cudaMemcpy(c->d_step, &st, sizeof st, cudaMemcpyHostToDevice));

    /* counters, flags and queues start empty */
    pk_dev_state *h = &c->hs;
    PK_CU(cudaMemset(h->counters, 0, PK_COUNTER_WORDS * sizeof(pk_u64)));
    PK_CU(cudaMemset(h->terminate, 0, sizeof(int)));
    PK_CU(cudaMemset(h->cancel, 0, sizeof(int)));
    PK_CU(cudaMemset(h->cur_step, 0, sizeof(pk_u64)));
    PK_CU(cudaMemset(h->debug_claim, 0, sizeof(uint32_t)));
    PK_CU(cudaMemset(c->ring_mem, 0, c->ring_words * sizeof(pk_u64)));
    *c->h_nemitted = 0;
    memset(c->h_debug, 0, sizeof(pk_gen_debug));
    h->trace = NULL;
    h->trace_n = NULL;
    h->trace_cap = a->trace_cap;
    if (a->trace_cap) {
        PK_CU(cudaMalloc((void **)&m->d_trace, (size_t)W * a->trace_cap * sizeof(pk_gen_trace_rec)));
        PK_CU(cudaMalloc((void **)&m->d_trace_n, W * sizeof(pk_u64)));
        PK_CU(cudaMemset(m->d_trace_n, 0, W * sizeof(pk_u64)));
        h->trace = m->d_trace;
        h->trace_n = m->d_trace_n;
    }
    PK_CU(cudaMemcpy(c->d_state, h, sizeof *h, cudaMemcpyHostToDevice));
#if PK_GEN_CBUF /* this context's buffers in the module's constant table (dispatch.cuh) */
    PK_CU(cudaMemcpyToSymbol(pk_gen_cbuf, c->buf, PK_GEN_NUM_BUFFERS * sizeof(void *)));
#endif
    PK_CU(cudaDeviceSynchronize());

    /* launch, then stream tokens until the kernel ends */
    const pk_dev_state *arg_state = c->d_state;
    void *args[] = {(void *)&arg_state};
    PK_CU(cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(threads), args, smem_bytes, c->stream));
    uint32_t delivered = 0;
    int cancel_sent = 0;
    cudaError_t q;
    for (;;) {
        q = cudaStreamQuery(c->stream);
        if (!cancel_sent && a->cancel && __atomic_load_n(a->cancel, __ATOMIC_ACQUIRE)) {
            /* read by the step's end (pk_step_advance): no step is planned after it */
            cancel_sent =
                cudaMemcpyAsync(c->hs.cancel, c->h_one, sizeof(int), cudaMemcpyHostToDevice, c->cancel_stream) ==
                cudaSuccess; /* else tried again at the next poll */
        }
        uint32_t n = __atomic_load_n((const uint32_t *)c->h_nemitted, __ATOMIC_ACQUIRE);
        for (; delivered < n; delivered++) {
            const volatile pk_step_token *e = &m->h_emitted[delivered];
            if (a->on_token) a->on_token(a->user, e->req, e->token, e->row);
        }
        if (q != cudaErrorNotReady) break;
        pk_gen_sleep_us(50);
    }
    if (q != cudaSuccess) {
        c->broken = 1;
        if (__atomic_load_n(&c->h_debug->flag, __ATOMIC_ACQUIRE) == 1) {
            a->debug = *c->h_debug;
            pk_gen_fail(err, err_len, "a wait timed out; the kernel ended with %s", cudaGetErrorString(q));
            return -2;
        }
        return pk_gen_fail(err, err_len, "the persistent kernel failed: %s (%s)", cudaGetErrorString(q),
                           cudaGetErrorName(q));
    }
    /* results */
    PK_CU(cudaMemcpy(&st, c->d_step, sizeof st, cudaMemcpyDeviceToHost));
    a->steps = st.step;
    a->spec_drafted = st.drafted;
    a->spec_accepted = st.accepted;
    if (a->nreqs) {
        pk_step_req *out = (pk_step_req *)calloc((size_t)a->nreqs, sizeof(pk_step_req));
        if (!out) return pk_gen_fail(err, err_len, "out of host memory");
        e1 = cudaMemcpy(out, m->d_reqs, (size_t)a->nreqs * sizeof(pk_step_req), cudaMemcpyDeviceToHost);
        for (int i = 0; i < a->nreqs && e1 == cudaSuccess; i++) {
            a->num_output[i] = out[i].num_output;
            a->finish[i] = out[i].finish;
        }
        free(out);
        PK_CU(e1);
    }
    if (m->d_step_rec)
        PK_CU(cudaMemcpy(a->step_rec, m->d_step_rec, (size_t)(a->step_rec_cap + 1) * sizeof(pk_step_rec),
                         cudaMemcpyDeviceToHost));
    if (a->trace_cap) {
        PK_CU(cudaMemcpy(a->trace_n, m->d_trace_n, W * sizeof(pk_u64), cudaMemcpyDeviceToHost));
        PK_CU(cudaMemcpy(a->trace, m->d_trace, (size_t)W * a->trace_cap * sizeof(pk_gen_trace_rec),
                         cudaMemcpyDeviceToHost));
    }
    return 0;
}

/* Set while a run of this kernel.so is on the GPU: its module-wide state (the constant buffer
 * table) belongs to that run, so a run of a second context of the same kernel.so
 * in this process at the same time is refused with an error instead of overwriting them. */
static int pk_gen_module_busy;

extern "C" int pk_gen_run(void *vctx, pk_gen_run_args *a, char *err, size_t err_len) {
    pk_gen_ctx *c = (pk_gen_ctx *)vctx;
    if (c->broken) return pk_gen_fail(err, err_len, "the CUDA context failed in an earlier run");
    if (a->dynamic && c->cfg.num_schedulers < 1) return pk_gen_fail(err, err_len, "dynamic mode needs a scheduler");
    if (__atomic_exchange_n(&pk_gen_module_busy, 1, __ATOMIC_ACQ_REL))
        return pk_gen_fail(err, err_len,
                           "this kernel is already running for another model instance in this process (one run of a "
                           "compiled kernel at a time)");
    pk_gen_run_mem m;
    memset(&m, 0, sizeof m);
    int rc = pk_gen_run_inner(c, a, &m, err, err_len);
    if (!c->broken) pk_gen_run_free(&m);
    __atomic_store_n(&pk_gen_module_busy, 0, __ATOMIC_RELEASE);
    return rc;
}

static int pk_gen_copy_bandwidth_inner(pk_gen_ctx *c, void *a, void *b, uint64_t bytes, int reps, cudaEvent_t e0,
                                       cudaEvent_t e1, double *bytes_per_s, char *err, size_t err_len) {
    for (int i = 0; i < 3; i++) PK_CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->stream));
    PK_CU(cudaEventRecord(e0, c->stream));
    for (int i = 0; i < reps; i++) PK_CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->stream));
    PK_CU(cudaEventRecord(e1, c->stream));
    PK_CU(cudaEventSynchronize(e1));
    float ms = 0;
    PK_CU(cudaEventElapsedTime(&ms, e0, e1));
    if (ms <= 0) return pk_gen_fail(err, err_len, "the copy probe took %g ms", (double)ms);
    *bytes_per_s = 2.0 * (double)bytes * reps / ((double)ms / 1e3);
    return 0;
}

extern "C" int pk_gen_copy_bandwidth(void *vctx, uint64_t bytes, int reps, double *bytes_per_s, uint64_t *bytes_used,
                                     char *err, size_t err_len) {
    pk_gen_ctx *c = (pk_gen_ctx *)vctx;
    if (c->broken) return pk_gen_fail(err, err_len, "the CUDA context failed in an earlier run");
    if (reps < 1) reps = 1;
    void *a = NULL, *b = NULL;
    for (; bytes >= (64ull << 20); bytes /= 2) {
        if (cudaMalloc(&a, bytes) != cudaSuccess) a = NULL;
        else if (cudaMalloc(&b, bytes) != cudaSuccess) b = NULL;
        if (a && b) break;
        (void)cudaGetLastError(); /* an allocation failure is not sticky; clear it */
        if (a) cudaFree(a);
        a = b = NULL;
    }
    if (!a || !b)
        return pk_gen_fail(err, err_len, "not enough free GPU memory for the copy probe (two buffers of 64 MiB)");
    *bytes_used = bytes;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        rc = pk_gen_fail(err, err_len, "cannot create CUDA events for the copy probe");
    else
        rc = pk_gen_copy_bandwidth_inner(c, a, b, bytes, reps, e0, e1, bytes_per_s, err, err_len);
    cudaStreamSynchronize(c->stream);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return rc;
}

extern "C" void pk_gen_destroy(void *vctx) {
    pk_gen_ctx *c = (pk_gen_ctx *)vctx;
    if (!c) return;
    if (c->buf)
        for (uint32_t i = 0; i < PK_GEN_NUM_BUFFERS; i++) cudaFree(c->buf[i]);
    free(c->buf);
    cudaFree(c->d_buf);
    cudaFree(c->hs.counters);
    cudaFree(c->hs.terminate);
    cudaFree(c->hs.cancel);
    if (c->h_one) cudaFreeHost(c->h_one);
    if (c->cancel_stream) cudaStreamDestroy(c->cancel_stream);
    cudaFree(c->hs.cur_step);
    cudaFree(c->hs.debug_claim);
    cudaFree(c->hs.worker_q);
    cudaFree(c->d_step);
    cudaFree(c->ring_mem);
    cudaFree(c->ring_val);
    cudaFree(c->d_state);
    if (c->h_nemitted) cudaFreeHost((void *)c->h_nemitted);
    if (c->h_debug) cudaFreeHost(c->h_debug);
    for (int i = 0; i < 2; i++) {
        if (c->staging[i]) cudaFreeHost(c->staging[i]);
        if (c->staged[i]) cudaEventDestroy(c->staged[i]);
    }
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

#endif /* PK_CUDA_RUNTIME_CUH */
