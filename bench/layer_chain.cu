/* layer_chain.cu — a model of the persistent kernel's decode step with the arithmetic taken out:
 * what a chain of weight-streaming layers costs when every layer waits for the one before it.
 *
 * issue 5, session 15 (docs/PERF.md): each GEMV layer of pk's Qwen3-8B step spans 3.6-6.9 us more
 * than its bytes take at the per-SM streaming rate. This kernel keeps only what the static
 * schedule does around the bytes — per task: issue the tile's first NS - 1 stages (16-byte
 * cp.async, the GEMV's lane rings: warp w takes 4-row groups w, w + 8, ..., a stage is 512 B of
 * each row of the group), wait on the layer before (thread 0 polls a counter, ld.acquire.gpu +
 * 32 ns sleeps, as sync.cuh), load an 8 KB x vector, stream the rest keeping NS - 1 stages in
 * flight, touch every chunk, signal (red.release.gpu.add) — so a variant of the protocol can be
 * timed in seconds instead of a 10-minute kernel build, and its gain read against the model's
 * span minus bytes.
 *
 *   nvcc -O3 -arch=sm_90a -o build/layer_chain bench/layer_chain.cu && build/layer_chain [blocks [variant [shape]]]
 *
 * The layer kinds are the Qwen3-8B shape's on 132 workers, as pk's model builder tiles them:
 * qkv 96 tiles of 64 rows [4096], the attention 8 tasks (a spin of ATT_NS, no bytes; 5.5 us for
 * the 1.7B shape), o_proj 128 tiles of 32 rows [4096], gate_up 132 tiles of 186 rows [4096], down
 * 128 tiles of 32 rows [12288]; every layer instance has its own weights (36 layers: 13.5 GB, no
 * L2 reuse).
 * Shapes (argv[3]): 8b (default) or 1.7b (kinds_1p7b). Variants (argv[2], a substring of the
 * name; default all): see the `variants` table. `chain` (session 20): a worker's stream runs on
 * into its next task's tile — the next task's first NS - 1 steps are issued as this task's last
 * ones are read, into the slots they leave, so no ring drains at a task boundary. Measured on the
 * H200 (two runs each): 8B 96.5 / 96.7 -> 103.3 / 100.8 us per block, 1.7B 35.5 / 35.8 -> 36.3 /
 * 35.4: no gain (why not measured; poll_latency.cu's finding, that a load waits for the SM's own
 * copies in flight, is the suspect), so pk does not chain its rings.
 */
#include "micro.cuh"
#include <string.h>

enum { THREADS = 256, WARPS = 8, NS = 12, ATT_NS = 8000 };

typedef struct {
    int ntasks, first, rows, K; /* tasks on workers first .. first + ntasks - 1; rows [K] bf16 per task; K 0: attention */
} kind_t;
static const kind_t kinds_8b[5] = {{96, 0, 64, 4096}, {8, 96, 0, 0}, {128, 0, 32, 4096}, {132, 0, 186, 4096}, {128, 0, 32, 12288}};
/* Qwen3-1.7B as pk tiles it for 132 workers (model.c): qkv 64 tiles of 64 rows [2048] (streamed,
 * so the attention gets workers of its own), o_proj 128 of 16 [2048], gate_up 128 of 96 [2048],
 * down 128 of 16 [6144] */
static const kind_t kinds_1p7b[5] = {{64, 0, 64, 2048}, {8, 64, 0, 0}, {128, 0, 16, 2048}, {128, 0, 96, 2048}, {128, 0, 16, 6144}};
static kind_t kinds[5]; /* the shape's, chosen in main */
static const char *kind_names[5] = {"qkv", "attention", "o_proj", "gate_up", "down"};

typedef struct {
    const char *w; /* tile 0; tile t at w + t * rows * K * 2 */
    int ntasks, first, rows, K, kind;
} layer_t;

/* variant flags */
enum { V_L2_EARLY = 1, V_DELAY = 2, V_CHAIN = 4 };
/* The copies' evict-first L2 policy (pk's): 1 raised "illegal instruction" on the H200 in this
 * kernel (session 15; as pk's rings did in session 8), so the model copies without it. */
