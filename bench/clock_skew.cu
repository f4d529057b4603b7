/* clock_skew.cu — whether %globaltimer reads the same on every SM: pk's traces time every task
 * with it on the SM that runs the task, and their per-worker start offsets (the layers' "skew")
 * are only real if the SMs' clocks agree.
 *
 * issue 5, session 26 (docs/PERF.md): in the Qwen3-0.6B / 1.7B traces the workers that see a GEMV
 * layer's event late are the same ones in every step (bench/trace_balance.py --starts: the
 * per-worker mean start offsets of the two halves of the run correlate at 1.00), often both CTAs
 * of a pair (2k, 2k + 1), with a spread of ~0.8 us between the 10th and 90th percentile. Either
 * those SMs see the event late (a place in the chip farther from the event's L2 line), or their
 * clocks read late. This separates the two with the two-way exchange NTP uses: CTA 0 and CTA i
 * (one at a time, every other CTA idle) exchange a ping and a pong through global memory R
 * times; with t0 = CTA 0's clock at the ping, t1 = CTA i's when it sees it and answers, t3 = CTA
 * 0's when it sees the pong, CTA i's clock offset is t1 - t0 - (t3 - t0) / 2 (a symmetric path)
 * and the one-way latency (t3 - t0) / 2. Also the clock's step: the smallest nonzero difference of
 * two consecutive reads.
 *
 *   nvcc -O3 -arch=sm_90a -o build/clock_skew bench/clock_skew.cu && build/clock_skew [rounds]
 *
 * Prints per CTA its SM, the median offset and one-way latency (ns), then the spread of the
 * offsets over the SMs.
 */
#include "micro.cuh"
#include <string.h>

enum { MAX_CTAS = 160, MAX_ROUNDS = 64 };

__device__ __forceinline__ void st_release(unsigned long long *p, unsigned long long v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* ping[i] / pong[i]: CTA i's exchange words (round r + 1 when set); rec[(i * rounds + r) * 3 + k]:
 * t0, t1, t3; smid[i]; step[i]: the clock's smallest nonzero step seen by CTA i. */
__global__ void clock_kernel(unsigned long long *ping, unsigned long long *pong, unsigned long long *rec,
                             unsigned *smid, unsigned long long *step, int rounds) {
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x, n = gridDim.x;
    smid[b] = sm_id();
    unsigned long long best = ~0ull, prev = now_ns();
    for (int k = 0; k < 2000; k++) {
        const unsigned long long t = now_ns();
        if (t != prev && t - prev < best) best = t - prev;
        prev = t;
    }
    step[b] = best;
    if (b == 0) {
        for (int i = 1; i < n; i++)
            for (int r = 0; r < rounds; r++) {
                const unsigned long long t0 = now_ns();
                st_release(ping + i, (unsigned long long)r + 1);
                while (ld_acquire(pong + i) != (unsigned long long)r + 1) {
                }
                const unsigned long long t3 = now_ns();
                rec[((size_t)i * rounds + r) * 3 + 0] = t0;
                rec[((size_t)i * rounds + r) * 3 + 2] = t3;
            }
    } else {
        for (int r = 0; r < rounds; r++) {
            while (ld_acquire(ping + b) != (unsigned long long)r + 1) {
            }
            const unsigned long long t1 = now_ns();
            st_release(pong + b, (unsigned long long)r + 1);
            rec[((size_t)b * rounds + r) * 3 + 1] = t1;
        }
    }
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 32;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "rounds: 1 .. %d\n", MAX_ROUNDS);
        return 1;
    }
    const int n = sm_count_at_most(MAX_CTAS); /* launch_one_per_sm's CTAs */
    unsigned long long *ping, *pong, *rec, *step;
    unsigned *smid;
    CHECK(cudaMalloc(&ping, 8 * n));
    CHECK(cudaMalloc(&pong, 8 * n));
    CHECK(cudaMalloc(&rec, 24 * (size_t)n * rounds));
    CHECK(cudaMalloc(&smid, 4 * n));
    CHECK(cudaMalloc(&step, 8 * n));
    CHECK(cudaMemset(ping, 0, 8 * n));
    CHECK(cudaMemset(pong, 0, 8 * n));
    void *args[] = {&ping, &pong, &rec, &smid, &step, (void *)&rounds};
    launch_one_per_sm((const void *)clock_kernel, 32, args);
    unsigned long long *h = (unsigned long long *)malloc(24 * (size_t)n * rounds), hstep[MAX_CTAS];
    unsigned hsm[MAX_CTAS];
    CHECK(cudaMemcpy(h, rec, 24 * (size_t)n * rounds, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hsm, smid, 4 * n, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hstep, step, 8 * n, cudaMemcpyDeviceToHost));
    double off[MAX_CTAS], lat[MAX_CTAS], tmp[MAX_ROUNDS], tmp2[MAX_ROUNDS];
    printf("CTA 0 on SM %u, clock step %llu ns\n", hsm[0], hstep[0]);
    printf("%4s %4s %10s %10s %6s\n", "CTA", "SM", "offset ns", "one-way ns", "step");
    for (int i = 1; i < n; i++) {
        for (int r = 0; r < rounds; r++) {
            const unsigned long long *e = h + ((size_t)i * rounds + r) * 3;
            const double half = ((double)e[2] - (double)e[0]) / 2;
            tmp[r] = (double)e[1] - (double)e[0] - half;
            tmp2[r] = half;
        }
        qsort(tmp, rounds, sizeof(double), cmp_double);
        qsort(tmp2, rounds, sizeof(double), cmp_double);
        off[i] = tmp[rounds / 2];
        lat[i] = tmp2[rounds / 2];
        printf("%4d %4u %10.0f %10.0f %6llu\n", i, hsm[i], off[i], lat[i], hstep[i]);
    }
    double o[MAX_CTAS], l[MAX_CTAS];
    memcpy(o, off + 1, sizeof(double) * (n - 1));
    memcpy(l, lat + 1, sizeof(double) * (n - 1));
    qsort(o, n - 1, sizeof(double), cmp_double);
    qsort(l, n - 1, sizeof(double), cmp_double);
    const int m = n - 1;
    printf("offsets over %d SMs (ns, against SM %u): min %.0f p10 %.0f median %.0f p90 %.0f max %.0f\n", m, hsm[0], o[0],
           o[m / 10], o[m / 2], o[m * 9 / 10], o[m - 1]);
    printf("one-way latency (ns): min %.0f p10 %.0f median %.0f p90 %.0f max %.0f\n", l[0], l[m / 10], l[m / 2],
           l[m * 9 / 10], l[m - 1]);
    free(h);
    return 0;
}
