// SPDX-License-Identifier: Apache-2.0
// Experiment (session 60): a multi-row GEMM tile loop on TMA + mbarriers + unserialized wgmma,
// 64-wide K slices in 128-byte swizzle, 2 consumer warpgroups (64 rows each), thread 0 issues the
// copies (no producer warp: the persistent kernel's CTA is 256 threads). PLAIN: out = x · W^T.
// RMS 1: x's slice rmsnorm-transformed in shared memory by its warpgroup (scale per row, norm_w).
// Times bench_mma's chunk shapes; checks sampled outputs against the host.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "wg_gen.cuh"

typedef uint16_t bf16;
#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(uint64_t *b, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n)); }
__device__ __forceinline__ void mb_expect(uint64_t *b, uint32_t tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory"); }
__device__ __forceinline__ void mb_wait(uint64_t *b, uint32_t parity) {
    asm volatile("{\n.reg .pred P;\nW: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@!P bra W;\n}\n" ::"r"(sa(b)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void tma2d(void *dst, const CUtensorMap *m, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(sa(dst)),
                 "l"(m), "r"(c0), "r"(c1), "r"(sa(bar))
                 : "memory");
}
__device__ __forceinline__ uint64_t desc128(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
__device__ __forceinline__ float bf2f(bf16 h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ bf16 f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

template <int BN> struct wgsel;
template <> struct wgsel<128> { static __device__ __forceinline__ void run(float (&d)[64], uint64_t a, uint64_t b) { wg_m64n128k16(d, a, b); } };
template <> struct wgsel<256> { static __device__ __forceinline__ void run(float (&d)[128], uint64_t a, uint64_t b) { wg_m64n256k16(d, a, b); } };

template <int BN, int S, int RMS>
__global__ void __launch_bounds__(256, 1)
    k_tma(const CUtensorMap *tmA, const CUtensorMap *tmB, int n_tok, int K, int N, bf16 *out, const bf16 *x, const bf16 *nw) {
    extern __shared__ char smem_raw[];
    constexpr int ABYTES = 128 * 128, BBYTES = BN * 128, STAGE = ABYTES + BBYTES;
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(base + S * STAGE), *empty = full + S;
    float *scale_s = (float *)(empty + S); /* [128] */
    const int tid = threadIdx.x, wg = tid / 128, warp = tid / 32 % 4, lane = tid % 32;
    const int nrb = (n_tok + 127) / 128, cbs = N / BN, ntiles = nrb * cbs, G = gridDim.x;
    const int lo = (int)((int64_t)blockIdx.x * ntiles / G), hi = (int)((int64_t)(blockIdx.x + 1) * ntiles / G);
    const int ns = K / 64, T = (hi - lo) * ns;
    if (tid == 0) {
        for (int s = 0; s < S; s++) { mb_init(&full[s], 1); mb_init(&empty[s], 2); }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    auto produce = [&](int q) {
        const int slot = q % S, id = lo + q / ns, k = q % ns;
        if (q >= S) mb_wait(&empty[slot], ((q / S) - 1) & 1);
        char *st = base + slot * STAGE;
        mb_expect(&full[slot], STAGE);
        tma2d(st, tmA, k * 64, id / cbs * 128, &full[slot]);
        tma2d(st + ABYTES, tmB, k * 64, id % cbs * BN, &full[slot]);
    };
    if (tid == 0)
        for (int q = 0; q < S - 1 && q < T; q++) produce(q);
    float acc[BN / 2];
    int scaled = -1;
    for (int q = 0; q < T; q++) {
        const int slot = q % S, id = lo + q / ns, k = q % ns, row0 = id / cbs * 128;
        if (k == 0) {
#pragma unroll
            for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
            if (RMS && row0 != scaled) { /* the warpgroup's 64 rows' scales: a warp per row */
                asm volatile("bar.sync %0, 128;" ::"r"(1 + wg));
                for (int r = warp; r < 64; r += 4) {
                    const int t = row0 + 64 * wg + r;
                    float s = 0.0f;
                    if (t < n_tok)
                        for (int c = lane * 8; c < K; c += 256) {
                            uint4 v = *(const uint4 *)(x + (int64_t)t * K + c);
                            const bf16 *e = (const bf16 *)&v;
#pragma unroll
                            for (int i = 0; i < 8; i++) s = fmaf(bf2f(e[i]), bf2f(e[i]), s);
                        }
#pragma unroll
                    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                    if (lane == 0) scale_s[64 * wg + r] = 1.0f / sqrtf(s / (float)K + 1e-6f);
                }
                asm volatile("bar.sync %0, 128;" ::"r"(1 + wg));
                scaled = row0;
            }
        }
        mb_wait(&full[slot], (q / S) & 1);
        char *st = base + slot * STAGE;
        if (RMS) { /* this warpgroup's 64 rows x 64 columns: 4 chunks of 8 a thread */
            const int tl = tid % 128;
            uint4 g[1];
            (void)g;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int e = tl + 128 * i, r = 64 * wg + e / 8, c = e % 8; /* logical chunk c of row r */
                uint4 *p = (uint4 *)(st + r * 128 + ((c ^ (r & 7)) << 4));
                uint4 v = *p;
                const uint4 gv = *(const uint4 *)(nw + k * 64 + c * 8);
                bf16 *ev = (bf16 *)&v;
                const bf16 *eg = (const bf16 *)&gv;
                const float sc = scale_s[r];
#pragma unroll
                for (int j = 0; j < 8; j++) ev[j] = f2bf(bf2f(f2bf(bf2f(ev[j]) * sc)) * bf2f(eg[j]));
                *p = v;
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("bar.sync %0, 128;" ::"r"(1 + wg));
        }
        const uint32_t a0 = sa(st) + wg * 64 * 128, b0 = sa(st + ABYTES);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wgsel<BN>::run(acc, desc128(a0 + 32 * kk), desc128(b0 + 32 * kk));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (q >= 1 && tid % 128 == 0) mb_arrive(&empty[(q - 1) % S]);
        if (tid == 0 && q + S - 1 < T) produce(q + S - 1);
        if (k == ns - 1) {
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            const int col0 = id % cbs * BN;
#pragma unroll
            for (int i = 0; i < BN / 8; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int t = row0 + 64 * wg + 16 * warp + lane / 4 + 8 * h, j = col0 + 8 * i + 2 * (lane % 4);
                    if (t < n_tok) {
                        const uint32_t v = (uint32_t)f2bf(acc[4 * i + 2 * h]) | ((uint32_t)f2bf(acc[4 * i + 2 * h + 1]) << 16);
                        *(uint32_t *)(out + (int64_t)t * N + j) = v;
                    }
                }
        }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}


/* The same tiles with cp.async by every thread (no TMA, no mbarrier): per slice wait for the
 * thread's copies, transform them (RMS), fence, CTA barrier, issue slice q + S - 2 into slice
 * q - 2's slot, the product, wait<1>. */
template <int BN, int S, int RMS>
__global__ void __launch_bounds__(256, 1)
    k_cpa(int n_tok, int K, int N, bf16 *out, const bf16 *x, const bf16 *w, const bf16 *nw) {
    extern __shared__ char smem_raw[];
    constexpr int ABYTES = 128 * 128, BBYTES = BN * 128, STAGE = ABYTES + BBYTES;
    constexpr int CH = (128 + BN) * 8 / 256; /* 16-byte chunks a thread copies per slice */
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    float *scale_s = (float *)(base + S * STAGE); /* [128] */
    const int tid = threadIdx.x, wg = tid / 128, warp = tid / 32 % 4, lane = tid % 32;
    const int nrb = (n_tok + 127) / 128, cbs = N / BN, ntiles = nrb * cbs, G = gridDim.x;
    const int lo = (int)((int64_t)blockIdx.x * ntiles / G), hi = (int)((int64_t)(blockIdx.x + 1) * ntiles / G);
    const int ns = K / 64, T = (hi - lo) * ns;
    auto issue = [&](int q) {
        if (q < T) {
            const int slot = q % S, id = lo + q / ns, k = q % ns;
            char *st = base + slot * STAGE;
#pragma unroll
            for (int i = 0; i < CH; i++) {
                const int e = tid + 256 * i, r = e / 8, c = e % 8; /* rows 0..127: A, then B */
                const bf16 *src;
                uint32_t dst;
                if (r < 128) {
                    const int t = id / cbs * 128 + r;
                    src = x + (int64_t)(t < n_tok ? t : n_tok - 1) * K + k * 64 + c * 8;
                    dst = sa(st + r * 128 + ((c ^ (r & 7)) << 4));
                } else {
                    const int rb = r - 128;
                    src = w + (int64_t)(id % cbs * BN + rb) * K + k * 64 + c * 8;
                    dst = sa(st + ABYTES + rb * 128 + ((c ^ (rb & 7)) << 4));
                }
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (int q = 0; q < S - 2; q++) issue(q);
    float acc[BN / 2];
    int scaled = -1;
    for (int q = 0; q < T; q++) {
        const int slot = q % S, id = lo + q / ns, k = q % ns, row0 = id / cbs * 128;
        if (k == 0) {
#pragma unroll
            for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
            if (RMS && row0 != scaled) {
                __syncthreads();
                for (int r = tid / 32; r < 128; r += 8) {
                    const int t = row0 + r;
                    float s = 0.0f;
                    if (t < n_tok)
                        for (int c = lane * 8; c < K; c += 256) {
                            uint4 v = *(const uint4 *)(x + (int64_t)t * K + c);
                            const bf16 *e = (const bf16 *)&v;
#pragma unroll
                            for (int i = 0; i < 8; i++) s = fmaf(bf2f(e[i]), bf2f(e[i]), s);
                        }
#pragma unroll
                    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                    if (lane == 0) scale_s[r] = 1.0f / sqrtf(s / (float)K + 1e-6f);
                }
                __syncthreads();
                scaled = row0;
            }
        }
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 3) : "memory");
        char *st = base + slot * STAGE;
        if (RMS) { /* the thread's own A chunks */
#pragma unroll
            for (int i = 0; i < CH; i++) {
                const int e = tid + 256 * i, r = e / 8, c = e % 8;
                if (r >= 128) continue;
                uint4 *p = (uint4 *)(st + r * 128 + ((c ^ (r & 7)) << 4));
                uint4 v = *p;
                const uint4 gv = *(const uint4 *)(nw + k * 64 + c * 8);
                bf16 *ev = (bf16 *)&v;
                const bf16 *eg = (const bf16 *)&gv;
                const float sc = scale_s[r];
#pragma unroll
                for (int j = 0; j < 8; j++) ev[j] = f2bf(bf2f(f2bf(bf2f(ev[j]) * sc)) * bf2f(eg[j]));
                *p = v;
            }
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        issue(q + S - 2);
        const uint32_t a0 = sa(st) + wg * 64 * 128, b0 = sa(st + ABYTES);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wgsel<BN>::run(acc, desc128(a0 + 32 * kk), desc128(b0 + 32 * kk));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (k == ns - 1) {
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            const int col0 = id % cbs * BN;
#pragma unroll
            for (int i = 0; i < BN / 8; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int t = row0 + 64 * wg + 16 * warp + lane / 4 + 8 * h, j = col0 + 8 * i + 2 * (lane % 4);
                    if (t < n_tok) {
                        const uint32_t v = (uint32_t)f2bf(acc[4 * i + 2 * h]) | ((uint32_t)f2bf(acc[4 * i + 2 * h + 1]) << 16);
                        *(uint32_t *)(out + (int64_t)t * N + j) = v;
                    }
                }
        }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    asm volatile("cp.async.wait_all;" ::: "memory");
}

static PFN_cuTensorMapEncodeTiled_v12000 encode;
static CUtensorMap make_map(const bf16 *p, int rows, int K, int box_rows) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)K * 2};
    cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { printf("encode failed %d\n", (int)r); exit(1); }
    return m;
}
static float h2f(bf16 h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static bf16 f2h(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (bf16)(u >> 16); }

template <int BN, int S, int RMS, int CPA = 0>
static void run(const char *name, int K, int N, int n_tok, int sms) {
    static uint64_t seed = 1;
    auto rnd = [&]() { seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; return (float)((seed >> 40) & 0xffff) / 65536.0f - 0.5f; };
    std::vector<bf16> hw((size_t)N * K), hx((size_t)n_tok * K), hn(K);
    for (auto &v : hw) v = f2h(rnd());
    for (auto &v : hx) v = f2h(rnd() * 4);
    for (auto &v : hn) v = f2h(1.0f + rnd());
    bf16 *dw, *dx, *dout, *dn;
    CU(cudaMalloc(&dw, hw.size() * 2)); CU(cudaMemcpy(dw, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dx, hx.size() * 2)); CU(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dn, hn.size() * 2)); CU(cudaMemcpy(dn, hn.data(), hn.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dout, (size_t)n_tok * N * 2)); CU(cudaMemset(dout, 0xff, (size_t)n_tok * N * 2));
    CUtensorMap maps[2] = {make_map(dx, n_tok, K, 128), make_map(dw, N, K, BN)};
    CUtensorMap *dm;
    CU(cudaMalloc(&dm, sizeof maps)); CU(cudaMemcpy(dm, maps, sizeof maps, cudaMemcpyHostToDevice));
    const int smem = 1024 + S * (128 * 128 + BN * 128) + 2 * S * 8 + 512;
    CU(cudaFuncSetAttribute(k_tma<BN, S, RMS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CU(cudaFuncSetAttribute(k_cpa<BN, S, RMS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaEvent_t e0, e1; CU(cudaEventCreate(&e0)); CU(cudaEventCreate(&e1));
    for (int it = -3; it < 20; it++) {
        if (it == 0) CU(cudaEventRecord(e0));
        if (CPA)
            k_cpa<BN, S, RMS><<<sms, 256, smem>>>(n_tok, K, N, dout, dx, dw, dn);
        else
            k_tma<BN, S, RMS><<<sms, 256, smem>>>(dm, dm + 1, n_tok, K, N, dout, dx, dn);
    }
    CU(cudaEventRecord(e1)); CU(cudaEventSynchronize(e1)); CU(cudaGetLastError());
    float ms; CU(cudaEventElapsedTime(&ms, e0, e1));
    const double us = 1e3 * ms / 20;
    std::vector<bf16> ho((size_t)n_tok * N);
    CU(cudaMemcpy(ho.data(), dout, ho.size() * 2, cudaMemcpyDeviceToHost));
    double maxrel = 0; int bad = 0;
    for (int s = 0; s < 200; s++) {
        const int t = (int)((uint64_t)s * 7919 % n_tok), j = (int)((uint64_t)s * 104729 % N);
        float sc = 1.0f;
        if (RMS) { double ss = 0; for (int k = 0; k < K; k++) ss += (double)h2f(hx[(size_t)t * K + k]) * h2f(hx[(size_t)t * K + k]); sc = 1.0f / sqrtf((float)(ss / K) + 1e-6f); }
        double ref = 0, mag = 0;
        for (int k = 0; k < K; k++) {
            float xv = h2f(hx[(size_t)t * K + k]);
            if (RMS) xv = h2f(f2h(h2f(f2h(xv * sc)) * h2f(hn[k])));
            ref += (double)xv * h2f(hw[(size_t)j * K + k]);
            mag += fabs((double)xv * h2f(hw[(size_t)j * K + k]));
        }
        const double err = fabs(h2f(ho[(size_t)t * N + j]) - ref) / (mag + 1e-6);
        if (err > maxrel) maxrel = err;
        if (err > 1e-2 || ho[(size_t)t * N + j] == 0xffff) bad++;
    }
    printf("%s %-14s BN %3d S %d rms %d %5d rows %9.1f us %7.1f TFLOP/s  check: max rel %.2e, bad %d / 200\n", CPA ? "cpa" : "tma", name, BN, S, RMS, n_tok, us,
           2.0 * n_tok * N * K / us / 1e6, maxrel, bad);
    cudaFree(dw); cudaFree(dx); cudaFree(dout); cudaFree(dm); cudaFree(dn);
}

int main() {
    cudaDriverEntryPointQueryResult qr;
    CU(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void **)&encode, cudaEnableDefault, &qr));
    int sms; CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int n : {512, 2048}) {
        run<128, 6, 0>("8B gate_up", 4096, 24576, n, sms);
        run<256, 4, 0>("8B gate_up", 4096, 24576, n, sms);
        run<128, 6, 1>("8B gate_up", 4096, 24576, n, sms);
        run<256, 4, 1>("8B gate_up", 4096, 24576, n, sms);
        run<128, 6, 1>("8B qkv", 4096, 6144, n, sms);
        run<128, 6, 0>("8B o", 4096, 4096, n, sms);
        run<128, 6, 1>("0.6B qkv", 1024, 4096, n, sms);
        run<128, 6, 0>("0.6B o", 2048, 1024, n, sms);
        run<128, 6, 1>("0.6B gate_up", 1024, 6144, n, sms);
        run<128, 6, 0, 1>("8B gate_up", 4096, 24576, n, sms);
        run<128, 6, 1, 1>("8B gate_up", 4096, 24576, n, sms);
        run<256, 4, 1, 1>("8B gate_up", 4096, 24576, n, sms);
        run<128, 6, 1, 1>("0.6B qkv", 1024, 4096, n, sms);
    }
    return 0;
}