#ifndef LC_HINT
#define LC_HINT 0
#endif


/* A warp's stream over its groups of a tile: step i copies chunk j = i % nj of group
 * warp + 8 * (i / nj), 4 rows, 16 B per lane per row, into slot i % NS. */
struct stream_t {
    const char *base; /* tile, plus this lane's 16 bytes */
    int K2, nj, nsteps, warp;
    uint32_t ring; /* this lane's entry of slot 0, row 0 */
    int slot0;     /* the ring slot of step 0 (V_CHAIN: steps continue the task before's slots) */
    __device__ void init(const layer_t &L, int t, char *smem) {
        const int lane = threadIdx.x % 32;
        warp = threadIdx.x / 32;
        K2 = L.K * 2;
        base = L.w + (uint64_t)t * L.rows * K2 + lane * 16;
        nj = L.K / 256;
        const int ngroups = L.rows / 4, rounds = (ngroups - warp + WARPS - 1) / WARPS;
        nsteps = rounds * nj;
        ring = (uint32_t)__cvta_generic_to_shared(smem + 8192 + warp * NS * 2048 + lane * 16);
        slot0 = 0;
    }
    __device__ __forceinline__ const char *src(int i, int r) const {
        const int g = warp + WARPS * (i / nj), j = i % nj;
        return base + (uint64_t)(4 * g + r) * K2 + 512 * j;
    }
    __device__ __forceinline__ void issue(int i) {
#if LC_HINT
        uint64_t pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
        if (i < nsteps)
            for (int r = 0; r < 4; r++)
#if LC_HINT
                asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(
                                 ring + (uint32_t)((((slot0 + i) % NS) * 4 + r) * 512)),
                             "l"(src(i, r)), "l"(pol)
                             : "memory");
#else
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(ring + (uint32_t)((((slot0 + i) % NS) * 4 + r) * 512)),
                             "l"(src(i, r))
                             : "memory");
#endif
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    /* bulk L2 prefetch of steps [i0, i1): each row's 512-byte chunks, lane r < 4 row r */
    __device__ __forceinline__ void prefetch(int i0, int i1) {
        const int lane = threadIdx.x % 32;
        if (lane >= 4) return;
        for (int i = i0; i < i1 && i < nsteps; i++)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], 512;" ::"l"(src(i, lane) - 16 * lane) : "memory");
    }
};

