/* attd_loop.cu — the staged decode attention's block loop alone (attention_decode.cuh's
 * pk_attd_warp_blocks_mmat / _mma), on one SM with nothing else running: how long the loop takes
 * by itself, cold (its first call in the launch: code fetched from L2 / DRAM) and warm.
 *
 * issue 5, session 34 (docs/PERF.md): inside the persistent kernel the loop takes ~2.5 us at
 * position 200 (-DPK_ATT_PROFILE), ~3,800 cycles for one block of 32 positions per warp (~50
 * tensor-core products, 24 ldmatrix, a softmax). Is that the code's own latency chain or what
 * the rest of the GPU does to it (instruction fetch, L2 queues)?
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -Isrc -Iinclude -o build/attd_loop bench/attd_loop.cu
 *   build/attd_loop [-r ROUNDS] [-n] [P ...]   (default P: 32 64 128 201 256; -n: no stamped run)
 *
 * One CTA of 256 threads, the layout of pk_attd_layout_of (D 128, G 2: the Qwen3-0.6B / 1.7B
 * shape), random bf16 K / V / q. Per P and loop kind, REPS calls in one launch, each between two
 * barriers, thread 0's %globaltimer and clock64 around it: the first call (cold) and the median of
 * the rest (warm), and the warm call's cycles per warp (each warp's lane 0 around its own call).
 * "fold": pk_attd_fold (the 8 warps' sums into the bf16 output) timed alone after a loop, its
 * output checked against the same fold in double (session 35: ~700 cycles, 0.35 us, at P 201).
 */
#include "micro.cuh"
enum { NSTAMP = 8 };
/* The loop's phase stamps (attention_decode.cuh PK_ATTD_LOOP_STAMP), lane 0 of each warp, its first
 * block only (stamp 0 starts it): 1 K fragments loaded, 2 scores, 3 block max and alpha, 4 P^T's B
 * fragments, 5 V fragments (first 16 positions), 6 P · V done, 7 the sums stored. KIND 2 runs with
 * them on, writing into attd_st [warp][NSTAMP] as cycles after stamp 0. */
__device__ long long *attd_st;
__device__ bool attd_stamping;
__device__ __forceinline__ void attd_stamp(int i, uint32_t v) {
    const long long t = clock_after(v);
    if (attd_stamping && threadIdx.x % 32 == 0) {
        long long *st = attd_st + (threadIdx.x / 32) * NSTAMP;
        if (i == 0) st[0] = t;
        else if (st[i] == 0) st[i] = t - st[0];
    }
}
#define PK_ATTD_LOOP_STAMP(i, v) attd_stamp(i, v)
#include "kernels/cuda/attention_decode.cuh"

#include <math.h>
#include <string.h>

enum { D = 128, G = 2, REPS = 16 };

template <int KIND>
__global__ void loop_kernel(int P, uint64_t *ns, uint64_t *cyc, uint64_t *warp_cyc, float *out, long long *st,
                            pk_bf16 *fold_out) {
    extern __shared__ __align__(128) char smem[];
    const pk_attd_layout L = pk_attd_layout_of(D, G, P);
    pk_bf16 *q_b = (pk_bf16 *)(smem + L.q), *K_s = (pk_bf16 *)(smem + L.k), *V_s = (pk_bf16 *)(smem + L.v);
    float *red = (float *)(smem + L.red), *red_m = (float *)(smem + L.red_m), *red_l = (float *)(smem + L.red_l);
    /* deterministic pseudo-random values in [-1, 1) (K scaled so the scores spread) */
    for (int i = threadIdx.x; i < L.Pr * (D + 8); i += blockDim.x) {
        const uint32_t h = (uint32_t)i * 2654435761u;
        K_s[i] = __bfloat16_as_ushort(__float2bfloat16(((float)((h >> 8) & 1023) / 512.0f - 1.0f) * 2.0f));
        V_s[i] = __bfloat16_as_ushort(__float2bfloat16((float)((h >> 18) & 1023) / 512.0f - 1.0f));
    }
    for (int i = threadIdx.x; i < G * (D + 8); i += blockDim.x)
        q_b[i] = __bfloat16_as_ushort(__float2bfloat16((float)(((uint32_t)i * 40503u >> 4) & 1023) / 512.0f - 1.0f));
    __syncthreads();
    for (int r = 0; r < REPS; r++) {
        if (KIND == 2 && threadIdx.x == 0) { /* the last call's stamps */
            attd_st = st;
            attd_stamping = r == REPS - 1;
        }
        if (KIND == 2 && threadIdx.x < PK_DEV_WARPS * NSTAMP) st[threadIdx.x] = 0;
        if (KIND == 3) { /* the fold timed alone, after the loop */
            pk_attd_warp_blocks_mmat<2>(G, P, q_b, K_s, V_s, red, red_m, red_l);
        }
        __syncthreads();
        const uint64_t t0 = now_ns();
        const long long c0 = clock64();
        if (KIND == 3)
            pk_attd_fold(G, D, red, red_m, red_l, fold_out, nullptr);
        else if (KIND == 0 || KIND == 2)
            pk_attd_warp_blocks_mmat<2>(G, P, q_b, K_s, V_s, red, red_m, red_l);
        else
            pk_attd_warp_blocks_mma<2>(G, P, q_b, K_s, V_s, red, red_m, red_l);
        const long long c1w = clock64();
        __syncthreads();
        const long long c1 = clock64();
        const uint64_t t1 = now_ns();
        if (threadIdx.x == 0) {
            ns[r] = t1 - t0;
            cyc[r] = (uint64_t)(c1 - c0);
        }
        if (threadIdx.x % 32 == 0) warp_cyc[r * PK_DEV_WARPS + threadIdx.x / 32] = (uint64_t)(c1w - c0);
    }
    /* the last call's per-warp sums (acc [8][G][D], then m [8][G], l [8][G]) for the host's check */
    for (int i = threadIdx.x; i < PK_DEV_WARPS * G * D; i += blockDim.x) out[i] = red[i];
    for (int i = threadIdx.x; i < PK_DEV_WARPS * G; i += blockDim.x) {
        out[PK_DEV_WARPS * G * D + i] = red_m[i];
        out[PK_DEV_WARPS * G * (D + 1) + i] = red_l[i];
    }
}

