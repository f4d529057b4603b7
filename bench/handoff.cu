/* handoff.cu — what one all-to-all hand-off costs: pk's events against flags carried in the data.
 *
 * issue 5, session 23 (docs/PERF.md): the 0.6B's layer is five hand-offs (qkv -> attention ->
 * o_proj -> gate_up -> down -> qkv), each ~2 us of signal -> poll -> x read, with DRAM idle most
 * of the time. pk's hand-off: the producing CTA stores its slice of the activation, a barrier,
 * thread 0 adds to the event's counter with release semantics (red.release.gpu: the fence waits
 * for the CTA's stores to reach L2); the consumer's thread 0 polls the counter (ld.acquire.gpu,
 * 32 ns sleeps), a barrier, then every thread loads its part of x through L2 — three L2 round
 * trips in a row after the producer's stores, plus the fence. The alternative measured here
 * (NCCL's "LL" protocol): every 4 bytes of activation travel with a 4-byte flag (the step's
 * number) in one 8-byte store, which is single-copy atomic; the consumer's threads load x and
 * retry until every flag is the current one. No fence, no counter, no separate poll: the x load
 * is the poll.
 *
 * The model: NCTA CTAs run a chain of STAGES hand-offs; at each, every CTA reads the whole
 * vector x [V] bf16 (the previous stage's output), reduces its sum of squares across the CTA (as
 * an rmsnorm GEMV's row scale), and writes its slice of V / NCTA outputs (y = x · rsqrt(mean
 * x²)); two buffers alternate (a CTA writes stage s + 2's buffer only after it read every
 * slice of stage s + 1, which every CTA wrote after reading stage s). Optionally each CTA first
 * issues PRE KB of 16-byte cp.async weight copies (a staged tile, as pk issues before its wait)
 * and waits for them before its sums. Both protocols compute the same bits: the host checks the
 * final vectors agree.
 *
 *   nvcc -O3 -arch=sm_90a -o build/handoff bench/handoff.cu && build/handoff
 *
 * Prints, per protocol and PRE, the median over launches of (chain time / STAGES): the time of
 * one hand-off with its tiny task.
 *
 * Measured on the H200 (session 23, two runs, us per hand-off): events 1.31 / 2.25 / 3.75 with
 * 0 / 32 / 96 KB of copies ahead of the wait, LL 1.21 / 2.25 / 3.50 (sleeping between polls: no
 * gain for either). The flags save ~0.1 us idle and nothing once copies are in flight: a hand-off
 * is about one L2 round trip either way, and any load queues behind the SM's copies.
 */
#include "micro.cuh"
#include <string.h>

enum { THREADS = 256, WARPS = THREADS / 32, NCTA = 128, V = 2048, SLICE = V / NCTA, STAGES = 512 };
enum { P_EVENT = 0, P_EVENT_SPIN = 1, P_LL = 2, P_LL_SLEEP = 3, NPROT = 4 };
static const char *prot_names[NPROT] = {"event", "event-nosleep", "ll", "ll-sleep"};
static_assert(V == THREADS * 8, "each thread stages 8 elements of x");
static_assert(SLICE % 2 == 0, "a CTA's outputs are whole 4-byte words");

typedef struct {
    int prot, pre_kb;
    const char *w;          /* weights: PRE KB per CTA and stage, rotating through nregion tiles */
    uint64_t nregion;
    unsigned long long *ctr; /* [STAGES + 1] event counters (P_EVENT*) */
    uint32_t *plain[2];     /* [V / 2] bf16 pairs (P_EVENT*) */
    unsigned long long *ll[2]; /* [V / 2] {bf16 pair, flag} (P_LL*) */
    unsigned long long *t;  /* [2]: block 0's start and end */
    uint32_t *result;       /* [V / 2]: the last stage's output */
} args_t;

