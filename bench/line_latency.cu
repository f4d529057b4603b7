/* line_latency.cu — how far each SM is from each line of an event-counter array: the latency of a
 * gpu-scope acquire load (pk's poll, sync.cuh) from every SM to each of N 128-byte lines.
 *
 * issue 5, session 26 (docs/PERF.md): the workers that see a GEMV layer's event late are the same
 * SMs every step, and they follow the chip's halves (clock_skew.cu: the SMs' clocks agree, so the
 * trace's offsets are real). If an L2 line's place decides which half reads it fast, a counter
 * per half (each signal a second `red`, each SM polling its half's copy) would take that off every
 * hand-off. This measures the premise: per line, every SM's load latency; whether the SMs split
 * into a near and a far group by line, and whether the groups are the same two halves for every
 * line (then a pair of lines, one near each half, exists).
 *
 *   nvcc -O3 -arch=sm_90a -o build/line_latency bench/line_latency.cu && build/line_latency [lines [stride]]
 *
 * One CTA per SM (cooperative launch), thread 0 of each walks the lines in its own order (CTA b
 * starts at line b mod N, so no two SMs load the same line at once), for each: 8 loads to warm
 * the path, then 32 dependent loads timed with %globaltimer; ns per load. Prints per line the
 * fastest / median / slowest SM, the largest gap in the sorted latencies and the group sizes on
 * either side of it, how many distinct near groups the lines have (the first four's SMs), and each
 * SM's mean over the lines.
 */
#include "micro.cuh"
#include <string.h>

enum { MAX_CTAS = 160, MAX_LINES = 256, REPS = 32 };

__global__ void line_kernel(const unsigned long long *buf, int nlines, int stride8, float *lat, unsigned *smid) {
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x;
    smid[b] = sm_id();
    for (int k = 0; k < nlines; k++) {
        const int j = (k + b) % nlines;
        const unsigned long long *p = buf + (size_t)j * stride8;
        unsigned long long v = 0;
        for (int r = 0; r < 8; r++) v += ld_acquire(p + (v >> 63));
        const unsigned long long t0 = now_ns_after(v);
        for (int r = 0; r < REPS; r++) v += ld_acquire(p + (v >> 63)); /* each address depends on the load before */
        const unsigned long long t1 = now_ns_after(v); /* after the last load returned */
        lat[b * nlines + j] = (float)(t1 - t0) / REPS;
    }
}

int main(int argc, char **argv) {
    const int nlines = argc > 1 ? atoi(argv[1]) : 64;
    const int stride = argc > 2 ? atoi(argv[2]) : 128; /* bytes between the lines */
    if (nlines < 1 || nlines > MAX_LINES || stride < 8 || stride % 8) {
        fprintf(stderr, "lines 1 .. %d, stride a multiple of 8\n", MAX_LINES);
        return 1;
    }
    const int n = sm_count_at_most(MAX_CTAS); /* launch_one_per_sm's CTAs */
    unsigned long long *buf;
    float *lat;
    unsigned *smid;
    CHECK(cudaMalloc(&buf, (size_t)nlines * stride));
    CHECK(cudaMemset(buf, 0, (size_t)nlines * stride));
    CHECK(cudaMalloc(&lat, 4 * (size_t)n * nlines));
    CHECK(cudaMalloc(&smid, 4 * n));
    int stride8 = stride / 8, nl = nlines;
    void *args[] = {&buf, &nl, &stride8, &lat, &smid};
    launch_one_per_sm((const void *)line_kernel, 32, args);
    float *h = (float *)malloc(4 * (size_t)n * nlines);
    double col[MAX_CTAS];
    unsigned hsm[MAX_CTAS];
    CHECK(cudaMemcpy(h, lat, 4 * (size_t)n * nlines, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hsm, smid, 4 * n, cudaMemcpyDeviceToHost));
    /* near groups as bitmasks over the CTAs (up to 160: three 64-bit words) */
    unsigned long long masks[MAX_LINES][3];
    int nmask = 0;
    printf("%5s %7s %7s %7s %7s %5s %5s  (ns per load; %d SMs, lines %d B apart)\n", "line", "fastest", "median",
           "slowest", "gap", "near", "far", n, stride);
    for (int j = 0; j < nlines; j++) {
        for (int b = 0; b < n; b++) col[b] = h[b * nlines + j];
        double s[MAX_CTAS];
        memcpy(s, col, sizeof(double) * n);
        qsort(s, n, sizeof(double), cmp_double);
        int cut = 1;
        for (int i = 1; i < n; i++)
            if (s[i] - s[i - 1] > s[cut] - s[cut - 1]) cut = i;
        const double thr = (s[cut] + s[cut - 1]) / 2;
        unsigned long long m[3] = {0, 0, 0};
        for (int b = 0; b < n; b++)
            if (col[b] < thr) m[b / 64] |= 1ull << (b % 64);
        int seen = 0;
        for (int q = 0; q < nmask && !seen; q++) seen = !memcmp(masks[q], m, sizeof m);
        if (!seen) memcpy(masks[nmask++], m, sizeof m);
        printf("%5d %7.0f %7.0f %7.0f %7.0f %5d %5d\n", j, s[0], s[n / 2], s[n - 1], s[cut] - s[cut - 1], cut, n - cut);
    }
    printf("distinct near groups over the %d lines: %d\n", nlines, nmask);
    for (int q = 0; q < nmask && q < 4; q++) { /* the first groups' SMs */
        printf("near group %d, SMs:", q);
        for (int b = 0; b < n; b++)
            if (masks[q][b / 64] >> (b % 64) & 1) printf(" %u", hsm[b]);
        printf("\n");
    }
    printf("per CTA (SM): mean ns over the lines\n");
    for (int b = 0; b < n; b++) {
        float sum = 0;
        for (int j = 0; j < nlines; j++) sum += h[b * nlines + j];
        printf("%d(%u) %.0f%c", b, hsm[b], sum / nlines, b % 8 == 7 ? '\n' : ' ');
    }
    printf("\n");
    free(h);
    return 0;
}
