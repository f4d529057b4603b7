/* red_width.cu — what the fused MLP's reductions cost by their width: 128 tasks each add their
 * partial of every one of 1024 outputs into one accumulator in L2, as RMSNORM_SWIGLU_DOWN does
 * (int64 fixed point, red.global.add.u64: 131,072 reductions a layer on the Qwen3-0.6B).
 *
 * issue 5, session 47 (docs/PERF.md): session 31 measured that the reductions' number is what
 * costs (half of them skipped: the 0.6B's step −2.6 %). Hopper has vector float reductions
 * (red.global.add.v2/v4.f32), and a float sum of integers is exact and the same in any order
 * while every partial sum stays below 2^24: an output's fixed-point value split into two signed
 * "digits" of 17 bits (|digit| < 2^17, 128 of them sum below 2^24) adds exactly as two floats,
 * so one v4 reduction could carry two outputs — half the reductions, twice the bytes each, the
 * same bits every run. Whether that is cheaper depends on what an L2 reduction costs: per
 * operation or per byte. This measures it, with the accumulator's lines as pk's (one 8 KB array
 * every task adds into), and how late an unrelated L2 load returns meanwhile.
 *
 *   nvcc -O3 -arch=sm_90a -o build/red_width bench/red_width.cu && build/red_width [reps]
 *
 * One CTA per SM (cooperative launch), 256 threads; CTAs 0..127 are the tasks, 128 probes, 129
 * polls. All start together at a %globaltimer instant CTA 0 publishes. A task's threads issue
 * their reductions (thread t: outputs t, t + 256, ...), then a barrier and thread 0's release
 * increment of `done` (pk's signal: it is performed after the CTA's reductions). The poller's
 * thread 0 spins on `done` until it reaches 128 and stamps that instant (the drain time is that
 * stamp minus the start); meanwhile the probe's thread 0 times dependent acquire loads of
 * another line. Variants (bytes per reduction,
 * reductions per task): u64 (8, 1024: pk's), v2.f32 (8, 1024), v4.f32 two outputs (16, 512),
 * f32 (4, 1024), v4.f32 four outputs (16, 256), none (the signal alone); then pk's u64 with task b
 * adding into copy b mod C of the accumulator (C = 2, 4, 8: the reader would sum the C copies, the
 * same integers in any order), and into twice the lines (outputs 16 bytes apart). Then the signal
 * itself: 128 release adds to one counter are adds to one address too. "none, C counters": no
 * reductions, task b signals counter b mod C (128 bytes apart, or 8 in one line), the poller waits
 * for their sum; "u64, 4 counters": pk's reductions with that signal. Then reads, as a layer's x
 * stage makes them right after its event: every task reads the same 2, 8 or 32 KB ("shared": the
 * next qkv's accumulator is 8 KB, four copies 32), or 8 / 32 KB of its own ("own"), 16-byte
 * `ld.global.cg` loads spread over the CTA's threads, summed, then the barrier: for these, "last
 * issued" is when the last task had its bytes. Medians over reps.
 *
 * What it found (H100, session 47, bench/results/2026-12-06-s47-h100.txt): pk's reductions drain
 * in ~3.0 us against ~1.4 for the signal alone; half the operations at the same bytes drain the
 * same, 4 copies in 1.8 (the cost is the adds to one address); more signal counters are slower;
 * on an idle GPU 128 SMs reading the same 32 KB take 1.25 us, no more than private bytes.
 */
#include "micro.cuh"

enum { TASKS = 128, NOUT = 1024, THREADS = 256, MAX_CTAS = 160, MAX_PROBES = 256, NVAR = 19, MAX_REPS = 1000 };
enum { ACC_BYTES = 4 << 20, FLAG_BYTES = 4096 }; /* the accumulator (and the reads' regions); the flags */
static const char *const variant_name[NVAR] = {"u64 (pk)",          "v2.f32",           "v4.f32 x2 outputs",
                                               "f32",               "v4.f32 x4 outputs", "none",
                                               "u64, 2 copies",     "u64, 4 copies",     "u64, 8 copies",
                                               "u64, 16 B apart",   "none, 2 counters",  "none, 4 counters",
                                               "none, 4 in a line", "u64, 4 counters",  "read 8 KB, shared",
                                               "read 32 KB, shared", "read 8 KB, own",  "read 32 KB, own",
                                               "read 2 KB, shared"};