__device__ __forceinline__ void st_relaxed(unsigned long long *p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void ld_relaxed2(const unsigned long long *p, unsigned long long &a, unsigned long long &b) {
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

__global__ void __launch_bounds__(THREADS, 1) chain_kernel(args_t a) {
    extern __shared__ __align__(128) char wsm[]; /* the staged weights (PRE KB) */
    __shared__ float xs[V];
    __shared__ float red[WARPS];
    const int tid = threadIdx.x, b = blockIdx.x;
    const bool ll = a.prot >= P_LL;
    if (b == 0 && tid == 0) a.t[0] = now_ns();
    float touch = 0.0f;
    for (int s = 0; s < STAGES; s++) {
        const int in = s & 1, out = in ^ 1;
        /* the staged tile's copies, issued before the wait */
        const int nchunk = a.pre_kb * 1024 / 16;
        const char *wt = a.w + (((uint64_t)s * NCTA + b) % a.nregion) * (uint64_t)a.pre_kb * 1024;
        for (int c = tid; c < nchunk; c += THREADS) {
            const uint32_t dst = (uint32_t)__cvta_generic_to_shared(wsm + 16 * c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(wt + 16 * c) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        /* wait for x and stage it: 8 elements per thread, 4 bf16 pairs */
        uint32_t pr[4];
        if (!ll) {
            if (tid == 0 && s > 0) {
                if (a.prot == P_EVENT)
                    while (ld_acquire(a.ctr + s) < NCTA) __nanosleep(32);
                else
                    while (ld_acquire(a.ctr + s) < NCTA) { }
            }
            __syncthreads();
            const uint4 v = __ldcg((const uint4 *)(a.plain[in] + 4 * tid));
            pr[0] = v.x; pr[1] = v.y; pr[2] = v.z; pr[3] = v.w;
        } else {
            const unsigned long long want = (unsigned long long)(s + 1) << 32;
            const unsigned long long *p = a.ll[in] + 4 * tid;
            unsigned long long w0, w1, w2, w3;
            for (;;) {
                ld_relaxed2(p, w0, w1);
                ld_relaxed2(p + 2, w2, w3);
                if ((w0 & ~0xffffffffull) == want && (w1 & ~0xffffffffull) == want && (w2 & ~0xffffffffull) == want &&
                    (w3 & ~0xffffffffull) == want)
                    break;
                if (a.prot == P_LL_SLEEP) __nanosleep(32);
            }
            pr[0] = (uint32_t)w0; pr[1] = (uint32_t)w1; pr[2] = (uint32_t)w2; pr[3] = (uint32_t)w3;
        }
        float ss = 0.0f;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float x0 = lo_f32(pr[q]), x1 = hi_f32(pr[q]);
            xs[8 * tid + 2 * q] = x0;
            xs[8 * tid + 2 * q + 1] = x1;
            ss += x0 * x0 + x1 * x1;
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
        /* the row scale: the CTA's sum of squares (fixed order: the same bits in both protocols) */
        const float scale = cta_rms_scale<WARPS>(ss, red, V);
        if (tid < SLICE / 2) {
            const int j = b * SLICE + 2 * tid;
            /* the weights are read (so the copies cannot be dropped), their bytes add 0 */
            if (a.pre_kb) touch += (float)(wsm[(16 * tid) % (a.pre_kb * 1024)] == 0x7f);
            const float y0 = xs[j] * scale * 1.01f + touch, y1 = xs[j + 1] * scale * 0.99f;
            const uint32_t pair = bf16_bits(y0) | (bf16_bits(y1) << 16);
            if (ll)
                st_relaxed(a.ll[out] + j / 2, ((unsigned long long)(s + 2) << 32) | pair);
            else
                a.plain[out][j / 2] = pair;
            if (s == STAGES - 1) a.result[j / 2] = pair;
        }
        if (!ll) {
            __syncthreads(); /* every store issued before the release */
            if (tid == 0) red_release(a.ctr + s + 1, 1);
        } else {
            __syncthreads(); /* xs and red are read before the next stage rewrites them */
        }
    }
    if (b == 0 && tid == 0) a.t[1] = now_ns();
}

int main(int argc, char **argv) {
    const int launches = argc > 1 ? atoi(argv[1]) : 20;
    const int pres[] = {0, 32, 96};
    const uint64_t wbytes = 1ull << 30; /* > L2: the staged copies come from DRAM */
    args_t a;
    memset(&a, 0, sizeof a);
    a.w = device_filled(wbytes, 1);
    CHECK(cudaMalloc(&a.ctr, 8 * (STAGES + 1)));
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMalloc(&a.plain[i], V * 2));
        CHECK(cudaMalloc(&a.ll[i], V * 4));
    }
    CHECK(cudaMalloc(&a.t, 16));
    CHECK(cudaMalloc(&a.result, V * 2));
    /* the input: V bf16 of a fixed pattern, plain and with stage 0's flag (1) */
    uint32_t hx[V / 2];
    unsigned long long hll[V / 2];
    for (int i = 0; i < V / 2; i++) {
        const float f0 = (float)((i * 37) % 101 - 50) / 25.0f, f1 = (float)((i * 53) % 97 - 48) / 24.0f;
        uint32_t u0, u1;
        memcpy(&u0, &f0, 4);
        memcpy(&u1, &f1, 4);
        hx[i] = (u0 >> 16) | (u1 & 0xffff0000u);
        hll[i] = (1ull << 32) | hx[i];
    }
    uint32_t ref[V / 2], got[V / 2];
    const int smem = 96 * 1024;
    CHECK(cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    double *per = (double *)malloc(sizeof(double) * launches);
    int have_ref = 0, bad = 0;
    printf("%-14s %6s | us per hand-off: p50   min   max   (%d CTAs, x [%d] bf16, %d stages)\n", "protocol", "PRE KB",
           NCTA, V, STAGES);
    for (int pi = 0; pi < 3; pi++)
        for (int prot = 0; prot < NPROT; prot++) {
            a.prot = prot;
            a.pre_kb = pres[pi];
            a.nregion = a.pre_kb ? wbytes / ((uint64_t)a.pre_kb * 1024) : 1;
            int n = 0;
            for (int l = 0; l < launches + 2; l++) {
                CHECK(cudaMemset(a.ctr, 0, 8 * (STAGES + 1)));
                CHECK(cudaMemcpy(a.plain[0], hx, sizeof hx, cudaMemcpyHostToDevice));
                CHECK(cudaMemcpy(a.ll[0], hll, sizeof hll, cudaMemcpyHostToDevice));
                CHECK(cudaMemset(a.ll[1], 0, V * 4));
                chain_kernel<<<NCTA, THREADS, smem>>>(a);
                CHECK(cudaGetLastError());
                CHECK(cudaDeviceSynchronize());
                unsigned long long ht[2];
                CHECK(cudaMemcpy(ht, a.t, 16, cudaMemcpyDeviceToHost));
                CHECK(cudaMemcpy(got, a.result, sizeof got, cudaMemcpyDeviceToHost));
                if (!have_ref) {
                    memcpy(ref, got, sizeof ref);
                    have_ref = 1;
                } else if (memcmp(ref, got, sizeof ref) != 0) {
                    bad++;
                }
                if (l < 2) continue; /* warm-up */
                per[n++] = (double)(ht[1] - ht[0]) / 1e3 / STAGES;
            }
            qsort(per, n, sizeof(double), cmp_double);
            printf("%-14s %6d | %20.3f %5.3f %5.3f\n", prot_names[prot], a.pre_kb, per[n / 2], per[0], per[n - 1]);
        }
    printf("final vectors: %s\n", bad ? "MISMATCH between launches or protocols" : "identical in every launch");
    return bad != 0;
}
