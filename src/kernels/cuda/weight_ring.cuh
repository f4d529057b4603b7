/* weight_ring.cuh — static mode's weight stream: each worker CTA streams the weight tiles of its
 * schedule, in schedule order, through a ring of shared-memory slots filled by the bulk-copy engine,
 * ahead of the tasks that read them and across task boundaries. Weights never change during a run,
 * so a tile can be loaded before its task's dependency is met, even before the task before it has
 * run; the ring keeps PK_WRING_SLOTS · PK_WRING_SLOT_BYTES in flight per SM through hand-offs,
 * dependency waits and the tasks themselves, where the register-streamed GEMV (pk_lin_rows) had
 * DRAM idle from one task's end to the next one's first loads (docs/PERF.md, session 5).
 *
 * The stream. A worker's stream is the sequence of pages of its segments, repeated every step:
 * a segment is one linear task's tile (whole rows, contiguous: codegen's pk_gen_prefetch entry),
 * in the order the worker runs them (runtime.cuh builds the segment table at launch). A page is
 * what one slot holds: rows of up to PK_WRING_SLOT_BYTES as a whole (rows <= the slot), or one
 * piece of a longer row (pk_wring_page).
 *
 * Protocol: one warp per page. Stream page p lives in slot p mod N (N = slots, a multiple of the
 * 8 warps) and is read by warp p mod 8 alone, which then refills that slot with page p + N: each
 * slot has one owner warp, so refills never race and no warp waits for another. Per slot s:
 * mbarrier full[s], count 1:
 *   fill     lane 0 of the owner posts the page's bytes on full[s] (arrive.expect_tx) and issues
 *            one cp.async.bulk of the page into the slot; the copy's bytes complete the phase;
 *   consume  the owner's lanes wait on full[s], parity (p / N) & 1, and read the page;
 *   refill   after __syncwarp, lane 0 moves the slot's cursor N pages on and fills it.
 * The reads are complete before the refill's copy is issued (their values were summed and
 * stored first); a read followed by the copy engine's write needs no proxy fence (a generic
 * write followed by an async-proxy access would). Session 5's first version had all 8 warps read
 * every page and the last one refill it: each page then cost ~1000-2500 cycles of dependent
 * latency (wait, 4 loads per lane, a 32-long FMA chain, the butterfly, the count, the refill) one
 * page at a time: the 8B GEMVs at 1.6-2.1 TB/s. One warp per page runs 8 such chains side by side.
 * With PK_WRING_PRODUCER (weight_ring_layout.h) a ninth warp fills the slots instead: the reader's
 * lane 0 arrives on the slot's `empty` mbarrier where it would refill, and the producer's lane 0
 * (pk_wring_produce) issues page p + N into it, paced; measured no faster on the H200 and the ninth
 * warp caps the task code at 168 registers (docs/PERF.md "Session 26").
 * Every page is consumed: a task that does not read its pages (a prefill step's rows)
 * has the runtime drain them (pk_wring_drain). At the end of a run the worker waits for the fills
 * in flight (pk_wring_quiesce) so no copy lands after the CTA exits.
 */
#ifndef PK_CUDA_WEIGHT_RING_CUH
#define PK_CUDA_WEIGHT_RING_CUH

#include <stdint.h>

#include "kernels/cuda/mbarrier.cuh"
#include "kernels/cuda/rows.cuh"
#include "kernels/weight_ring_layout.h"

/* One segment of a worker's stream: a task's weight tile in global memory (what the runtime
 * hands the ring; runtime.cuh pk_wring_seg_of). */
typedef struct pk_wring_seg {
    const char *src;    /* the tile's first byte, 16-byte aligned */
    uint32_t bytes;     /* whole rows */
    uint32_t row_bytes; /* a multiple of 16 */
    uint32_t npages;    /* pk_wring_npages */
    uint32_t pad;
} pk_wring_seg;

/* A segment as the ring's table in shared memory keeps it (12 bytes): the refill reads it on the
 * stream's critical path, so it must not be a global load (session 5 measured ~1 µs per page
 * with the table in global memory: every refill waited on two dependent loads behind the weight
 * traffic, and the warp that refills is the one the next refill waits for). */
typedef struct pk_wring_ent {
    uint32_t src_lo, src_hi;
    uint16_t rows;  /* rows of the tile */
    uint16_t row16; /* row bytes / 16 */
} pk_wring_ent;
#define PK_WRING_MAX_SEGS 160 /* a worker with more linear tasks than this streams without the ring */

