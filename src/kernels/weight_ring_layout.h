/* weight_ring_layout.h — the geometry of static mode's weight stream (src/kernels/cuda/weight_ring.cuh),
 * in plain C so the host sizes the rest of the block's shared memory the way the device does: the
 * staged decode attention gets what the ring leaves (attention_decode_layout.h), and the model
 * builder splits attention over the KV length when that is too little (src/model/model.c).
 *
 * Static mode's block on the H100 / H200 (227 KB opt-in, 1 KB left for __shared__ variables):
 *   [0, 96 KB)                         the task kernels' own area (PK_CUDA_SMEM_BYTES)
 *   [96 KB, ring)                      the staged decode attention's overflow
 *   [ring, ring + PK_WRING_BYTES)      the ring: its state, then PK_WRING_SLOTS slots of
 *                                      PK_WRING_SLOT_BYTES (the top of the block)
 * Bytes in flight per SM = slots · slot bytes: 64 KB covers ~2 µs of DRAM latency at one SM's
 * share (4.3 TB/s / 132 = 32 GB/s; a stand-alone ring of 4 × 16 KB streamed 4.37 TB/s on the
 * H200, session 5); a deeper ring would shrink the attention's reach below the 288 positions of
 * a 160-token context plus 128 new tokens at D 128 / G 2. 8 slots of 8 KB: one slot per warp
 * and round (weight_ring.cuh: one warp reads each page).
 */
#ifndef PK_WEIGHT_RING_LAYOUT_H
#define PK_WEIGHT_RING_LAYOUT_H

/* 1: static mode streams the linear tasks' weight tiles through the ring and decode GEMVs take
 * the paged order (linear.cuh); 0: session 4's staging of whole tiles up to 96 KB and
 * pk_lin_rows. Off by default: on the H200 (docs/PERF.md, session 5) the ring took Qwen3-8B at
 * context 160 from 6.47 to 6.11-6.13 ms/token but made every context-4096 row slower (0.6B 2.01
 * -> 3.02): with the ring the staged attention holds 268-288 positions, and a split of 9
 * 32-position blocks (288) does not fit at G 4, so those tasks take the general kernel. Turn it
 * on with -DPK_WRING=1 in both the host build (`make CFLAGS="-O2 -g -DPK_WRING=1"`, for the split
 * rule) and PK_NVCC_DEFINES. */
#define PK_WRING 0

/* 1 (with PK_WRING): a ninth warp per worker CTA, the producer, fills the ring's slots in stream
 * order as the task warps free them (weight_ring.cuh), at most PK_WRING_PACE pages landing at
 * once, so the stream runs on through task ends, hand-offs and dependency waits instead of
 * refilling a slot only when its owner warp reads it (docs/PERF.md "Session 26"; the model:
 * bench/comm_handoff.cu's stream, session 25). Task code then synchronises the task threads with
 * a named barrier (rows.cuh's pk_cta_sync). 0 (default): the task warps refill. */
#define PK_WRING_PRODUCER 0
/* 1 (with PK_WRING_PRODUCER, a diagnostic): the ninth warp is launched and idles, the task warps
 * refill as without it — the producer's register cost without its stream (PK_NVCC_DEFINES). */
#define PK_WRING_IDLE 0
#define PK_WRING_PRODUCES (PK_WRING_PRODUCER && !PK_WRING_IDLE) /* the producer fills the ring */
#define PK_WRING_PACE 4 /* pages landing at once per SM (the producer's pace) */

/* Without the ring, static mode stages a linear task's whole weight tile in shared memory before
 * its dependency wait when the tile is at most this many bytes (runtime.cuh, pk_stage_weights);
 * larger tiles stream through the GEMV's async rings. The model builder reads it too (model.c:
 * a streamed qkv tile leaves no room for the next attention task's KV stage). */
#define PK_WSTAGE_BYTES (96u * 1024u)
#define PK_WRING_SLOTS 8
#define PK_WRING_SLOT_BYTES (8 * 1024)
/* struct pk_wring with its segment table (2112 bytes at 8 slots), padded so that the staged
 * attention keeps 288 positions at D 128 / G 2; 20 bytes more per slot beyond 8 */
#define PK_WRING_STATE_BYTES (2176 + 32 * (PK_WRING_SLOTS > 8 ? PK_WRING_SLOTS - 8 : 0))
#define PK_WRING_BYTES (PK_WRING_STATE_BYTES + PK_WRING_SLOTS * PK_WRING_SLOT_BYTES)

/* The block of static mode on the H100 / H200: 227 KB opt-in less 1 KB. */
#define PK_STATIC_BLOCK_SMEM_BYTES (227 * 1024 - 1024)

#endif /* PK_WEIGHT_RING_LAYOUT_H */
