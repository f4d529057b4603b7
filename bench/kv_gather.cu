/* kv_gather.cu — how fast the split attention's KV stage can land, alone on the GPU. A question of
 * issue 5 (docs/PERF.md, session 44): in the 4096 traces the partial attention tasks start 7.5-8.6
 * us (0.6B, H100) after the qkv layer's last task ends, and most of that is their stage — each of
 * the 128 tasks (8 KV heads x 16 splits) gathers 256 K rows and 256 V rows of 256 bytes (D 128,
 * bf16) with 16-byte cp.async: 16.8 MB a layer, 5.6 us at the H100's copy bandwidth. Is the gather
 * itself slower than a contiguous read of the same bytes, and would one bulk copy per row do
 * better?
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -Isrc -Iinclude -o build/kv_gather bench/kv_gather.cu
 *   build/kv_gather [reps, 20]
 *
 * The cache as pk lays it out (kernels/attention.cuh): K, V [slots][Hkv 8][D 128] bf16, slot =
 * position (pages mapped in order), 4096 positions. Task b (one CTA per SM; CTAs 128.. idle) is KV
 * head b % 8, split b / 8: its rows r = 0 .. 255 are positions 32 (split + 16 (r / 32)) + r % 32
 * (attention_decode.cuh pk_attd_split_pos), rows of one head 2 KB apart. Modes, each the same
 * 131,072 bytes per task into padded shared rows [256][D + 8]:
 *   gather16:  pk's stage — 16-byte cp.async by 256 threads, the gathered rows;
 *   contig16:  the same copies from a contiguous 128 KB per task (a head-major layout's split);
 *   gatherbulk: one cp.async.bulk of 256 bytes per K or V row, on one mbarrier;
 *   contigbulk: 16 KB bulk copies from the contiguous region (the weight ring's kind of copy).
 * Every copy is pk's own (kernels/cuda/rows.cuh pk_dev_cp_async_w16, mbarrier.cuh
 * pk_dev_bulk_copy_w), with the weights' evict-first L2 policy the stage uses
 * (PK_ATTD_KV_EVICT_FIRST).
 * Before every launch a 256 MB read evicts the cache from L2 (in pk a layer's KV was last touched
 * a step ago, a whole model's weights before). Each CTA records %globaltimer after its first
 * barrier and after its copies landed; per mode the medians over the launches of the span (last
 * end - first start: GB/s = 16.8 MB / span) and of the mean per-task time. Each CTA also XORs what
 * it staged; the host checks it against the same gather of its copy of the cache.
 */
#include "micro.cuh"

#include "kernels/cuda/mbarrier.cuh" /* the mbarrier and both copies: pk's own, as the stage issues them */

enum { HKV = 8, D = 128, NSPLIT = 16, ROWS = 256, POSITIONS = 4096, TASKS = HKV * NSPLIT, THREADS = 256 };
enum { ROW_PAD = D + 8, ROW_BYTES = D * 2, MODES = 4, MAX_SM = 256 };
static const char *mode_names[MODES] = {"gather16", "contig16", "gatherbulk", "contigbulk"};

/* the cache element index of row r of task b's K or V (the gathered modes) */
__host__ __device__ inline uint64_t gathered_row(int b, int r) {
    const int head = b % HKV, split = b / HKV, pos = 32 * (split + NSPLIT * (r >> 5)) + (r & 31);
    return ((uint64_t)pos * HKV + head) * D;
}
/* the contiguous modes: task b's 256 rows one after another */
__host__ __device__ inline uint64_t contig_row(int b, int r) { return ((uint64_t)b * ROWS + r) * D; }