__constant__ int att_ns_dev;
__global__ void __launch_bounds__(THREADS, 1) chain_kernel(const layer_t *layers, int nlayers, int flags,
                                                           int arg, int early_pct, const uint4 *x,
                                                           unsigned long long *ctr, unsigned long long *rec,
                                                           unsigned int *sink) {
    extern __shared__ __align__(128) char smem[];
    __shared__ unsigned long long sh_cnt;
    const int w = blockIdx.x;
    uint32_t acc = 0;
    int slot0 = 0;       /* V_CHAIN: the slot of this task's step 0 */
    bool pre = false;    /* V_CHAIN: this task's first NS - 1 steps were issued by the task before */
    for (int l = 0; l < nlayers; l++) {
        const layer_t L = layers[l];
        const int t = w - L.first; /* this worker's task of the layer */
        if (t < 0 || t >= L.ntasks) continue;
        const unsigned long long need = l ? (unsigned long long)layers[l - 1].ntasks : 0;
        stream_t q, qn;
        const bool early = (flags & V_L2_EARLY) && L.K && l;
        unsigned long long c0 = 0;
        if (early && threadIdx.x == 0) c0 = ld_acquire(&ctr[l - 1]); /* before the copies: not queued behind them */
        if (L.K) {
            q.init(L, t, smem);
            q.slot0 = slot0;
            if (!pre)
                for (int i = 0; i < NS - 1; i++) q.issue(i);
        }
        pre = false;
        /* V_CHAIN: the worker's next task streams too: its first NS - 1 steps go out as this
         * task's last ones are read, into the slots they leave (this warp's ring continues) */
        bool chain = false;
        if ((flags & V_CHAIN) && L.K && q.nsteps >= NS - 1) {
            for (int l2 = l + 1; l2 < nlayers; l2++) {
                const layer_t &N = layers[l2];
                if (w < N.first || w >= N.first + N.ntasks) continue;
                if (N.K) {
                    qn.init(N, w - N.first, smem);
                    qn.slot0 = (slot0 + q.nsteps) % NS;
                    chain = qn.nsteps >= NS - 1;
                }
                break;
            }
        }
        if (early) { /* the layer before is far from done: fetch the next stages into L2 */
            if (threadIdx.x == 0) sh_cnt = c0;
            __syncthreads();
            if (sh_cnt * 100 < need * (unsigned long long)early_pct) q.prefetch(NS - 1, NS - 1 + arg);
        }
        /* the wait */
        if (threadIdx.x == 0 && l) {
            unsigned long long c = ld_acquire(&ctr[l - 1]);
            while (c < need) {
                __nanosleep(32);
                c = ld_acquire(&ctr[l - 1]);
            }
        }
        __syncthreads();
        const uint64_t t0 = now_ns();
        if ((flags & V_DELAY) && L.K) /* a dispatch of arg ns after the wait, before x is read */
            while (now_ns() - t0 < (uint64_t)arg) {
            }
        if (L.K) {
            const uint4 xa = __ldcg(x + threadIdx.x), xb = __ldcg(x + 256 + threadIdx.x); /* the x stage: 8 KB */
            acc ^= xa.x ^ xb.y;
            __syncthreads();
            for (int i = 0; i < q.nsteps; i++) {
                asm volatile("cp.async.wait_group %0;" ::"n"(NS - 2) : "memory");
                for (int r = 0; r < 4; r++)
                    acc += *(const uint32_t *)(smem + 8192 + q.warp * NS * 2048 + (threadIdx.x % 32) * 16 +
                                               (((slot0 + i) % NS) * 4 + r) * 512);
                if (chain && i + NS - 1 >= q.nsteps)
                    qn.issue(i + NS - 1 - q.nsteps);
                else
                    q.issue(i + NS - 1);
            }
            if (chain) { /* the next task's first steps stay in flight */
                slot0 = qn.slot0;
                pre = true;
            } else {
                asm volatile("cp.async.wait_all;" ::: "memory");
                slot0 = 0;
            }
        } else {
            while (now_ns() - t0 < (uint64_t)att_ns_dev) {
            }
        }
        __syncthreads();
        const uint64_t t1 = now_ns();
        if (threadIdx.x == 0) {
            red_release(&ctr[l], 1);
            rec[((uint64_t)l * gridDim.x + t) * 2 + 0] = t0;
            rec[((uint64_t)l * gridDim.x + t) * 2 + 1] = t1;
        }
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

int main(int argc, char **argv) {
    const int nblk = argc > 1 ? atoi(argv[1]) : 36; /* transformer blocks */
    const bool small = argc > 3 && strcmp(argv[3], "1.7b") == 0; /* argv[3]: the shape, 8b (default) or 1.7b */
    memcpy(kinds, small ? kinds_1p7b : kinds_8b, sizeof kinds);
    const int att_ns = small ? 5500 : ATT_NS; /* the attention task's span (pk's traces: ~6 / ~8 us) */
    CHECK(cudaMemcpyToSymbol(att_ns_dev, &att_ns, sizeof att_ns));
    const int nlayers = nblk * 5;
    int nsm = 0;
    CHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    if (nsm < 132) {
        fprintf(stderr, "layer_chain: needs 132 SMs (this GPU has %d)\n", nsm);
        return 1;
    }
    size_t total = 0;
    for (int k = 0; k < 5; k++) total += (size_t)kinds[k].ntasks * kinds[k].rows * kinds[k].K * 2 * nblk;
    char *w;
    CHECK(cudaMalloc(&w, total));
    CHECK(cudaMemset(w, 0, total));
    layer_t *hl = (layer_t *)calloc(nlayers, sizeof(layer_t)), *dl;
    size_t off = 0;
    double bytes_kind[5] = {0};
    for (int l = 0; l < nlayers; l++) {
        const kind_t k = kinds[l % 5];
        hl[l] = layer_t{w + off, k.ntasks, k.first, k.rows, k.K, l % 5};
        off += (size_t)k.ntasks * k.rows * k.K * 2;
        bytes_kind[l % 5] = (double)k.ntasks * k.rows * k.K * 2;
    }
    CHECK(cudaMalloc(&dl, nlayers * sizeof(layer_t)));
    CHECK(cudaMemcpy(dl, hl, nlayers * sizeof(layer_t), cudaMemcpyHostToDevice));
    uint4 *x;
    unsigned long long *ctr, *rec;
    unsigned int *sink;
    CHECK(cudaMalloc(&x, 8192));
    CHECK(cudaMemset(x, 0, 8192));
    CHECK(cudaMalloc(&ctr, nlayers * 8));
    CHECK(cudaMalloc(&rec, (size_t)nlayers * 132 * 16));
    CHECK(cudaMalloc(&sink, 4));
    const int smem = 8192 + WARPS * NS * 2048;
    CHECK(cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    unsigned long long *h = (unsigned long long *)malloc((size_t)nlayers * 132 * 16);

    struct {
        const char *name;
        int flags, arg, early_pct; /* arg: V_L2_EARLY's stages to fetch, V_DELAY's ns */
    } variants[] = {
        {"baseline", 0, 0, 0},
        {"l2_early 5 st <50%", V_L2_EARLY, 5, 50},
        {"l2_early 11 st <50%", V_L2_EARLY, 11, 50},
        {"l2_early 11 st <90%", V_L2_EARLY, 11, 90},
        {"l2_early 22 st <50%", V_L2_EARLY, 22, 50},
        {"delay 1000 ns", V_DELAY, 1000, 0},
        {"delay 2000 ns", V_DELAY, 2000, 0},
        {"chain", V_CHAIN, 0, 0},
    };
    const int nv = (int)(sizeof variants / sizeof variants[0]);
    printf("layer_chain: %d blocks x 5 layers, %.2f GB of weights; per kind: span (first start to last end of the "
           "layer, us), mean task, bytes at 4.66 TB/s\n", nblk, total / 1e9);
    for (int v = 0; v < nv; v++) {
        if (argc > 2 && !strstr(variants[v].name, argv[2])) continue;
        double best = 1e30;
        double span_k[5], mean_k[5];
        for (int rep = 0; rep < 4; rep++) {
            CHECK(cudaMemset(ctr, 0, nlayers * 8));
            chain_kernel<<<132, THREADS, smem>>>(dl, nlayers, variants[v].flags, variants[v].arg,
                                                 variants[v].early_pct, x, ctr, rec, sink);
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(h, rec, (size_t)nlayers * 132 * 16, cudaMemcpyDeviceToHost));
            if (rep == 0) continue;
            double s[5] = {0}, m[5] = {0};
            uint64_t first = ~0ull, last = 0;
            for (int l = 0; l < nlayers; l++) {
                uint64_t a = ~0ull, b = 0;
                double sum = 0;
                for (int t = 0; t < hl[l].ntasks; t++) {
                    const uint64_t t0 = h[((uint64_t)l * 132 + t) * 2], t1 = h[((uint64_t)l * 132 + t) * 2 + 1];
                    a = t0 < a ? t0 : a;
                    b = t1 > b ? t1 : b;
                    sum += (double)(t1 - t0);
                }
                s[l % 5] += (double)(b - a) / 1e3 / nblk;
                m[l % 5] += sum / hl[l].ntasks / 1e3 / nblk;
                first = a < first ? a : first;
                last = b > last ? b : last;
            }
            const double tot = (double)(last - first) / 1e3;
            if (tot < best) {
                best = tot;
                memcpy(span_k, s, sizeof s);
                memcpy(mean_k, m, sizeof m);
            }
        }
        printf("%-22s total %8.1f us (%6.1f per block) |", variants[v].name, best, best / nblk);
        for (int k = 0; k < 5; k++)
            printf(" %s %5.2f/%5.2f/%5.2f", kind_names[k], span_k[k], mean_k[k], bytes_kind[k] / 4.66e6);
        printf("\n");
    }
    return 0;
}