struct red_result {
    unsigned long long start, drained; /* %globaltimer */
    unsigned long long issued[TASKS];  /* each task's last reduction issued (before its signal) */
    float probe_ns[MAX_PROBES];        /* the probe's load latencies while the reductions drain */
    int nprobe;
};

__device__ __forceinline__ void red_u64(unsigned long long *p, unsigned long long v) {
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_f32(float *p, float a) {
    asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(p), "f"(a) : "memory");
}
__device__ __forceinline__ void red_v2f32(float *p, float a, float b) {
    asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void red_v4f32(float *p, float a, float b, float c, float d) {
    asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d)
                 : "memory");
}

/* acc: 64 KB, zeroed by the host before each launch; flags: [0] start instant, the done counters
 * at [16 + 16 c] (128 bytes apart; [16 + c] for "in a line"), [256] the probe's line. */
__device__ __forceinline__ int sig_counters(int variant) {
    return variant == 10 ? 2 : variant >= 11 && variant <= 13 ? 4 : 1;
}
__device__ __forceinline__ int sig_stride(int variant) { return variant == 12 ? 1 : 16; }
__global__ void red_kernel(int variant, void *acc, unsigned long long *flags, red_result *r) {
    const int b = blockIdx.x, t = threadIdx.x;
    if (b == 0 && t == 0) {
        const unsigned long long s = now_ns() + 20000; /* every CTA is spinning by then */
        r->start = s;
        asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flags), "l"(s) : "memory");
    }
    extern __shared__ unsigned long long start_s[]; /* dynamic: launch_one_per_sm gives the block all of it */
    unsigned long long &start = start_s[0];
    if (t == 0) {
        unsigned long long s;
        while ((s = ld_acquire(flags)) == 0) {
        }
        start = s;
    }
    __syncthreads();
    while (now_ns() < start) {
    }
    if (b < TASKS) {
        /* partials as pk's would be: fixed-point values, or their digits as small integral floats */
        for (int j = t; j < NOUT; j += THREADS) {
            const long long v = (long long)(b * 7919 + j * 104729) * 4099 - (1ll << 40);
            const float d = (float)((b + j) % 131071 - 65535);
            switch (variant == 13 ? 0 : variant) {
            case 0: red_u64((unsigned long long *)acc + j, (unsigned long long)v); break;
            case 1: red_v2f32((float *)acc + 2 * j, d, -d); break;
            case 2:
                if (j % 2 == 0) red_v4f32((float *)acc + 2 * j, d, -d, d + 1, d - 1);
                break;
            case 3: red_f32((float *)acc + j, d); break;
            case 6: /* task b adds into copy b % C of the accumulator: C times the lines, 1/C of the adds each */
            case 7:
            case 8: {
                const int copies = 1 << (variant - 5);
                red_u64((unsigned long long *)acc + (b % copies) * NOUT + j, (unsigned long long)v);
                break;
            }
            case 9: red_u64((unsigned long long *)acc + 2 * j, (unsigned long long)v); break; /* twice the lines */
            case 4:
                if (j % 4 == 0) red_v4f32((float *)acc + j, d, -d, d + 1, d - 1);
                break;
            default: break;
            }
        }
        if (variant >= 14) { /* the reads: bytes per task, shared or each task's own region */
            const int kb = variant == 14 || variant == 16 ? 8 : variant == 18 ? 2 : 32;
            const uint4 *src = (const uint4 *)acc + (variant == 16 || variant == 17 ? (size_t)b * (32 << 10) / 16 : 0);
            uint4 a[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                a[i] = t + i * THREADS < kb * 64 ? __ldcg(src + t + i * THREADS) : make_uint4(0, 0, 0, 0);
            unsigned x = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) x += a[i].x ^ a[i].y ^ a[i].z ^ a[i].w;
            start_s[1 + t] = x; /* keeps the loads */
        }
        __syncthreads();
        if (t == 0) {
            r->issued[b] = now_ns_after(start_s[1]);
            red_release(flags + 16 + (b % sig_counters(variant)) * sig_stride(variant), 1);
        }
    } else if (b == TASKS + 1 && t == 0) {
        /* the poller: the counters' acquire loads (independent, issued together) until their sum
         * says every task signalled; stamps that instant and stops the probe */
        const int nc = sig_counters(variant), st = sig_stride(variant);
        unsigned long long seen = 0;
        while (seen < TASKS) {
            seen = 0;
            for (int c = 0; c < nc; c++) seen += ld_acquire(flags + 16 + c * st);
        }
        r->drained = now_ns_after(seen); /* after the loads that saw it */
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(flags + 272), "l"(1ull) : "memory");
    } else if (b == TASKS && t == 0) {
        /* the probe: dependent acquire loads of its own line, each timed, until the poller is done */
        const unsigned long long *line = flags + 256;
        int n = 0;
        unsigned long long prev = now_ns(), v = 0;
        while (ld_acquire(flags + 272) == 0) {
            v += ld_acquire(line + (v >> 63));
            const unsigned long long now = now_ns_after(v);
            if (n < MAX_PROBES) r->probe_ns[n++] = (float)(now - prev);
            prev = now_ns();
        }
        r->nprobe = n;
    }
}