/* rec[b] = {start ns, end ns, xor of the staged words} */
__global__ void __launch_bounds__(THREADS) stage_kernel(const uint16_t *k, const uint16_t *v, int mode,
                                                        unsigned long long *rec) {
    extern __shared__ __align__(128) uint16_t smem[];
    __shared__ __align__(8) uint64_t bar;
    const int b = blockIdx.x;
    if (b >= TASKS) return;
    uint16_t *ks = smem, *vs = smem + ROWS * ROW_PAD;
    const uint32_t bar_s = (uint32_t)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        pk_dev_mbar_init(bar_s, 1);
        pk_dev_mbar_init_fence();
    }
    __syncthreads();
    const uint64_t t0 = now_ns();
    const bool gathered = mode == 0 || mode == 2;
    if (mode <= 1) { /* 16-byte cp.async: row j, chunk c of 16 */
        for (int e = threadIdx.x; e < ROWS * (D / 8); e += THREADS) {
            const int j = e / (D / 8), c = e % (D / 8);
            const uint64_t src = (gathered ? gathered_row(b, j) : contig_row(b, j)) + 8 * c;
            const uint32_t kd = (uint32_t)__cvta_generic_to_shared(ks + j * ROW_PAD + 8 * c);
            const uint32_t vd = (uint32_t)__cvta_generic_to_shared(vs + j * ROW_PAD + 8 * c);
            pk_dev_cp_async_w16(kd, k + src);
            pk_dev_cp_async_w16(vd, v + src);
        }
        asm volatile("cp.async.commit_group;\n\tcp.async.wait_all;" ::: "memory");
        __syncthreads();
    } else { /* bulk copies completing on the mbarrier: 2 x 256 rows of 256 B, or 2 x 4 of 16 KB */
        if (threadIdx.x == 0) pk_dev_mbar_arrive_expect_tx(bar_s, 2 * ROWS * ROW_BYTES);
        __syncthreads();
        const uint64_t policy = pk_dev_weight_policy();
        if (mode == 2) {
            const int j = threadIdx.x; /* THREADS == ROWS: one row of K and one of V per thread */
            const uint32_t kd = (uint32_t)__cvta_generic_to_shared(ks + j * ROW_PAD);
            const uint32_t vd = (uint32_t)__cvta_generic_to_shared(vs + j * ROW_PAD);
            const uint64_t src = gathered_row(b, j);
            pk_dev_bulk_copy_w(kd, k + src, ROW_BYTES, bar_s, policy);
            pk_dev_bulk_copy_w(vd, v + src, ROW_BYTES, bar_s, policy);
        } else if (threadIdx.x < 8) { /* 4 x 16 KB each of K and V (64 rows of 256 B, unpadded) */
            const int part = threadIdx.x % 4;
            const uint16_t *src = (threadIdx.x < 4 ? k : v) + contig_row(b, 0) + (uint64_t)part * 64 * D;
            uint16_t *dst = (threadIdx.x < 4 ? ks : vs) + part * 64 * D;
            pk_dev_bulk_copy_w((uint32_t)__cvta_generic_to_shared(dst), src, 16384, bar_s, policy);
        }
        pk_dev_mbar_wait(bar_s, 0);
        __syncthreads();
    }
    const uint64_t t1 = now_ns();
    /* the XOR of every staged element (unpadded for contigbulk) */
    uint32_t x = 0;
    for (int e = threadIdx.x; e < ROWS * D; e += THREADS) {
        const int j = e / D, i = e % D, at = mode == 3 ? j * D + i : j * ROW_PAD + i;
        x ^= (uint32_t)ks[at] | (uint32_t)vs[at] << 16;
    }
    for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    __shared__ uint32_t warp_x[THREADS / 32];
    if (threadIdx.x % 32 == 0) warp_x[threadIdx.x / 32] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < THREADS / 32; w++) x ^= warp_x[w];
        rec[3 * b] = t0;
        rec[3 * b + 1] = t1;
        rec[3 * b + 2] = x;
    }
}

/* Reads the whole of buf (evicting what the L2 held); out keeps the reads. */
__global__ void flush_kernel(const uint4 *buf, uint64_t n, uint32_t *out) {
    uint32_t a = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        a ^= buf[i].x ^ buf[i].w;
    if (a == 0x12345678u) *out = a;
}

