// SPDX-License-Identifier: Apache-2.0
/* mma.cuh — the tensor-core primitives every tensor-core path uses (the decode attention's staged
 * loop, the multi-row GEMM, the multi-row attention): mma.sync m16n8k16 (bf16 in, fp32 sums) and
 * ldmatrix x4, sm_80 and later.
 * Fragments (PTX ISA, m16n8k16): lane = 4 · gid + tig; A a0 (row gid, k 2 tig, +1), a1 (row gid
 * + 8), a2 (k + 8), a3 (row gid + 8, k + 8); B b0 (k 2 tig, +1; n gid), b1 (k + 8); C c0, c1 (row
 * gid, n 2 tig, +1), c2, c3 (row gid + 8).
 */
#ifndef PK_CUDA_MMA_CUH
#define PK_CUDA_MMA_CUH

#include <stdint.h>

/* c += A · B, A's four registers given (a[0..3]: rows gid / gid + 8, k 2 tig / + 8). Not volatile:
 * the product touches no memory, so the compiler may place it among the fragment loads. */
__device__ __forceinline__ void pk_mma_16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
    __trap(); /* no caller reaches it below sm_80 (attention_decode's PK_ATTD_USE_MMA; sm_90a builds) */
#endif
}

/* Four 8x8 b16 matrices from shared memory; lane i gives the address of row i % 8 of matrix i / 8.
 * TRANS: each matrix transposed (a row-major [k][n] tile read as mma's B operand). */
template <bool TRANS>
__device__ __forceinline__ void pk_ldsm4(uint32_t *r, const pk_bf16 *row) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

#endif /* PK_CUDA_MMA_CUH */