/* The ring's state, at the start of the ring area (shared memory). */
typedef struct pk_wring {
    uint64_t full[PK_WRING_SLOTS];     /* mbarriers */
    uint32_t cur_seg[PK_WRING_SLOTS];  /* the page the slot holds or receives: segment, */
    uint32_t cur_page[PK_WRING_SLOTS]; /* page within it, */
    uint32_t cur_np[PK_WRING_SLOTS];   /* the segment's pages */
    uint64_t policy;                   /* the weight loads' L2 policy */
    char *slot0;                       /* slot 0 (generic pointer to shared memory); slot s at + s · slot bytes */
    uint32_t nseg;
    uint32_t pos;      /* the running task's first page in the stream (set by the runtime) */
    uint32_t seg;      /* its segment */
    uint32_t consumed; /* set by a task that read its pages: pos + its pages (else the runtime
                        * drains them); never reset, so a stale value cannot match */
    pk_wring_ent segs[PK_WRING_MAX_SEGS]; /* the worker's segments, in schedule order */
} pk_wring;
static_assert(sizeof(pk_wring) <= PK_WRING_STATE_BYTES, "the ring's state");
static_assert(PK_WRING_BYTES % 128 == 0 && PK_STATIC_BLOCK_SMEM_BYTES % 128 == 0,
              "the host's attention budget (PK_ATTD_STATIC_SMEM_BYTES) is exactly the ring's offset");
static_assert(PK_WRING_SLOT_BYTES % 16 == 0 && PK_WRING_SLOTS % PK_DEV_WARPS == 0, "ring geometry: every warp owns slots");
static_assert(PK_WRING_PACE >= 1 && PK_WRING_PACE <= PK_WRING_SLOTS, "the producer's pace: at most every slot in flight");

__device__ __forceinline__ const char *pk_wring_ent_src(const pk_wring_ent &e) {
    return (const char *)(((uint64_t)e.src_hi << 32) | e.src_lo);
}
__device__ __forceinline__ uint32_t pk_wring_ent_row_bytes(const pk_wring_ent &e) { return 16u * e.row16; }
__device__ __forceinline__ uint32_t pk_wring_ent_bytes(const pk_wring_ent &e) { return (uint32_t)e.rows * 16u * e.row16; }
/* Whether a segment fits the table's entry. */
__device__ __forceinline__ bool pk_wring_ent_ok(const pk_wring_seg &g) {
    return g.row_bytes / 16 <= 0xffffu && g.bytes / g.row_bytes <= 0xffffu;
}

/* The pages of rows of row_bytes: rows that fit the slot go rows_per_page = slot / row_bytes
 * to a page (pieces_per_row 1); a longer row goes in ceil(row_bytes / slot) pieces, each its own
 * page (rows_per_page 0). The ring and the paged GEMV (linear.cuh) both cut tiles this way. */
typedef struct pk_wring_geom {
    uint32_t rows_per_page, pieces_per_row;
} pk_wring_geom;

__host__ __device__ __forceinline__ pk_wring_geom pk_wring_geom_of(uint32_t row_bytes) {
    pk_wring_geom g;
    g.rows_per_page = row_bytes <= PK_WRING_SLOT_BYTES ? PK_WRING_SLOT_BYTES / row_bytes : 0;
    g.pieces_per_row = g.rows_per_page ? 1 : (row_bytes + PK_WRING_SLOT_BYTES - 1) / PK_WRING_SLOT_BYTES;
    return g;
}

/* Pages of a segment of `bytes` (whole rows). */
__host__ __device__ __forceinline__ uint32_t pk_wring_npages(uint32_t bytes, uint32_t row_bytes) {
    const pk_wring_geom g = pk_wring_geom_of(row_bytes);
    const uint32_t rows = bytes / row_bytes;
    return g.rows_per_page ? (rows + g.rows_per_page - 1) / g.rows_per_page : rows * g.pieces_per_row;
}

/* Page q of a segment: bytes [*off, *off + *len) of its tile. */
__device__ __forceinline__ void pk_wring_page(uint32_t bytes, uint32_t row_bytes, uint32_t q, uint32_t *off,
                                              uint32_t *len) {
    const pk_wring_geom g = pk_wring_geom_of(row_bytes);
    if (g.rows_per_page) {
        const uint32_t span = g.rows_per_page * row_bytes;
        *off = q * span;
        *len = bytes - *off < span ? bytes - *off : span;
    } else {
        const uint32_t piece = (q % g.pieces_per_row) * PK_WRING_SLOT_BYTES;
        *off = (q / g.pieces_per_row) * row_bytes + piece;
        *len = row_bytes - piece < PK_WRING_SLOT_BYTES ? row_bytes - piece : PK_WRING_SLOT_BYTES;
    }
}

__device__ __forceinline__ uint32_t pk_wring_bar(const pk_wring *r, uint32_t s) {
    return (uint32_t)__cvta_generic_to_shared(&r->full[s]);
}