static uint32_t expected_xor(const uint16_t *k, const uint16_t *v, int mode, int b) {
    uint32_t x = 0;
    for (int j = 0; j < ROWS; j++) {
        const uint64_t row = mode == 0 || mode == 2 ? gathered_row(b, j) : contig_row(b, j);
        for (int i = 0; i < D; i++) x ^= (uint32_t)k[row + i] | (uint32_t)v[row + i] << 16;
    }
    return x;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: kv_gather [reps 1..1000]\n");
        return 1;
    }
    const int sms = sm_count_at_most(MAX_SM);
    if (sms < TASKS) {
        fprintf(stderr, "%d SMs: the stage needs %d CTAs resident at once\n", sms, TASKS);
        return 1;
    }
    /* K, V: [POSITIONS][HKV][D] bf16 words with values from their index (any pattern that differs
     * row to row); the contiguous modes read the first TASKS x ROWS x D of the same arrays */
    const size_t n = (size_t)POSITIONS * HKV * D;
    uint16_t *hk = (uint16_t *)malloc(n * 2), *hv = (uint16_t *)malloc(n * 2);
    if (!hk || !hv) return 1;
    for (size_t i = 0; i < n; i++) {
        hk[i] = (uint16_t)((i * 2654435761u) >> 13);
        hv[i] = (uint16_t)((i * 40503u + 7) >> 3);
    }
    uint16_t *k, *v;
    CHECK(cudaMalloc(&k, n * 2));
    CHECK(cudaMalloc(&v, n * 2));
    CHECK(cudaMemcpy(k, hk, n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(v, hv, n * 2, cudaMemcpyHostToDevice));
    const size_t flush_bytes = (size_t)256 << 20;
    const uint4 *flush = (const uint4 *)device_filled(flush_bytes, 1);
    uint32_t *sink;
    unsigned long long *rec;
    CHECK(cudaMalloc(&sink, 4));
    CHECK(cudaMalloc(&rec, sizeof(unsigned long long) * 3 * sms));
    unsigned long long *hrec = (unsigned long long *)malloc(sizeof(unsigned long long) * 3 * sms);
    double *span = (double *)malloc(sizeof(double) * reps), *mean = (double *)malloc(sizeof(double) * reps);
    if (!hrec || !span || !mean) return 1;
    const int smem = 2 * ROWS * ROW_PAD * 2;
    CHECK(cudaFuncSetAttribute(stage_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const double bytes = 2.0 * TASKS * ROWS * ROW_BYTES;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs: %d tasks x (256 K + 256 V rows of %d B) = %.1f MB, L2 flushed before each launch\n",
           prop.name, sms, TASKS, ROW_BYTES, bytes / 1e6);
    int bad = 0;
    for (int mode = 0; mode < MODES; mode++) {
        for (int r = 0; r < reps; r++) {
            flush_kernel<<<4 * sms, 512>>>(flush, flush_bytes / 16, sink);
            stage_kernel<<<sms, THREADS, smem>>>(k, v, mode, rec);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(hrec, rec, sizeof(unsigned long long) * 3 * sms, cudaMemcpyDeviceToHost));
            unsigned long long first = ~0ull, last = 0;
            double sum = 0;
            for (int b = 0; b < TASKS; b++) {
                first = hrec[3 * b] < first ? hrec[3 * b] : first;
                last = hrec[3 * b + 1] > last ? hrec[3 * b + 1] : last;
                sum += (double)(hrec[3 * b + 1] - hrec[3 * b]);
                if (r == 0 && (uint32_t)hrec[3 * b + 2] != expected_xor(hk, hv, mode, b)) bad++;
            }
            span[r] = (double)(last - first) / 1e3;
            mean[r] = sum / TASKS / 1e3;
        }
        qsort(span, reps, sizeof(double), cmp_double);
        qsort(mean, reps, sizeof(double), cmp_double);
        printf("%-10s span median %6.2f us (min %6.2f): %6.0f GB/s; per task median of means %6.2f us\n",
               mode_names[mode], span[reps / 2], span[0], bytes / span[reps / 2] / 1e3, mean[reps / 2]);
    }
    printf(bad ? "staged data WRONG in %d tasks\n" : "staged data checked: %d tasks wrong\n", bad);
    return bad != 0;
}