/* The inputs as the kernel makes them, rounded to bf16, as floats. */
static float k_val(int i) {
    const uint32_t h = (uint32_t)i * 2654435761u;
    return __bfloat162float(__float2bfloat16(((float)((h >> 8) & 1023) / 512.0f - 1.0f) * 2.0f));
}
static float v_val(int i) {
    const uint32_t h = (uint32_t)i * 2654435761u;
    return __bfloat162float(__float2bfloat16((float)((h >> 18) & 1023) / 512.0f - 1.0f));
}
static float q_val(int i) {
    return __bfloat162float(__float2bfloat16((float)(((uint32_t)i * 40503u >> 4) & 1023) / 512.0f - 1.0f));
}
/* Each warp's normalised output (acc / l) against the softmax over its positions in double: the
 * largest error relative to the output's largest magnitude, or of m (the block maximum in base e). */
static double check(int P, const float *out) {
    const float *red = out, *rm = out + PK_DEV_WARPS * G * D, *rl = out + PK_DEV_WARPS * G * (D + 1);
    double worst = 0.0;
    for (int w = 0; w < PK_DEV_WARPS; w++)
        for (int g = 0; g < G; g++) {
            double sc[32], mx = -1e300, sum = 0.0, ref[D] = {0}, big = 0.0, err = 0.0;
            int n = 0;
            for (int jb = 32 * w; jb < P; jb += 32 * PK_DEV_WARPS)
                for (int j = jb; j < jb + 32 && j < P; j++) {
                    double s = 0.0;
                    for (int d = 0; d < D; d++) s += (double)q_val(g * (D + 8) + d) * k_val(j * (D + 8) + d);
                    sc[n] = s / sqrt((double)D);
                    mx = sc[n] > mx ? sc[n] : mx;
                    n++;
                }
            if (!n) continue;
            n = 0;
            for (int jb = 32 * w; jb < P; jb += 32 * PK_DEV_WARPS)
                for (int j = jb; j < jb + 32 && j < P; j++) {
                    const double e = exp(sc[n++] - mx);
                    sum += e;
                    for (int d = 0; d < D; d++) ref[d] += e * v_val(j * (D + 8) + d);
                }
            for (int d = 0; d < D; d++) {
                const double r = ref[d] / sum, x = red[(w * G + g) * D + d] / rl[w * G + g];
                big = fabs(r) > big ? fabs(r) : big;
                err = fabs(r - x) > err ? fabs(r - x) : err;
            }
            double rel = err / (big > 0 ? big : 1.0);
            const double m_err = fabs(rm[w * G + g] - mx) / (fabs(mx) > 1.0 ? fabs(mx) : 1.0); /* m: the fold's base e */
            rel = m_err > rel ? m_err : rel;
            worst = rel > worst ? rel : worst;
        }
    return worst;
}