/* Fills slot s with page `page` of segment `seg` (one thread). */
__device__ __forceinline__ void pk_wring_fill_page(pk_wring *r, uint32_t s, uint32_t seg, uint32_t page) {
    const pk_wring_ent e = r->segs[seg];
    uint32_t off, len;
    pk_wring_page(pk_wring_ent_bytes(e), pk_wring_ent_row_bytes(e), page, &off, &len);
    const uint32_t bar = pk_wring_bar(r, s);
    pk_dev_mbar_arrive_expect_tx(bar, len);
    pk_dev_bulk_copy_w((uint32_t)__cvta_generic_to_shared(r->slot0 + s * PK_WRING_SLOT_BYTES), pk_wring_ent_src(e) + off,
                       len, bar, r->policy);
}

/* The pages of segment seg. */
__device__ __forceinline__ uint32_t pk_wring_seg_pages(const pk_wring *r, uint32_t seg) {
    const pk_wring_ent &e = r->segs[seg];
    return pk_wring_npages(pk_wring_ent_bytes(e), pk_wring_ent_row_bytes(e));
}

/* Lane 0 of the slot's owner: fills slot s with the page its cursor names. */
__device__ __forceinline__ void pk_wring_fill(pk_wring *r, uint32_t s) {
    pk_wring_fill_page(r, s, r->cur_seg[s], r->cur_page[s]);
}

/* Moves slot s's cursor n pages on in the stream (wrapping to the next step's first segment). */
__device__ __forceinline__ void pk_wring_advance(pk_wring *r, uint32_t s, uint32_t n) {
    uint32_t seg = r->cur_seg[s], page = r->cur_page[s] + n, np = r->cur_np[s];
    while (page >= np) { /* crossing into the next segment: its page count (divisions, not per page) */
        page -= np;
        seg = seg + 1 == r->nseg ? 0 : seg + 1;
        np = pk_wring_seg_pages(r, seg);
    }
    r->cur_seg[s] = seg;
    r->cur_page[s] = page;
    r->cur_np[s] = np;
}

/* Thread 0, once per launch, after it wrote the segment table (segs[0 .. nseg)): barriers,
 * cursors (slot s at stream page s) and the first fills. */
__device__ inline void pk_wring_start(pk_wring *r, uint32_t nseg, char *slot0) {
    r->nseg = nseg;
    r->pos = r->seg = 0;
    r->consumed = 0;
    r->slot0 = slot0;
    r->policy = pk_dev_weight_policy();
    if (nseg == 0) return;
    for (uint32_t s = 0; s < PK_WRING_SLOTS; s++) {
        pk_dev_mbar_init(pk_wring_bar(r, s), 1);
        r->cur_seg[s] = 0;
        r->cur_page[s] = 0;
        r->cur_np[s] = pk_wring_seg_pages(r, 0);
        pk_wring_advance(r, s, s);
    }
    pk_dev_mbar_init_fence();
    pk_dev_fence_proxy_async_smem();
    for (uint32_t s = 0; s < PK_WRING_SLOTS; s++) pk_wring_fill(r, s);
}

/* The warp that reads stream page p (and refills its slot). */
__device__ __forceinline__ uint32_t pk_wring_owner(uint32_t p) { return p % PK_DEV_WARPS; }

/* The owner's lanes: wait until stream page p has landed; returns its slot. */
__device__ __forceinline__ const char *pk_wring_wait(const pk_wring *r, uint32_t p) {
    const uint32_t s = p % PK_WRING_SLOTS;
    pk_dev_mbar_wait(pk_wring_bar(r, s), (p / PK_WRING_SLOTS) & 1u);
    return r->slot0 + s * PK_WRING_SLOT_BYTES;
}

/* The owner's lanes, after __syncwarp(), once they have read stream page p: refill its slot
 * with page p + N. */
__device__ __forceinline__ void pk_wring_release(pk_wring *r, uint32_t p) {
    if (threadIdx.x % 32 != 0) return;
    const uint32_t s = p % PK_WRING_SLOTS;
    pk_wring_advance(r, s, PK_WRING_SLOTS);
    pk_wring_fill(r, s);
}

/* Every thread: consumes n pages from stream page p on without reading them (each warp its own). */
__device__ inline void pk_wring_drain(pk_wring *r, uint32_t p, uint32_t n) {
    const uint32_t warp = threadIdx.x / 32;
    for (uint32_t q = (warp + PK_DEV_WARPS - p % PK_DEV_WARPS) % PK_DEV_WARPS; q < n; q += PK_DEV_WARPS) {
        pk_wring_wait(r, p + q);
        __syncwarp();
        pk_wring_release(r, p + q);
    }
}

/* Thread 0, at the end of a run, after a barrier: waits for the N fills in flight from stream
 * page p (the next one to consume) on. */
__device__ inline void pk_wring_quiesce(pk_wring *r, uint32_t p) {
    if (r->nseg == 0) return;
    for (uint32_t q = 0; q < PK_WRING_SLOTS; q++) pk_wring_wait(r, p + q);
    for (uint32_t s = 0; s < PK_WRING_SLOTS; s++) pk_dev_mbar_inval(pk_wring_bar(r, s));
}

#endif /* PK_CUDA_WEIGHT_RING_CUH */