static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp_double);
    return n ? v[n / 2] : 0;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 51;
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "reps: 1 .. %d\n", MAX_REPS);
        return 1;
    }
    const int n = sm_count_at_most(MAX_CTAS);
    if (n < TASKS + 2) {
        fprintf(stderr, "%d SMs: this benchmark needs %d (128 tasks, a probe and a poller)\n", n, TASKS + 2);
        return 1;
    }
    void *acc;
    unsigned long long *flags;
    red_result *r, h;
    CHECK(cudaMalloc(&acc, ACC_BYTES));
    CHECK(cudaMalloc(&flags, FLAG_BYTES));
    CHECK(cudaMalloc(&r, sizeof(red_result)));
    printf("%d SMs, %d tasks x %d outputs, %d launches each (interleaved); us from the common start, medians\n", n,
           TASKS, NOUT, reps);
    printf("%-20s %10s %12s %14s %14s\n", "variant", "drained", "last issued", "probe p50 ns", "probe max ns");
    static double all[NVAR][4][MAX_REPS]; /* per variant: drained, last issued, probe p50, probe max */
    for (int rep = 0; rep < reps; rep++)
        for (int v = 0; v < NVAR; v++) {
            CHECK(cudaMemset(acc, 0, ACC_BYTES));
            CHECK(cudaMemset(flags, 0, FLAG_BYTES));
            int var = v;
            void *args[] = {&var, &acc, &flags, &r};
            launch_one_per_sm((const void *)red_kernel, THREADS, args);
            CHECK(cudaMemcpy(&h, r, sizeof h, cudaMemcpyDeviceToHost));
            unsigned long long last = 0;
            for (int i = 0; i < TASKS; i++) last = h.issued[i] > last ? h.issued[i] : last;
            double pl[MAX_PROBES], mx = 0;
            for (int i = 0; i < h.nprobe; i++) mx = (pl[i] = h.probe_ns[i]) > mx ? pl[i] : mx;
            all[v][0][rep] = (h.drained - h.start) / 1e3;
            all[v][1][rep] = (double)(last - h.start) / 1e3;
            all[v][2][rep] = median(pl, h.nprobe);
            all[v][3][rep] = mx;
        }
    for (int v = 0; v < NVAR; v++)
        printf("%-20s %10.2f %12.2f %14.0f %14.0f\n", variant_name[v], median(all[v][0], reps), median(all[v][1], reps),
               median(all[v][2], reps), median(all[v][3], reps));
    return 0;
}