template <int KIND>
static void run(int P) {
    const pk_attd_layout L = pk_attd_layout_of(D, G, P);
    uint64_t *ns, *cyc, *wc;
    float *out;
    long long *st;
    CHECK(cudaMalloc(&st, PK_DEV_WARPS * NSTAMP * 8));
    CHECK(cudaMalloc(&ns, REPS * 8));
    CHECK(cudaMalloc(&cyc, REPS * 8));
    CHECK(cudaMalloc(&wc, REPS * PK_DEV_WARPS * 8));
    CHECK(cudaMalloc(&out, PK_DEV_WARPS * G * (D + 2) * 4));
    pk_bf16 *fold_out;
    CHECK(cudaMalloc(&fold_out, G * D * 2));
    CHECK(cudaFuncSetAttribute(loop_kernel<KIND>, cudaFuncAttributeMaxDynamicSharedMemorySize, L.end));
    loop_kernel<KIND><<<1, PK_CUDA_THREADS, L.end>>>(P, ns, cyc, wc, out, st, fold_out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    uint64_t h_ns[REPS], h_cyc[REPS], h_wc[REPS * PK_DEV_WARPS];
    CHECK(cudaMemcpy(h_ns, ns, sizeof h_ns, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_cyc, cyc, sizeof h_cyc, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_wc, wc, sizeof h_wc, cudaMemcpyDeviceToHost));
    static float h_out[PK_DEV_WARPS * G * (D + 2)];
    CHECK(cudaMemcpy(h_out, out, sizeof h_out, cudaMemcpyDeviceToHost));
    const double err = check(P, h_out);
    const uint64_t cold_ns = h_ns[0], cold_cyc = h_cyc[0];
    uint64_t w_ns[REPS - 1], w_cyc[REPS - 1];
    memcpy(w_ns, h_ns + 1, sizeof w_ns);
    memcpy(w_cyc, h_cyc + 1, sizeof w_cyc);
    qsort(w_ns, REPS - 1, 8, cmp_u64);
    qsort(w_cyc, REPS - 1, 8, cmp_u64);
    printf("%-6s P %3d: cold %6.3f us %6llu cycles, warm median %6.3f us %6llu cycles; warps (last call):",
           KIND == 0 ? "mmat" : KIND == 2 ? "stamps" : KIND == 3 ? "fold" : "mma", P, cold_ns / 1e3, (unsigned long long)cold_cyc, w_ns[(REPS - 1) / 2] / 1e3,
           (unsigned long long)w_cyc[(REPS - 1) / 2]);
    for (int w = 0; w < PK_DEV_WARPS; w++) printf(" %llu", (unsigned long long)h_wc[(REPS - 1) * PK_DEV_WARPS + w]);
    printf("; max error %.2e", err);
    if (KIND == 3) { /* the folded output against the fold of the same sums in double */
        pk_bf16 h_fold[G * D];
        CHECK(cudaMemcpy(h_fold, fold_out, sizeof h_fold, cudaMemcpyDeviceToHost));
        const float *red = h_out, *rm = h_out + PK_DEV_WARPS * G * D, *rl = h_out + PK_DEV_WARPS * G * (D + 1);
        double ferr = 0.0;
        for (int i = 0; i < G * D; i++) {
            const int h = i / D;
            double M = -INFINITY, num = 0.0, den = 0.0;
            for (int w = 0; w < PK_DEV_WARPS; w++) M = rm[w * G + h] > M ? rm[w * G + h] : M;
            for (int w = 0; w < PK_DEV_WARPS; w++) {
                if (rm[w * G + h] == -INFINITY) continue;
                const double f = exp(rm[w * G + h] - M);
                num += f * red[w * G * D + i];
                den += f * rl[w * G + h];
            }
            const double r = num / den, e = fabs(r - (double)__bfloat162float(*(__nv_bfloat16 *)&h_fold[i]));
            ferr = e > ferr ? e : ferr;
        }
        printf("; fold max |error| %.2e", ferr);
    }
    printf("\n");
    if (KIND == 2) { /* the last call's stamps, cycles after the warp's start */
        long long h_st[PK_DEV_WARPS * NSTAMP];
        CHECK(cudaMemcpy(h_st, st, sizeof h_st, cudaMemcpyDeviceToHost));
        for (int w = 0; w < PK_DEV_WARPS; w++) {
            if (!h_st[w * NSTAMP + 1]) continue; /* no block */
            printf("  warp %d: kfrag score alpha P^T vfrag P.V store:", w);
            for (int i = 1; i < NSTAMP; i++) printf(" %lld", h_st[w * NSTAMP + i]);
            printf("\n");
        }
    }
    CHECK(cudaFree(st));
    CHECK(cudaFree(ns));
    CHECK(cudaFree(cyc));
    CHECK(cudaFree(wc));
    CHECK(cudaFree(out));
    CHECK(cudaFree(fold_out));
}

int main(int argc, char **argv) {
    int Ps[16], n = 0, rounds = 1, stamps = 1;
    for (int i = 1; i < argc && n < 16; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n"))
            stamps = 0;
        else
            Ps[n++] = atoi(argv[i]);
    }
    if (!n) {
        const int def[] = {32, 64, 128, 201, 256};
        for (int P : def) Ps[n++] = P;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs; D %d, G %d, %d threads, %d calls per launch; PK_ATTD_PT_MOV %d, PK_ATTD_EXP2 %d, "
           "PK_ATTD_SCORE_SPLIT %d\n",
           prop.name, prop.multiProcessorCount, D, G, PK_CUDA_THREADS, REPS, PK_ATTD_PT_MOV, PK_ATTD_EXP2,
           PK_ATTD_SCORE_SPLIT);
    for (int i = 0; i < n; i++) {
        if (Ps[i] < 1 || Ps[i] > 320) {
            fprintf(stderr, "P %d: 1 .. 320\n", Ps[i]);
            return 1;
        }
        for (int round = 0; round < rounds; round++) { /* interleaved: the clocks ramp between launches */
            run<0>(Ps[i]);
            run<1>(Ps[i]);
            run<3>(Ps[i]);
        }
        if (stamps) run<2>(Ps[i]);
    }
    return 0;
}
