// SPDX-License-Identifier: Apache-2.0
/* test_cuda_compile.c — the CUDA backend without a GPU: a small graph that uses every task kind
 * is generated and compiled with nvcc for sm_90a (PK_CUDA_ARCH, so no GPU is probed); kernel.cu
 * names pk's version and the graph hash; ptxas keeps no task function out of line but the
 * generated pk_gen_* ones; the second compile of the same graph is a cache hit (no
 * nvcc run); a cache directory others can write is refused; a missing nvcc, a bad arch and a
 * failing nvcc give PK_ERR_BACKEND (or PK_ERR_INVALID_ARGUMENT) with a clear message.
 * Without nvcc the test prints "skipped: nvcc not found" and counts nothing.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/bf16.h"
#include "pk.h"
#include "kernels/attention_decode_layout.h" /* pk_attd_layout_of: PK_GEN_ATT_HEAD's value */
#include "pk_abi.h"                          /* PK_ABI_VERSION */

enum { V = 64, H = 32, HQ = 4, HKV = 2, D = 16, I = 48, T = 8, QKV = HKV * (HQ / HKV + 2) * D };

static pk_bf16 wbuf[1 << 16];

static pk_tensor *weight(pk_kernel *k, const char *name, int64_t d0, int64_t d1) {
    int64_t dims[2] = {d0, d1};
    return pk_attach_input(k, name, PK_DTYPE_BF16, d1 ? 2 : 1, dims, NULL, wbuf);
}

static pk_tensor *act(pk_kernel *k, const char *name, int64_t n) {
    int64_t dims[2] = {T, n};
    return pk_new_tensor(k, name, PK_DTYPE_BF16, 2, dims, PK_IO_LOCAL);
}

/* Every layer kind once: embedding, rmsnorm, rmsnorm_linear (fused qkv), attention (and split
 * over the KV length: attention_partial), linear_with_residual, rmsnorm_linear (fused gate|up),
 * silu_mul, linear, silu_mul_linear, rmsnorm_linear_swiglu, linear_splitk_with_residual,
 * rmsnorm_swiglu_down with rmsnorm_linear_acc and linear_with_residual_clear, rmsnorm_linear_argmax,
 * argmax; the
 * linear family also with uneven grids (tiles of ⌊N/grid⌋ or ⌈N/grid⌉ rows). */
/* The CUDA kernel both graphs are built in: 4 workers, T rows, kernels cached in cache_dir. */
static pk_kernel *cuda_kernel(const char *cache_dir) {
    pk_config c = pk_config_default();
    c.backend = PK_BACKEND_CUDA;
    c.num_workers = 4;
    c.max_seq_length = 32;
    c.max_requests = 2;
    c.max_tokens_per_step = T;
    c.page_size = 4;
    c.cache_dir = cache_dir;
    return pk_kernel_new(&c);
}

