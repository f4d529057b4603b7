// SPDX-License-Identifier: Apache-2.0
// Experiment (session 60): the multi-row GEMM chunk with everything inlined into the __global__
// function (no call: ptxas need not serialize wgmma), timed at bench_mma's chunk shapes.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
struct pk_gen_tuning {
    static constexpr bool lin_wst_lds = false;
    static constexpr int lin_pace_kb = 48;
    static constexpr bool attd_bulk_rows = false;
    static constexpr unsigned debug_spin_limit_ms = 0u;
    static constexpr unsigned debug_stall_task = 0xffffffffu;
};
#include "kernels/cuda/cuda_kernels.cuh"

template <int XN, int BN>
__global__ void __launch_bounds__(PK_CUDA_THREADS, 1)
    k_ub(const pk_bf16 *x, const pk_bf16 *nw, int n_tok, int K, pk_rows w, int N, pk_bf16 *out) {
    extern __shared__ __align__(128) char smem_[];
    const int b = blockIdx.x, G = gridDim.x;
    const int n0 = (int)((int64_t)b * N / G), nc = (int)((int64_t)(b + 1) * N / G) - n0;
    pk_lin_args a{};
    a.x = x; a.x_stride = K; a.n_tok = n_tok; a.K = K; a.norm_w = nw; a.eps = 1e-6f; a.w = &w;
    a.n0 = n0; a.ncols = nc; a.out = out + n0; a.out_stride = N;
    a.ch = pk_lin_chunk_of(b, N, G, G, 0);
    pk_lin_mma_chunk<XN, BN>(a, smem_);
}

#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

template <int XN, int BN>
static void run(const char *name, int K, int N, int n_tok, int sms) {
    std::vector<uint16_t> h((size_t)N * K);
    for (size_t i = 0; i < h.size(); i++) h[i] = 0x3c00 + (uint16_t)((i * 7) % 255);
    pk_bf16 *dw, *dx, *dnw, *dout;
    CU(cudaMalloc(&dw, h.size() * 2)); CU(cudaMemcpy(dw, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dx, (size_t)n_tok * K * 2)); CU(cudaMemcpy(dx, h.data(), (size_t)n_tok * K * 2 < h.size() * 2 ? (size_t)n_tok * K * 2 : h.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dnw, K * 2)); CU(cudaMemcpy(dnw, h.data(), K * 2, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dout, (size_t)n_tok * N * 2));
    const pk_rows w = pk_rows_plain(dw, (uint32_t)N, (uint64_t)K);
    CU(cudaFuncSetAttribute(k_ub<XN, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, PK_CUDA_SMEM_BYTES));
    cudaEvent_t e0, e1; CU(cudaEventCreate(&e0)); CU(cudaEventCreate(&e1));
    for (int it = -3; it < 20; it++) {
        if (it == 0) CU(cudaEventRecord(e0));
        k_ub<XN, BN><<<sms, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(dx, dnw, n_tok, K, w, N, dout);
    }
    CU(cudaEventRecord(e1)); CU(cudaEventSynchronize(e1)); CU(cudaGetLastError());
    float ms; CU(cudaEventElapsedTime(&ms, e0, e1));
    const double us = 1e3 * ms / 20;
    printf("inline %-14s BN %3d %5d rows %9.1f us %7.1f TFLOP/s\n", name, BN, n_tok, us, 2.0 * n_tok * N * K / us / 1e6);
    cudaFree(dw); cudaFree(dx); cudaFree(dnw); cudaFree(dout);
}

int main() {
    int sms; CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int n : {512, 2048}) {
        run<PK_LIN_RMSNORM, 128>("8B qkv", 4096, 6144, n, sms);
        run<PK_LIN_PLAIN, 128>("8B o", 4096, 4096, n, sms);
        run<PK_LIN_RMSNORM, 128>("8B gate_up", 4096, 24576, n, sms);
        run<PK_LIN_RMSNORM, 128>("0.6B qkv", 1024, 4096, n, sms);
        run<PK_LIN_PLAIN, 64>("0.6B o", 2048, 1024, n, sms);
        run<PK_LIN_RMSNORM, 128>("0.6B gate_up", 1024, 6144, n, sms);
    }
    return 0;
}