static pk_kernel *build(const char *cache_dir) {
    pk_kernel *k = cuda_kernel(cache_dir);
    const int64_t page_size = pk_kernel_config(k)->page_size;
    pk_tensor *h0 = act(k, "h0", H), *hn = act(k, "hn", H), *qkv = act(k, "qkv", QKV);
    pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h0, 2);
    pk_rmsnorm_layer(k, h0, weight(k, "norm0", H, 0), hn, 1e-6f, 2);
    pk_tensor *in[3] = {weight(k, "wq", HQ * D, H), weight(k, "wk", HKV * D, H), weight(k, "wv", HKV * D, H)};
    pk_rmsnorm_linear_layer(k, hn, weight(k, "attn_norm", H, 0), pk_fuse_tensors(k, "wqkv", in, 3, 0, HKV), qkv,
                            1e-6f, 5); /* uneven: tiles of 25 and 26 rows across the KV groups */
    int64_t cd[4] = {pk_kernel_config(k)->num_pages, page_size, HKV, D};
    pk_tensor *kcache = pk_new_tensor(k, "k_cache", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
    pk_tensor *vcache = pk_new_tensor(k, "v_cache", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
    pk_tensor *att = act(k, "att", HQ * D), *h1 = act(k, "h1", H), *gu = act(k, "gu", 2 * I);
    pk_attention_params ap = {.num_q_heads = HQ, .num_kv_heads = HKV, .head_dim = D, .rope_theta = 10000.0f,
                              .qk_norm_eps = 1e-6f};
    pk_attention_layer(k, qkv, kcache, vcache, weight(k, "q_norm", D, 0), weight(k, "k_norm", D, 0), att, &ap, 2);
    pk_linear_with_residual_layer(k, att, weight(k, "wo", H, HQ * D), h0, h1, 3); /* uneven */
    pk_tensor *gin[2] = {weight(k, "wg", I, H), weight(k, "wu", I, H)};
    pk_rmsnorm_linear_layer(k, h1, weight(k, "mlp_norm", H, 0), pk_fuse_tensors(k, "wgu", gin, 2, 0, 1), gu, 1e-6f, 4);
    pk_tensor *m = act(k, "m", I), *h2 = act(k, "h2", H), *h3 = act(k, "h3", H), *logits = act(k, "logits", V);
    pk_silu_mul_layer(k, gu, m, 2);
    pk_linear_layer(k, m, weight(k, "wm", H, I), h2, 3); /* uneven */
    pk_silu_mul_linear_with_residual_layer(k, gu, weight(k, "wd", H, I), h2, h3, 5); /* uneven */
    /* a second attention block, split over the KV length (attention_partial, its last tasks fold) */
    pk_tensor *qkv2 = act(k, "qkv2", QKV), *att2 = act(k, "att2", HQ * D), *h4 = act(k, "h4", H);
    pk_tensor *kcache2 = pk_new_tensor(k, "k_cache2", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
    pk_tensor *vcache2 = pk_new_tensor(k, "v_cache2", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
    pk_rmsnorm_linear_layer(k, h3, weight(k, "attn_norm2", H, 0), weight(k, "wqkv2", QKV, H), qkv2, 1e-6f, 4);
    pk_attention_params ap2 = ap;
    ap2.kv_splits = 3;
    pk_attention_layer(k, qkv2, kcache2, vcache2, NULL, NULL, att2, &ap2, 2);
    pk_linear_with_residual_layer(k, att2, weight(k, "wo2", H, HQ * D), h3, h4, 4);
    /* the MLP with silu·mul in the gate|up tasks: 2 tasks, blocks of I / 4 gate / up rows */
    pk_tensor *gin2[2] = {weight(k, "wg2", I, H), weight(k, "wu2", I, H)};
    pk_tensor *m2 = act(k, "m2", I), *h5 = act(k, "h5", H);
    pk_rmsnorm_linear_swiglu_layer(k, h4, weight(k, "mlp_norm2", H, 0), pk_fuse_tensors(k, "wgu2", gin2, 2, 0, 4),
                                   I / 4, m2, 1e-6f, 2);
    pk_linear_splitk_with_residual_layer(k, m2, weight(k, "wd2", H, I), h4, h5, 2); /* task i after gate|up task i */
    /* the MLP as one layer (2 tasks), its int64 accumulator read by the next rmsnorm_linear_acc
     * and cleared by a linear_with_residual_clear */
    int64_t ad[2] = {T, H};
    pk_tensor *acc = pk_new_tensor(k, "acc", PK_DTYPE_INT64, 2, ad, PK_IO_LOCAL);
    pk_tensor *gin3[2] = {weight(k, "wg3", I, H), weight(k, "wu3", I, H)};
    pk_tensor *x6 = act(k, "x6", H), *s6 = act(k, "s6", H), *h6 = act(k, "h6", H);
    pk_rmsnorm_swiglu_down_layer(k, h5, weight(k, "mlp_norm3", H, 0), pk_fuse_tensors(k, "wgu3", gin3, 2, 0, 2),
                                 weight(k, "wd3", H, I), acc, 1e-6f, 2);
    pk_rmsnorm_linear_acc_layer(k, h5, acc, weight(k, "norm6", H, 0), weight(k, "w6", H, H), x6, s6, 1e-6f, 2);
    pk_linear_with_residual_clear_layer(k, x6, weight(k, "wo6", H, H), s6, acc, h6, 2);
    /* the LM head with its argmax in one layer (uneven); the argmax layer then reads its logits
     * again, so that it stays the only layer signalling END (the graph ends the step by its counter) */
    pk_tensor *ids = pk_new_tensor(k, "lm_head_ids", PK_DTYPE_INT32, 1, (int64_t[]){T}, PK_IO_LOCAL);
    pk_rmsnorm_linear_argmax_layer(k, h6, weight(k, "final_norm", H, 0), weight(k, "lm_head", V, H), logits, ids, 1e-6f,
                                   3);
    pk_argmax_layer(k, logits, pk_step_output(k), 2);
    CHECK(pk_kernel_status(k) == PK_OK, "building the graph: %s", pk_kernel_error(k));
    return k;
}

/* The embedding and the LM head with its argmax, nothing else: the one layer that signals END. */
static pk_kernel *build_lm_only(const char *cache_dir) {
    pk_kernel *k = cuda_kernel(cache_dir);
    pk_tensor *h = act(k, "h", H), *logits = act(k, "logits", V);
    pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h, 2);
    pk_rmsnorm_linear_argmax_layer(k, h, weight(k, "final_norm", H, 0), weight(k, "lm_head", V, H), logits,
                                   pk_step_output(k), 1e-6f, 4);
    CHECK(pk_kernel_status(k) == PK_OK, "building the LM-head graph: %s", pk_kernel_error(k));
    return k;
}

/* Two GEMV layers whose one tile (256 x 256 bf16, 128 KB) streams and one whose tile stages whole
 * (the LM head's, 16 KB): the shape class codegen gives the paced stages of 64 KB (the Qwen3-1.7B's,
 * session 39). split_attention: with an attention layer split over the KV length between the second
 * streamed layer and the LM head (the 1.7B at long contexts: the bulk-row KV stage, session 46). */
static pk_kernel *build_paced(const char *cache_dir, int split_attention) {
    enum { W = 256 };
    pk_kernel *k = cuda_kernel(cache_dir);
    pk_tensor *h = act(k, "h", W), *y1 = act(k, "y1", W), *y2 = act(k, "y2", W), *logits = act(k, "logits", V);
    pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, W), h, 2);
    pk_linear_layer(k, h, weight(k, "w1", W, W), y1, 1);
    pk_linear_layer(k, y1, weight(k, "w2", W, W), y2, 1);
    if (split_attention) {
        int64_t cd[4] = {pk_kernel_config(k)->num_pages, pk_kernel_config(k)->page_size, HKV, D};
        pk_tensor *qkv = act(k, "qkv", QKV), *att = act(k, "att", HQ * D), *y3 = act(k, "y3", W);
        pk_linear_layer(k, y2, weight(k, "wqkv", QKV, W), qkv, 2);
        pk_attention_params ap = {.num_q_heads = HQ, .num_kv_heads = HKV, .head_dim = D, .rope_theta = 10000.0f,
                                  .kv_splits = 2};
        pk_attention_layer(k, qkv, pk_new_tensor(k, "k_cache", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL),
                           pk_new_tensor(k, "v_cache", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL), NULL, NULL, att, &ap, 2);
        pk_linear_layer(k, att, weight(k, "wo", W, HQ * D), y3, 2);
        y2 = y3;
    }
    pk_linear_layer(k, y2, weight(k, "lm_head", V, W), logits, 2);
    pk_argmax_layer(k, logits, pk_step_output(k), 2);
    CHECK(pk_kernel_status(k) == PK_OK, "building the paced graph: %s", pk_kernel_error(k));
    return k;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* kernel.cu of k's failed compile (the failing stand-in nvcc): its path is in the error. */
static char *failed_kernel_cu(pk_kernel *k, pk_status *s, char *path, size_t path_len) {
    *s = pk_compile(k, NULL);
    const char *e = pk_kernel_error(k);
    const char *on = strstr(e, " on "), *end = on ? strstr(on, "kernel.cu") : NULL;
    path[0] = '\0';
    if (*s == PK_ERR_BACKEND && on && end)
        snprintf(path, path_len, "%.*s", (int)(end + strlen("kernel.cu") - (on + 4)), on + 4);
    return path[0] ? read_text(path) : NULL;
}

/* nvcc as pk finds it (PK_NVCC, PATH, /usr/local/cuda/bin) into out; 0 when there is none. */
static int find_nvcc(char *out, size_t len) {
    const char *env = getenv("PK_NVCC");
    if (env && env[0]) {
        snprintf(out, len, "%s", env);
        return access(env, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        int n = end ? (int)(end - path) : (int)strlen(path);
        snprintf(out, len, "%.*s/nvcc", n, path);
        if (n > 0 && access(out, X_OK) == 0) return 1;
        path = end ? end + 1 : NULL;
    }
    snprintf(out, len, "/usr/local/cuda/bin/nvcc");
    return access(out, X_OK) == 0;
}

static int have_nvcc(void) {
    char buf[4096];
    return find_nvcc(buf, sizeof buf);
}

/* The generated kernel (kernel.cu in dir, its sources beside it) compiled again with ptxas's
 * report: the only functions it may keep out of line are the generated dispatch and
 * call-throughs (pk_gen_*), libdevice's helpers (__internal_*) and the runtime's once-per-step
 * planner (runtime.cuh pk_step_advance, __noinline__ so that the worker loop's registers do not
 * pay for it; no task code) and the multi-row steps' tensor-core paths (linear_mma.cuh
 * pk_lin_mma_call, attention_prefill.cuh pk_att_prefill: out of line on purpose, one copy per
 * shape template; checked on the GPU out of line). A GEMV left out of line
 * (pk_lin_tile, pk_lin_rows, pk_dev_*linear) gave wrong results on the GPU, so linear.cuh
 * forces it inline; this keeps it so. */
static void check_out_of_line(const char *dir, const char *tmp) {
    char nvcc[4096], cmd[9000], line[1024];
    if (!find_nvcc(nvcc, sizeof nvcc)) return;
    snprintf(cmd, sizeof cmd,
             "'%s' -O3 -lineinfo -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I'%s' -Xptxas -v -c '%s/kernel.cu' "
             "-o '%s/ptxas_check.o' 2>&1",
             nvcc, dir, dir, tmp);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "run nvcc -Xptxas -v");
    if (!p) return;
    int functions = 0, stray = 0;
    const char *tag = "Function properties for ";
    while (fgets(line, sizeof line, p)) {
        const char *f = strstr(line, tag);
        if (!f) continue;
        f += strlen(tag);
        functions++;
        if (!strstr(f, "pk_gen_") && !strstr(f, "pk_step_advance") && !strstr(f, "pk_lin_mma_call") &&
            !strstr(f, "pk_att_prefill") && strncmp(f, "__internal", 10) != 0) {
            stray++;
            printf("  out of line: %s", f);
        }
    }
    int rc = pclose(p);
    CHECK(rc == 0 && functions > 0, "nvcc -Xptxas -v on %s/kernel.cu: exit %d, %d functions reported", dir, rc, functions);
    CHECK(stray == 0,
          "%d task function(s) kept out of line besides the pk_gen_* call-throughs (each printed as \"out of line: NAME\")",
          stray);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    chmod(p, 0700);
    return remove(p);
}

/* The one subdirectory of the cache holding kernel.so; its path into out. */
static int cached_so(const char *cache, char *out, size_t len) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -d %s/*/kernel.so 2>/dev/null", cache);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int n = 0;
    while (fgets(out, (int)len, p)) n++;
    pclose(p);
    out[strcspn(out, "\n")] = '\0';
    return n;
}

/* PK_TEST_NVCC_EXTRAS=0 (tests/check_all.sh's sanitizer pass): the nvcc run that checks only
 * nvcc's own output — ptxas's out-of-line report — is left to the normal pass of the same run;
 * pk's host code (codegen, the cache, every error path) runs the same either way. */
static int nvcc_extras(void) {
    const char *e = getenv("PK_TEST_NVCC_EXTRAS");
    return !(e && strcmp(e, "0") == 0);
}

int main(void) {
    if (!have_nvcc()) {
        printf("skipped: nvcc not found\n");
        return check_report("cuda_compile");
    }
    for (size_t i = 0; i < sizeof wbuf / sizeof wbuf[0]; i++) wbuf[i] = pk_f32_to_bf16(0.01f * (float)(i % 17));
    setenv("PK_CUDA_ARCH", "sm_90a", 1);
    unsetenv("PK_CUDA_DEBUG"); /* the debug build would change the kernel the cache test expects */
    char tmp[] = "/tmp/pk-test-cuda-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    char cache[256], out[256], path[512];
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);

    /* 1. the first compile runs nvcc and writes kernel.cu, task_graph.json and kernel.so */
    pk_kernel *k = build(cache);
    pk_compile_options opts = {.output_dir = out};
    double t0 = now_s();
    pk_status s = pk_compile(k, &opts);
    double first = now_s() - t0;
    CHECK(s == PK_OK, "compile: %s: %s", pk_status_name(s), pk_kernel_error(k));
    snprintf(path, sizeof path, "%s/kernel.cu", out);
    char *cu = read_text(path);
    snprintf(path, sizeof path, "%s/task_graph.json", out);
    char *json = read_text(path);
    CHECK(cu && json, "kernel.cu and task_graph.json in %s", out);
    if (cu && json) {
        const char *h = strstr(json, "\"hash\":\"");
        char hash[17] = "";
        if (h) snprintf(hash, sizeof hash, "%.16s", h + 8);
        char head[600];
        snprintf(head, sizeof head, "%.590s", cu);
        CHECK(strstr(head, "generated by pk " PK_VERSION_STRING) != NULL, "kernel.cu header names pk's version:\n%s", head);
        char abi[32];
        snprintf(abi, sizeof abi, "task ABI %d", PK_ABI_VERSION);
        CHECK(strstr(head, abi) != NULL, "kernel.cu header names the ABI (%s)", abi);
        CHECK(hash[0] && strstr(head, hash) != NULL, "kernel.cu header names the graph hash '%s'", hash);
        CHECK(strstr(cu, "case 3: { /* L3.attention"),
              "one case per layer, named");
        CHECK(strstr(cu, "#define PK_GEN_END_BY_COUNTER 1"), "the argmax layer, the only one signalling END, ends the step");
        /* both attention layers have D 16, G 2: the early stage's shift is that layout's hdr
         * offset, which the attention task finds its header at (attention_decode.cuh) */
        const int att_off = pk_attd_layout_of(D, HQ / HKV, 0).hdr;
        char att_head[64];
        snprintf(att_head, sizeof att_head, "#define PK_GEN_ATT_HEAD %du ", att_off);
        CHECK(att_off > 0 && strstr(cu, att_head), "kernel.cu has '%s'", att_head);
        /* uneven tiles of the LM head's argmax (grid 3 over 64 logits): each task scans its own
         * columns and numbers them from its own first one */
        CHECK(strstr(cu, "n_tok, (int)(idx * 64 / 3), (int)((idx + 1) * 64 / 3 - idx * 64 / 3), "),
              "the LM head's argmax over uneven tiles: the task's first logit and width");
    }
    free(cu);
    free(json);
    snprintf(path, sizeof path, "%s/kernel.so", out);
    struct stat st1, st2;
    CHECK(stat(path, &st1) == 0 && st1.st_size > 0, "%s exists", path);
    char so[1024] = "";
    CHECK(cached_so(cache, so, sizeof so) == 1, "one kernel.so in the cache %s", cache);
    CHECK(stat(so, &st1) == 0, "cached %s", so);
    pk_kernel_free(k);

    /* 1b. what ptxas keeps out of line (before step 2: the cache keeps kernel.cu beside kernel.so) */
    char so_dir[1024];
    snprintf(so_dir, sizeof so_dir, "%s", so);
    char *slash = strrchr(so_dir, '/');
    if (slash) *slash = '\0';
    if (nvcc_extras())
        check_out_of_line(so_dir, tmp);
    else
        printf("ptxas's out-of-line report skipped (PK_TEST_NVCC_EXTRAS=0)\n");

    /* 2. the same graph again: a cache hit, no nvcc run (the object is not rewritten) */
    k = build(cache);
    t0 = now_s();
    s = pk_compile(k, NULL);
    double second = now_s() - t0;
    CHECK(s == PK_OK, "second compile: %s", pk_kernel_error(k));
    CHECK(second < 5.0 && second < first, "cache hit took %.2f s (first compile %.2f s)", second, first);
    CHECK(stat(so, &st2) == 0 && st2.st_mtim.tv_sec == st1.st_mtim.tv_sec && st2.st_mtim.tv_nsec == st1.st_mtim.tv_nsec,
          "kernel.so untouched by the cache hit");
    CHECK(cached_so(cache, so, sizeof so) == 1, "still one kernel.so in the cache");
    pk_kernel_free(k);

    /* 3. a cache directory others can write is refused */
    char open_dir[300];
    snprintf(open_dir, sizeof open_dir, "%s/open", tmp);
    mkdir(open_dir, 0777);
    chmod(open_dir, 0777);
    k = build(open_dir);
    s = pk_compile(k, NULL);
    CHECK(s == PK_ERR_BACKEND && strstr(pk_kernel_error(k), "writable"), "world-writable cache: %s: %s",
          pk_status_name(s), pk_kernel_error(k));
    pk_kernel_free(k);

    /* 4. nvcc missing */
    char *old_nvcc = getenv("PK_NVCC") ? strdup(getenv("PK_NVCC")) : NULL;
    setenv("PK_NVCC", "/nonexistent/nvcc", 1);
    k = build(cache);
    s = pk_compile(k, NULL);
    CHECK(s == PK_ERR_BACKEND && strstr(pk_kernel_error(k), "nvcc not found") &&
              strstr(pk_kernel_error(k), "PK_NVCC"),
          "missing nvcc: %s: %s", pk_status_name(s), pk_kernel_error(k));
    pk_kernel_free(k);

    /* 5. nvcc failing: a fake nvcc that answers --version and fails to compile */
    char fake[300];
    snprintf(fake, sizeof fake, "%s/fake-nvcc", tmp);
    FILE *f = fopen(fake, "w");
    if (f) {
        fprintf(f, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake nvcc 0.0; exit 0; fi\n"
                   "echo 'kernel.cu(1): error: this nvcc always fails' >&2\nexit 2\n");
        fclose(f);
    }
    chmod(fake, 0755);
    setenv("PK_NVCC", fake, 1);
    k = build(cache);
    s = pk_compile(k, NULL);
    const char *e = pk_kernel_error(k);
    CHECK(s == PK_ERR_BACKEND && strstr(e, "nvcc failed") && strstr(e, "kernel.cu") && strstr(e, "nvcc.log") &&
              strstr(e, "always fails"),
          "failing nvcc: %s: %s", pk_status_name(s), e);
    pk_kernel_free(k);

    /* 5b. the same failing nvcc, for kernel.cu alone: where the LM head's argmax layer is the only
     * one signalling END, its last task ends the step (PK_GEN_END_BY_COUNTER), and its tasks scan
     * even tiles of 16 logits */
    k = build_lm_only(cache);
    char lm_cu[512];
    char *lm = failed_kernel_cu(k, &s, lm_cu, sizeof lm_cu);
    CHECK(lm && strstr(lm, "#define PK_GEN_END_BY_COUNTER 1") && strstr(lm, "L1.rmsnorm_linear_argmax") &&
              strstr(lm, "n_tok, (int)(idx * 16), 16, "),
          "the LM-head argmax graph's kernel.cu (%s): ends the step by its counter, even tiles: %s", lm_cu,
          pk_kernel_error(k));
    CHECK(lm && strstr(lm, "static constexpr int lin_pace_kb = 48;") && strstr(lm, "lin_wst_lds = true;"),
          "the LM-head graph's tiles stage whole and only it streams: the pace stays at 48 KB");
    free(lm);
    pk_kernel_free(k);

    /* 5c. the same, for a graph whose tiles both stage whole and stream in two layers: codegen
     * paces the streamed ones at 64 KB */
    k = build_paced(cache, 0);
    char paced_cu[512];
    char *pc = failed_kernel_cu(k, &s, paced_cu, sizeof paced_cu);
    CHECK(pc && strstr(pc, "static constexpr int lin_pace_kb = 64;"),
          "the paced graph's kernel.cu (%s) paces at 64 KB: %s", paced_cu, pk_kernel_error(k));
    CHECK(pc && strstr(pc, "attd_bulk_rows = false;"), "no split attention in the paced graph: no bulk-row KV stage");
    free(pc);
    pk_kernel_free(k);
    /* 5d. that shape with a split attention (the 1.7B at long contexts): its KV stage by bulk rows;
     * the every-kind graph (fused MLP: the 0.6B's shape) split too, without them */
    k = build_paced(cache, 1);
    pc = failed_kernel_cu(k, &s, paced_cu, sizeof paced_cu);
    CHECK(pc && strstr(pc, "static constexpr int lin_pace_kb = 64;") && strstr(pc, "attd_bulk_rows = true;"),
          "the paced graph with a split attention (%s) stages its KV rows in bulk: %s", paced_cu, pk_kernel_error(k));
    free(pc);
    pk_kernel_free(k);
    k = build(cache);
    pc = failed_kernel_cu(k, &s, paced_cu, sizeof paced_cu);
    CHECK(pc && strstr(pc, "attention_partial") && strstr(pc, "attd_bulk_rows = false;"),
          "the every-kind graph (%s), split attention and no streamed tile: no bulk-row KV stage", paced_cu);
    CHECK(pc && strstr(pc, "debug_spin_limit_ms = 0u;") && strstr(pc, "debug_stall_task = 4294967295u;"),
          "without PK_CUDA_DEBUG the kernel has no spin limit and no stalled task (%s)", paced_cu);
    free(pc);
    pk_kernel_free(k);
    /* 5e. the debug build (PK_CUDA_DEBUG): its spin limit and stalled task are in kernel.cu's
     * tuning struct, so the cache key (kernel.cu's text) tells the two builds apart */
    setenv("PK_CUDA_DEBUG", "1", 1);
    setenv("PK_CUDA_SPIN_LIMIT_MS", "1234", 1);
    setenv("PK_CUDA_DEBUG_STALL_TASK", "7", 1);
    k = build(cache);
    pc = failed_kernel_cu(k, &s, paced_cu, sizeof paced_cu);
    CHECK(pc && strstr(pc, "debug_spin_limit_ms = 1234u;") && strstr(pc, "debug_stall_task = 7u;"),
          "the debug build's kernel.cu (%s) carries its spin limit and stalled task", paced_cu);
    unsetenv("PK_CUDA_DEBUG");
    unsetenv("PK_CUDA_SPIN_LIMIT_MS");
    unsetenv("PK_CUDA_DEBUG_STALL_TASK");
    free(pc);
    pk_kernel_free(k);
    if (old_nvcc)
        setenv("PK_NVCC", old_nvcc, 1);
    else
        unsetenv("PK_NVCC");
    free(old_nvcc);

    /* 6. a malformed arch */
    setenv("PK_CUDA_ARCH", "compute_90", 1);
    k = build(cache);
    s = pk_compile(k, NULL);
    CHECK(s == PK_ERR_INVALID_ARGUMENT && strstr(pk_kernel_error(k), "PK_CUDA_ARCH"), "bad arch: %s",
          pk_kernel_error(k));
    pk_kernel_free(k);

    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_report("cuda_compile");
}
