// SPDX-License-Identifier: Apache-2.0
/* test_api_errors.c — every misuse of pk.h returns its status and a message naming the tensor
 * and the numbers; nothing aborts. Black-box: only pk.h.
 *
 * Covers bad configs (a sticky error state), tensor constructors, fuse_tensors, every layer's
 * shape/dtype/grid/ownership checks, layer-order rules (written twice, read before written,
 * pk's own state tensors), compile/run state, request validation, tensor_read, the task-graph
 * writer, the NULL-accepting *_free functions and pk_status_name.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pk.h"

/* Backing memory for every attached tensor (pk never writes it). */
static uint16_t g_data[1 << 16];

/* Checks status == want and that the message holds every string of the NULL-ended list. */
static void expect_(int line, pk_kernel *k, const char *what, pk_status got, pk_status want, ...) {
    const char *msg = pk_kernel_error(k);
    CHECK(got == want, "line %d: %s returned %s, expected %s (message: %s)", line, what, pk_status_name(got),
          pk_status_name(want), msg);
    CHECK(pk_kernel_status(k) == want, "line %d: %s: pk_kernel_status %s, expected %s", line, what,
          pk_status_name(pk_kernel_status(k)), pk_status_name(want));
    va_list ap;
    va_start(ap, want);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        CHECK(strstr(msg, s) != NULL, "line %d: %s: message \"%s\" does not contain \"%s\"", line, what, msg, s);
    va_end(ap);
}
#define EXPECT(k, call, want, ...) expect_(__LINE__, (k), #call, (call), (want), __VA_ARGS__, (const char *)NULL)
/* For calls returning a handle: NULL, and the kernel's status. */
#define EXPECT_NULL(k, call, want, ...)                                                                  \
    do {                                                                                                  \
        const void *p_ = (call);                                                                          \
        CHECK(p_ == NULL, "line %d: %s returned a handle", __LINE__, #call);                              \
        expect_(__LINE__, (k), #call, pk_kernel_status(k), (want), __VA_ARGS__, (const char *)NULL);      \
    } while (0)
#define OK(k, call)                                                                                       \
    do {                                                                                                  \
        pk_status s_ = (call);                                                                            \
        CHECK(s_ == PK_OK, "line %d: %s -> %s: %s", __LINE__, #call, pk_status_name(s_), pk_kernel_error(k)); \
    } while (0)

enum { T = 8, H = 16, V = 32, I = 12, R = 2, MAXLEN = 64, PAGE = 4, PAGES = 40 };

static pk_config small_config(void) {
    pk_config c = pk_config_default();
    c.max_seq_length = MAXLEN;
    c.max_requests = R;
    c.max_tokens_per_step = T;
    c.page_size = PAGE;
    c.num_pages = PAGES;
    c.num_workers = 2;
    return c;
}

static pk_kernel *kernel(void) {
    pk_config c = small_config();
    pk_kernel *k = pk_kernel_new(&c);
    CHECK(k && pk_kernel_status(k) == PK_OK, "kernel_new: %s", pk_kernel_error(k));
    return k;
}

static pk_tensor *attach(pk_kernel *k, const char *name, pk_dtype dt, int ndim, int64_t d0, int64_t d1) {
    int64_t dims[2] = {d0, d1};
    pk_tensor *t = pk_attach_input(k, name, dt, ndim, dims, NULL, g_data);
    CHECK(t != NULL, "attach %s: %s", name, pk_kernel_error(k));
    return t;
}
static pk_tensor *w2(pk_kernel *k, const char *name, int64_t d0, int64_t d1) {
    return attach(k, name, PK_DTYPE_BF16, 2, d0, d1);
}
static pk_tensor *w1(pk_kernel *k, const char *name, int64_t d0) { return attach(k, name, PK_DTYPE_BF16, 1, d0, 0); }
static pk_tensor *act(pk_kernel *k, const char *name, int64_t cols) {
    int64_t dims[2] = {T, cols};
    pk_tensor *t = pk_new_tensor(k, name, PK_DTYPE_BF16, 2, dims, PK_IO_LOCAL);
    CHECK(t != NULL, "new_tensor %s: %s", name, pk_kernel_error(k));
    return t;
}

/* ---- config ---------------------------------------------------------------------------- */

/* A kernel in the error state refuses everything with its status. */
static void check_sticky(pk_kernel *k, pk_status st, const char *msg_part) {
    CHECK(k != NULL, "kernel_new returned NULL");
    if (!k) return;
    CHECK(pk_kernel_status(k) == st, "config error: status %s, expected %s (%s)", pk_status_name(pk_kernel_status(k)),
          pk_status_name(st), pk_kernel_error(k));
    CHECK(strstr(pk_kernel_error(k), msg_part) != NULL, "config error message \"%s\" lacks \"%s\"", pk_kernel_error(k),
          msg_part);
    int64_t d[2] = {4, 4};
    CHECK(pk_attach_input(k, "x", PK_DTYPE_BF16, 2, d, NULL, g_data) == NULL && pk_kernel_status(k) == st,
          "attach on an error kernel");
    CHECK(pk_new_tensor(k, "y", PK_DTYPE_BF16, 2, d, PK_IO_LOCAL) == NULL && pk_kernel_status(k) == st,
          "new_tensor on an error kernel");
    CHECK(pk_step_tokens(k) == NULL && pk_step_output(k) == NULL, "step tensors of an error kernel");
    CHECK(pk_linear_layer(k, NULL, NULL, NULL, 1) == st, "layer on an error kernel");
    CHECK(pk_argmax_layer(k, NULL, NULL, 1) == st, "argmax on an error kernel");
    CHECK(pk_compile(k, NULL) == st, "compile on an error kernel");
    pk_request r = {0};
    CHECK(pk_run(k, &r, 1, NULL, NULL) == st, "run on an error kernel");
    CHECK(pk_write_task_graph(k, "/tmp/never.json") == st, "write_task_graph on an error kernel");
    char buf[4];
    CHECK(pk_tensor_read(k, NULL, buf, 4) == st, "tensor_read on an error kernel");
    CHECK(pk_kernel_status(k) == st && strstr(pk_kernel_error(k), msg_part) != NULL,
          "config error not sticky: %s", pk_kernel_error(k));
    pk_kernel_free(k);
}

static void test_config(void) {
    check_sticky(pk_kernel_new(NULL), PK_ERR_INVALID_ARGUMENT, "NULL");
    const struct {
        const char *field;
        int64_t value;
        const char *msg;
    } bad[] = {
        {"world_size", 0, "world_size 0"},
        {"world_size", 2, "world_size 2"},
        {"rank", 1, "rank 1"},
        {"rank", -1, "rank -1"},
        {"num_workers", -1, "num_workers -1"},
        {"num_workers", 1025, "num_workers 1025"},
        {"num_local_schedulers", 0, "num_local_schedulers 0"},
        {"num_local_schedulers", 65, "num_local_schedulers 65"},
        {"num_remote_schedulers", 1, "num_remote_schedulers 1"},
        {"max_seq_length", 1, "max_seq_length 1"},
        {"max_seq_length", (1 << 24) + 1, "max_seq_length 16777217"},
        {"max_seq_length", INT_MAX, "max_seq_length 2147483647"},
        {"max_requests", 0, "max_requests 0"},
        {"max_requests", 4097, "max_requests 4097"},
        {"max_tokens_per_step", R - 1, "max_tokens_per_step 1"},
        {"max_tokens_per_step", 65537, "max_tokens_per_step 65537"},
        {"page_size", 0, "page_size 0"},
        {"page_size", 4097, "page_size 4097"},
        {"num_pages", -1, "num_pages -1"},
        {"num_pages", (1 << 24) + 1, "num_pages 16777217"},
        {"eos_token_id", -2, "eos_token_id -2"},
        {"eos_token_id", INT64_MAX, "eos_token_id"},
        {"sched_mode", 2, "sched_mode 2"},
        {"backend", 7, "backend 7"},
        {"attention_kv_splits", -1, "attention_kv_splits -1"},
        {"attention_kv_splits", 4097, "attention_kv_splits 4097"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pk_config c = small_config();
        int v = (int)bad[i].value;
        const char *f = bad[i].field;
        if (!strcmp(f, "world_size")) c.world_size = v;
        else if (!strcmp(f, "rank")) c.rank = v;
        else if (!strcmp(f, "num_workers")) c.num_workers = v;
        else if (!strcmp(f, "num_local_schedulers")) c.num_local_schedulers = v;
        else if (!strcmp(f, "num_remote_schedulers")) c.num_remote_schedulers = v;
        else if (!strcmp(f, "max_seq_length")) c.max_seq_length = v;
        else if (!strcmp(f, "max_requests")) c.max_requests = v;
        else if (!strcmp(f, "max_tokens_per_step")) c.max_tokens_per_step = v;
        else if (!strcmp(f, "page_size")) c.page_size = v;
        else if (!strcmp(f, "num_pages")) c.num_pages = v;
        else if (!strcmp(f, "eos_token_id")) c.eos_token_id = bad[i].value;
        else if (!strcmp(f, "sched_mode")) c.sched_mode = (pk_sched_mode)v;
        else if (!strcmp(f, "backend")) c.backend = (pk_backend)v;
        else if (!strcmp(f, "attention_kv_splits")) c.attention_kv_splits = v;
        if (!strcmp(f, "max_seq_length")) c.num_pages = 0; /* pages derived from it */
        check_sticky(pk_kernel_new(&c), PK_ERR_INVALID_ARGUMENT, bad[i].msg);
    }
    /* Derived page counts that overflow int must be an error, not undefined behaviour. */
    pk_config c = small_config();
    c.max_requests = 4096;
    c.max_tokens_per_step = 4096;
    c.page_size = 1;
    c.max_seq_length = 1 << 24;
    c.num_pages = 0;
    check_sticky(pk_kernel_new(&c), PK_ERR_INVALID_ARGUMENT, "num_pages");
    c = small_config();
    c.num_pages = 1 << 24;
    c.page_size = 4096;
    check_sticky(pk_kernel_new(&c), PK_ERR_INVALID_ARGUMENT, "too large");

    /* A path the kernel cannot hold whole is refused, not cut to another path. */
    static char long_path[1100];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[0] = '/';
    c = small_config();
    c.trace_path = long_path;
    check_sticky(pk_kernel_new(&c), PK_ERR_INVALID_ARGUMENT, "trace_path");
    c = small_config();
    c.cache_dir = long_path;
    check_sticky(pk_kernel_new(&c), PK_ERR_INVALID_ARGUMENT, "cache_dir");

    /* The kernel copies the config's strings. */
    char trace[64] = "/tmp/pk_api_trace.json";
    c = small_config();
    c.trace_path = trace;
    pk_kernel *k = pk_kernel_new(&c);
    trace[0] = 'X';
    CHECK(k && pk_kernel_status(k) == PK_OK && pk_kernel_config(k)->trace_path &&
              strcmp(pk_kernel_config(k)->trace_path, "/tmp/pk_api_trace.json") == 0 &&
              pk_kernel_config(k)->num_pages == PAGES,
          "config copy");
    pk_kernel_free(k);
    /* num_pages 0: enough for max_requests full-length requests. */
    c = small_config();
    c.num_pages = 0;
    k = pk_kernel_new(&c);
    CHECK(pk_kernel_config(k)->num_pages == R * MAXLEN / PAGE, "derived num_pages %d", pk_kernel_config(k)->num_pages);
    pk_kernel_free(k);

    CHECK(pk_kernel_status(NULL) == PK_ERR_INVALID_ARGUMENT && pk_kernel_error(NULL) != NULL &&
              pk_kernel_config(NULL) == NULL,
          "NULL kernel queries");
    pk_graph_stats st;
    CHECK(pk_kernel_stats(NULL, &st) == PK_ERR_INVALID_ARGUMENT, "stats NULL");
}

/* ---- tensors ----------------------------------------------------------------------------- */

static void test_tensors(void) {
    pk_kernel *k = kernel();
    int64_t d46[2] = {4, 6}, s_col[2] = {1, 4}, s_row[2] = {6, 1}, s_pad[2] = {8, 1};
    EXPECT_NULL(k, pk_attach_input(k, "colmajor", PK_DTYPE_BF16, 2, d46, s_col, g_data), PK_ERR_STRIDE, "colmajor",
                "[1, 4]", "[4, 6]");
    EXPECT_NULL(k, pk_attach_input(k, "padded", PK_DTYPE_BF16, 2, d46, s_pad, g_data), PK_ERR_STRIDE, "padded", "[8, 1]");
    pk_tensor *rm = pk_attach_input(k, "rowmajor", PK_DTYPE_BF16, 2, d46, s_row, g_data);
    CHECK(rm && pk_kernel_status(k) == PK_OK && pk_kernel_error(k)[0] == '\0', "explicit row-major strides: %s",
          pk_kernel_error(k));
    CHECK(pk_tensor_ndim(rm) == 2 && pk_tensor_dim(rm, 0) == 4 && pk_tensor_dim(rm, 1) == 6 && pk_tensor_dim(rm, 2) == 0 &&
              pk_tensor_dim(rm, -1) == 0 && pk_tensor_dtype(rm) == PK_DTYPE_BF16 && !strcmp(pk_tensor_name(rm), "rowmajor") &&
              pk_find_tensor(k, "rowmajor") == rm && pk_find_tensor(k, "nope") == NULL,
          "tensor queries");
    CHECK(pk_tensor_ndim(NULL) == 0 && pk_tensor_dim(NULL, 0) == 0 && !strcmp(pk_tensor_name(NULL), "") &&
              pk_find_tensor(NULL, "x") == NULL && pk_find_tensor(k, NULL) == NULL,
          "NULL tensor queries");
    EXPECT_NULL(k, pk_attach_input(k, "nodata", PK_DTYPE_BF16, 2, d46, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "nodata",
                "NULL");
    /* misaligned elements: the kernels load whole bf16 / int32 values (UB otherwise) */
    EXPECT_NULL(k, pk_attach_input(k, "odd_bf16", PK_DTYPE_BF16, 2, d46, NULL, (const char *)g_data + 1),
                PK_ERR_INVALID_ARGUMENT, "odd_bf16", "aligned", "2 bytes");
    EXPECT_NULL(k, pk_attach_input(k, "odd_i32", PK_DTYPE_INT32, 2, d46, NULL, g_data + 1), PK_ERR_INVALID_ARGUMENT,
                "odd_i32", "int32", "4 bytes");
    EXPECT_NULL(k, pk_attach_input(k, "baddtype", (pk_dtype)42, 2, d46, NULL, g_data), PK_ERR_DTYPE, "baddtype", "42");
    EXPECT_NULL(k, pk_attach_input(k, "baddtype2", (pk_dtype)-1, 2, d46, NULL, g_data), PK_ERR_DTYPE, "baddtype2", "-1");
    EXPECT_NULL(k, pk_attach_input(k, "nd0", PK_DTYPE_BF16, 0, d46, NULL, g_data), PK_ERR_SHAPE, "nd0", "ndim 0");
    int64_t d5[5] = {1, 1, 1, 1, 1};
    EXPECT_NULL(k, pk_attach_input(k, "nd5", PK_DTYPE_BF16, 5, d5, NULL, g_data), PK_ERR_SHAPE, "nd5", "ndim 5");
    int64_t dz[2] = {4, 0}, dn[2] = {-3, 4};
    EXPECT_NULL(k, pk_attach_input(k, "dim0", PK_DTYPE_BF16, 2, dz, NULL, g_data), PK_ERR_SHAPE, "dim0", "dim 1 is 0");
    EXPECT_NULL(k, pk_attach_input(k, "dimneg", PK_DTYPE_BF16, 2, dn, NULL, g_data), PK_ERR_SHAPE, "dimneg", "-3");
    EXPECT_NULL(k, pk_attach_input(k, "nodims", PK_DTYPE_BF16, 2, NULL, NULL, g_data), PK_ERR_INVALID_ARGUMENT, "nodims");
    EXPECT_NULL(k, pk_attach_input(k, "rowmajor", PK_DTYPE_BF16, 2, d46, NULL, g_data), PK_ERR_INVALID_ARGUMENT,
                "rowmajor", "exists");
    EXPECT_NULL(k, pk_attach_input(k, NULL, PK_DTYPE_BF16, 2, d46, NULL, g_data), PK_ERR_INVALID_ARGUMENT, "name");
    EXPECT_NULL(k, pk_attach_input(k, "", PK_DTYPE_BF16, 2, d46, NULL, g_data), PK_ERR_INVALID_ARGUMENT, "name");
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    EXPECT_NULL(k, pk_attach_input(k, longname, PK_DTYPE_BF16, 2, d46, NULL, g_data), PK_ERR_INVALID_ARGUMENT, "longer");
    int64_t huge[4] = {1 << 20, 1 << 20, 1 << 20, 2};
    EXPECT_NULL(k, pk_attach_input(k, "huge", PK_DTYPE_BF16, 4, huge, NULL, g_data), PK_ERR_SHAPE, "huge", "2^40");
    CHECK(pk_attach_input(NULL, "x", PK_DTYPE_BF16, 2, d46, NULL, g_data) == NULL, "attach on NULL kernel");

    EXPECT_NULL(k, pk_new_tensor(k, "badcat", PK_DTYPE_BF16, 2, d46, (pk_io_category)5), PK_ERR_INVALID_ARGUMENT,
                "badcat", "category 5");
    EXPECT_NULL(k, pk_new_tensor(k, "badcat2", PK_DTYPE_BF16, 2, d46, (pk_io_category)-1), PK_ERR_INVALID_ARGUMENT,
                "badcat2", "-1");
    EXPECT_NULL(k, pk_new_tensor(k, "newdt", (pk_dtype)9, 2, d46, PK_IO_LOCAL), PK_ERR_DTYPE, "newdt", "9");
    EXPECT_NULL(k, pk_new_tensor(k, "new0", PK_DTYPE_BF16, 2, dz, PK_IO_LOCAL), PK_ERR_SHAPE, "new0");
    pk_tensor *own = pk_new_tensor(k, "owned", PK_DTYPE_BF16, 2, d46, PK_IO_SHARED);
    CHECK(own != NULL, "new_tensor shared: %s", pk_kernel_error(k));
    CHECK(pk_new_tensor(NULL, "x", PK_DTYPE_BF16, 2, d46, PK_IO_LOCAL) == NULL, "new_tensor on NULL kernel");

    /* fuse_tensors */
    pk_tensor *a = w2(k, "fa", 8, 6), *b = w2(k, "fb", 4, 6), *c = w2(k, "fc", 4, 5), *e = w2(k, "fe", 6, 6);
    pk_tensor *f32 = attach(k, "ff32", PK_DTYPE_FP32, 2, 4, 6);
    pk_tensor *ab[2] = {a, b}, *ac[2] = {a, c}, *ae[2] = {a, e}, *af[2] = {a, f32}, *aown[2] = {a, own};
    pk_tensor *anull[2] = {a, NULL}, *five[5] = {a, b, a, b, a};
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_inner", ac, 2, 0, 1), PK_ERR_SHAPE, "f_inner", "fc", "[4, 5]", "fa", "[8, 6]");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_dtype", af, 2, 0, 1), PK_ERR_SHAPE, "f_dtype", "ff32", "fp32");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_groups", ae, 2, 0, 4), PK_ERR_GRID, "f_groups", "num_groups 4", "6", "fe");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_groups0", ab, 2, 0, 0), PK_ERR_GRID, "f_groups0", "num_groups 0");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_n0", ab, 0, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_n0", "0 inputs");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_n5", five, 5, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_n5", "5 inputs");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_nullarr", NULL, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_nullarr");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_dim1", ab, 2, 1, 1), PK_ERR_INVALID_ARGUMENT, "f_dim1", "fused_dim 1");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_owned", aown, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_owned", "owned");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_null", anull, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_null", "input 1");
    EXPECT_NULL(k, pk_fuse_tensors(k, "fa", ab, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "fa", "exists");
    pk_tensor *fused = pk_fuse_tensors(k, "f_ok", ab, 2, 0, 2);
    CHECK(fused && pk_tensor_dim(fused, 0) == 12 && pk_tensor_dim(fused, 1) == 6, "fuse ok: %s", pk_kernel_error(k));
    pk_tensor *ff[2] = {fused, a};
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_of_fused", ff, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_of_fused", "f_ok");
    /* An attached tensor of another kernel cannot be fused here. */
    pk_kernel *k2 = kernel();
    pk_tensor *other = w2(k2, "other", 4, 6);
    for (int i = 0; i < 40; i++) { /* make its id valid in k2 only */
        char n[16];
        snprintf(n, sizeof n, "pad%d", i);
        w1(k2, n, 4);
    }
    pk_tensor *late = w2(k2, "late", 4, 6), *ao[2] = {a, other}, *al[2] = {a, late};
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_other", ao, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_other", "other", "another kernel");
    EXPECT_NULL(k, pk_fuse_tensors(k, "f_late", al, 2, 0, 1), PK_ERR_INVALID_ARGUMENT, "f_late", "late", "another kernel");
    /* tensor_read */
    uint16_t buf[128];
    EXPECT(k, pk_tensor_read(k, rm, buf, 10), PK_ERR_SHAPE, "rowmajor", "10", "48");
    EXPECT(k, pk_tensor_read(k, rm, NULL, 48), PK_ERR_INVALID_ARGUMENT, "NULL");
    EXPECT(k, pk_tensor_read(k, NULL, buf, 48), PK_ERR_INVALID_ARGUMENT, "NULL");
    EXPECT(k, pk_tensor_read(k, late, buf, 48), PK_ERR_INVALID_ARGUMENT, "late", "another kernel");
    OK(k, pk_tensor_read(k, rm, buf, 48));
    EXPECT(k, pk_tensor_read(k, fused, buf, 10), PK_ERR_SHAPE, "f_ok", "144");
    OK(k, pk_tensor_read(k, fused, buf, 144));
    CHECK(pk_tensor_read(NULL, rm, buf, 48) == PK_ERR_INVALID_ARGUMENT, "tensor_read NULL kernel");
    pk_kernel_free(k2);
    pk_kernel_free(k);
}

/* ---- layers ------------------------------------------------------------------------------ */

static void test_layers(void) {
    pk_kernel *k = kernel(), *k2 = kernel();
    pk_tensor *emb = w2(k, "embed", V, H), *h = act(k, "h", H), *tok = pk_step_tokens(k);
    pk_tensor *foreign = act(k2, "foreign", H);
    pk_tensor *tok_bf16 = attach(k, "tok_bf16", PK_DTYPE_BF16, 1, T, 0);
    pk_tensor *tok_long = attach(k, "tok_long", PK_DTYPE_INT32, 1, T + 1, 0);
    pk_tensor *h17 = act(k, "h17", H + 1), *emb1d = w1(k, "emb1d", H);

    /* embedding */
    EXPECT(k, pk_embedding_layer(k, tok_bf16, emb, h, 1), PK_ERR_DTYPE, "tokens", "tok_bf16", "bf16", "int32");
    EXPECT(k, pk_embedding_layer(k, tok_long, emb, h, 1), PK_ERR_SHAPE, "tok_long", "[9]", "[8]");
    /* ids of any other int32 [T] tensor are not checked against V: the kernel would read out of bounds */
    pk_tensor *tok_mine = attach(k, "tok_mine", PK_DTYPE_INT32, 1, T, 0);
    EXPECT(k, pk_embedding_layer(k, tok_mine, emb, h, 1), PK_ERR_INVALID_ARGUMENT, "tok_mine", "pk_step_tokens");
    EXPECT(k, pk_embedding_layer(k, tok, emb1d, h, 1), PK_ERR_SHAPE, "emb1d", "[16]");
    EXPECT(k, pk_embedding_layer(k, tok, emb, h17, 1), PK_ERR_SHAPE, "h17", "[8, 17]", "[8, 16]");
    EXPECT(k, pk_embedding_layer(k, tok, emb, h, 0), PK_ERR_GRID, "grid 0");
    EXPECT(k, pk_embedding_layer(k, tok, emb, h, -2), PK_ERR_GRID, "grid -2");
    EXPECT(k, pk_embedding_layer(k, tok, emb, h, 3), PK_ERR_GRID, "grid 3", "16");
    EXPECT(k, pk_embedding_layer(k, tok, emb, h, 32), PK_ERR_GRID, "grid 32", "16");
    EXPECT(k, pk_embedding_layer(k, NULL, emb, h, 1), PK_ERR_INVALID_ARGUMENT, "tokens", "NULL");
    EXPECT(k, pk_embedding_layer(k, tok, NULL, h, 1), PK_ERR_INVALID_ARGUMENT, "weight", "NULL");
    EXPECT(k, pk_embedding_layer(k, tok, emb, NULL, 1), PK_ERR_INVALID_ARGUMENT, "out", "NULL");
    EXPECT(k, pk_embedding_layer(k, tok, emb, foreign, 1), PK_ERR_INVALID_ARGUMENT, "foreign", "another kernel");
    pk_tensor *hatt = w2(k, "h_attached", T, H);
    EXPECT(k, pk_embedding_layer(k, tok, emb, hatt, 1), PK_ERR_INVALID_ARGUMENT, "h_attached");
    CHECK(pk_embedding_layer(NULL, tok, emb, h, 1) == PK_ERR_INVALID_ARGUMENT, "layer on NULL kernel");
    pk_tensor *emb_halves[2] = {w2(k, "emb_lo", V / 2, H), w2(k, "emb_hi", V / 2, H)};
    pk_tensor *emb_fused = pk_fuse_tensors(k, "emb_fused", emb_halves, 2, 0, 1);
    EXPECT(k, pk_embedding_layer(k, tok, emb_fused, h, 1), PK_ERR_INVALID_ARGUMENT, "weight 'emb_fused'", "fused",
           "split by rows", "dim 1");
    OK(k, pk_embedding_layer(k, tok, emb, h, 4));
    CHECK(pk_kernel_status(k) == PK_OK && pk_kernel_error(k)[0] == '\0', "success clears the error");
    pk_tensor *h_b = act(k, "h_b", H), *emb2 = w2(k, "embed2", V + 1, H);
    EXPECT(k, pk_embedding_layer(k, tok, emb2, h_b, 1), PK_ERR_SHAPE, "embed2", "33", "32");
    EXPECT(k, pk_embedding_layer(k, tok, emb, h, 1), PK_ERR_INVALID_ARGUMENT, "'h'", "written by layer L0.embedding");

    /* rmsnorm */
    pk_tensor *nw = w1(k, "nw", H), *nw17 = w1(k, "nw17", H + 1), *n = act(k, "n", H);
    EXPECT(k, pk_rmsnorm_layer(k, h, nw17, n, 1e-6f, 1), PK_ERR_SHAPE, "nw17", "[17]", "[16]");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, h17, 1e-6f, 1), PK_ERR_SHAPE, "h17", "[8, 17]", "[8, 16]");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, n, 0.0f, 1), PK_ERR_INVALID_ARGUMENT, "eps 0");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, n, -1.0f, 1), PK_ERR_INVALID_ARGUMENT, "eps -1");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, n, 1e-6f, 3), PK_ERR_GRID, "grid 3", "(8)");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, n, 1e-6f, 16), PK_ERR_GRID, "grid 16", "(8)");
    pk_tensor *x_f32 = pk_new_tensor(k, "x_f32", PK_DTYPE_FP32, 2, (int64_t[]){T, H}, PK_IO_LOCAL);
    EXPECT(k, pk_rmsnorm_layer(k, x_f32, nw, n, 1e-6f, 1), PK_ERR_DTYPE, "x_f32", "fp32", "bf16");
    pk_tensor *x_t9 = pk_new_tensor(k, "x_t9", PK_DTYPE_BF16, 2, (int64_t[]){T + 1, H}, PK_IO_LOCAL);
    EXPECT(k, pk_rmsnorm_layer(k, x_t9, nw, n, 1e-6f, 1), PK_ERR_SHAPE, "x_t9", "[9, 16]", "[8, *]");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, h, 1e-6f, 1), PK_ERR_INVALID_ARGUMENT, "'h'");
    OK(k, pk_rmsnorm_layer(k, h, nw, n, 1e-6f, 2));

    /* rmsnorm_linear */
    pk_tensor *wl = w2(k, "wl", 24, H), *wl_k = w2(k, "wl_k", 24, H + 1), *o24 = act(k, "o24", 24), *o25 = act(k, "o25", 25);
    pk_tensor *wl_f32 = attach(k, "wl_f32", PK_DTYPE_FP32, 2, 24, H);
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw17, wl, o24, 1e-6f, 1), PK_ERR_SHAPE, "nw17", "[17]", "[16]");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw, wl_k, o24, 1e-6f, 1), PK_ERR_SHAPE, "wl_k", "[24, 17]", "[*, 16]");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw, wl, o25, 1e-6f, 1), PK_ERR_SHAPE, "o25", "[8, 25]", "[8, 24]");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw, wl_f32, o24, 1e-6f, 1), PK_ERR_DTYPE, "wl_f32", "fp32");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw, wl, o24, 1e-6f, 25), PK_ERR_GRID, "grid 25", "exceeds", "(24)");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw, wl, o24, 1e-6f, 0), PK_ERR_GRID, "grid 0");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, NULL, wl, o24, 1e-6f, 1), PK_ERR_INVALID_ARGUMENT, "norm weight", "NULL");
    EXPECT(k, pk_rmsnorm_linear_layer(k, n, nw, wl, o24, NAN, 1), PK_ERR_INVALID_ARGUMENT, "eps");
    OK(k, pk_rmsnorm_linear_layer(k, n, nw, wl, o24, 1e-6f, 5)); /* tiles of 4 and 5 rows */

    /* linear */
    pk_tensor *wlin = w2(k, "wlin", H, 24), *a16 = act(k, "a16", H), *wlin_k = w2(k, "wlin_k", H, 23);
    EXPECT(k, pk_linear_layer(k, o24, wlin_k, a16, 1), PK_ERR_SHAPE, "wlin_k", "[16, 23]", "[*, 24]");
    EXPECT(k, pk_linear_layer(k, o24, wlin, h17, 1), PK_ERR_SHAPE, "h17", "[8, 17]", "[8, 16]");
    EXPECT(k, pk_linear_layer(k, x_f32, wlin, a16, 1), PK_ERR_DTYPE, "x_f32", "fp32");
    EXPECT(k, pk_linear_layer(k, o24, wlin, a16, 17), PK_ERR_GRID, "grid 17", "(16)");
    EXPECT(k, pk_linear_layer(k, o24, wlin, foreign, 1), PK_ERR_INVALID_ARGUMENT, "foreign", "another kernel");
    EXPECT(k, pk_linear_layer(k, o24, w2(k, "wsq", 24, 24), o24, 1), PK_ERR_INVALID_ARGUMENT, "o24");
    OK(k, pk_linear_layer(k, o24, wlin, a16, 8));

    /* linear_with_residual: out = a16 · Wᵀ + n  ([T, 16]) */
    pk_tensor *wr = w2(k, "wr", H, H), *r = act(k, "r", H);
    EXPECT(k, pk_linear_with_residual_layer(k, a16, wr, h17, r, 1), PK_ERR_SHAPE, "residual", "h17", "[8, 17]", "[8, 16]");
    EXPECT(k, pk_linear_with_residual_layer(k, a16, wr, NULL, r, 1), PK_ERR_INVALID_ARGUMENT, "residual", "NULL");
    EXPECT(k, pk_linear_with_residual_layer(k, a16, wr, n, r, 17), PK_ERR_GRID, "grid 17", "(16)");
    EXPECT(k, pk_linear_with_residual_layer(k, a16, wr, n, n, 1), PK_ERR_INVALID_ARGUMENT, "'n'");
    OK(k, pk_linear_with_residual_layer(k, a16, wr, h, r, 3)); /* tiles of 5 and 6 rows */

    /* silu_mul: x [T, 2I] → [T, I] */
    pk_tensor *gu = act(k, "gu", 2 * I), *gu_odd = act(k, "gu_odd", 2 * I + 1), *m = act(k, "m", I), *m13 = act(k, "m13", I + 1);
    OK(k, pk_rmsnorm_linear_layer(k, r, w1(k, "nw_gu", H), w2(k, "wgu", 2 * I, H), gu, 1e-6f, 4));
    EXPECT(k, pk_silu_mul_layer(k, gu_odd, m, 1), PK_ERR_SHAPE, "gu_odd", "25");
    EXPECT(k, pk_silu_mul_layer(k, gu, m13, 1), PK_ERR_SHAPE, "m13", "[8, 13]", "[8, 12]");
    EXPECT(k, pk_silu_mul_layer(k, gu, m, 5), PK_ERR_GRID, "grid 5", "12");
    EXPECT(k, pk_silu_mul_layer(k, gu, NULL, 1), PK_ERR_INVALID_ARGUMENT, "out", "NULL");
    /* silu_mul_linear_with_residual: x [T, 2I], W [N, I], residual/out [T, N] */
    pk_tensor *wd = w2(k, "wd", H, I), *wd_k = w2(k, "wd_k", H, 2 * I), *r2 = act(k, "r2", H);
    EXPECT(k, pk_silu_mul_linear_with_residual_layer(k, gu_odd, wd, r, r2, 1), PK_ERR_SHAPE, "gu_odd", "25");
    EXPECT(k, pk_silu_mul_linear_with_residual_layer(k, gu, wd_k, r, r2, 1), PK_ERR_SHAPE, "wd_k", "[16, 24]",
           "[*, 12]");
    EXPECT(k, pk_silu_mul_linear_with_residual_layer(k, gu, wd, h17, r2, 1), PK_ERR_SHAPE, "h17", "[8, 16]");
    EXPECT(k, pk_silu_mul_linear_with_residual_layer(k, gu, wd, r, r2, 17), PK_ERR_GRID, "grid 17", "(16)");
    OK(k, pk_silu_mul_linear_with_residual_layer(k, gu, wd, r, r2, 2));

    /* A tensor written twice; a tensor read by a layer before a later layer writes it. */
    pk_tensor *later = act(k, "later", H), *tmp = act(k, "tmp", H);
    EXPECT(k, pk_linear_layer(k, r2, wr, r, 1), PK_ERR_INVALID_ARGUMENT, "'r'", "written by layer", "linear_with_residual");
    OK(k, pk_linear_layer(k, later, wr, tmp, 1)); /* reads 'later' as an input (zeros) */
    EXPECT(k, pk_linear_layer(k, r2, wr, later, 1), PK_ERR_INVALID_ARGUMENT, "later", "read by");

    /* argmax */
    pk_tensor *lg = act(k, "logits", V), *lg_f32 = pk_new_tensor(k, "lg_f32", PK_DTYPE_FP32, 2, (int64_t[]){T, V}, PK_IO_LOCAL);
    pk_tensor *out_bf16 = attach(k, "out_bf16", PK_DTYPE_BF16, 1, T, 0);
    pk_tensor *out_t9 = pk_new_tensor(k, "out_t9", PK_DTYPE_INT32, 1, (int64_t[]){T + 1}, PK_IO_LOCAL);
    pk_tensor *out_att = attach(k, "out_attached", PK_DTYPE_INT32, 1, T, 0);
    OK(k, pk_rmsnorm_linear_layer(k, r2, w1(k, "fn", H), w2(k, "lm", V, H), lg, 1e-6f, 4));
    EXPECT(k, pk_argmax_layer(k, lg_f32, pk_step_output(k), 1), PK_ERR_DTYPE, "lg_f32", "fp32");
    EXPECT(k, pk_argmax_layer(k, lg, out_bf16, 1), PK_ERR_DTYPE, "out_bf16", "bf16", "int32");
    EXPECT(k, pk_argmax_layer(k, lg, out_t9, 1), PK_ERR_SHAPE, "out_t9", "[9]", "[8]");
    EXPECT(k, pk_argmax_layer(k, lg, out_att, 1), PK_ERR_INVALID_ARGUMENT, "out_attached");
    EXPECT(k, pk_argmax_layer(k, lg, pk_step_output(k), 5), PK_ERR_GRID, "grid 5", "32");
    EXPECT(k, pk_argmax_layer(k, lg, NULL, 1), PK_ERR_INVALID_ARGUMENT, "out", "NULL");
    /* pk's own step tensors other than pk_step_output are not layer outputs. */
    EXPECT(k, pk_argmax_layer(k, lg, pk_step_tokens(k), 1), PK_ERR_INVALID_ARGUMENT, "pk.step_tokens");
    pk_tensor *pos = pk_find_tensor(k, "pk.token_pos");
    if (pos) EXPECT(k, pk_argmax_layer(k, lg, pos, 1), PK_ERR_INVALID_ARGUMENT, "pk.token_pos");
    OK(k, pk_argmax_layer(k, lg, pk_step_output(k), 8));
    EXPECT(k, pk_argmax_layer(k, lg, pk_step_output(k), 1), PK_ERR_INVALID_ARGUMENT, "pk.step_output");

    /* attention (Hkv 2, Hq 4, D 8): qkv [T, 2·(2+2)·8 = 64], caches [PAGES, PAGE, 2, 8] */
    pk_tensor *qkv = act(k, "qkv", 64), *qkv65 = act(k, "qkv65", 65), *att = act(k, "att", 32);
    OK(k, pk_rmsnorm_linear_layer(k, tmp, w1(k, "an", H), w2(k, "wqkv", 64, H), qkv, 1e-6f, 2));
    int64_t cd[4] = {PAGES, PAGE, 2, 8}, cd_bad[4] = {PAGES + 1, PAGE, 2, 8};
    pk_tensor *kc = pk_new_tensor(k, "kc", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
    pk_tensor *vc = pk_new_tensor(k, "vc", PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
    pk_tensor *kc_bad = pk_new_tensor(k, "kc_bad", PK_DTYPE_BF16, 4, cd_bad, PK_IO_LOCAL);
    pk_tensor *kc_att = pk_attach_input(k, "kc_attached", PK_DTYPE_BF16, 4, cd, NULL, g_data);
    pk_tensor *qn = w1(k, "qn", 8), *kn = w1(k, "kn", 8), *qn9 = w1(k, "qn9", 9);
    pk_attention_params p = {.num_q_heads = 4, .num_kv_heads = 2, .head_dim = 8, .rope_theta = 1e4f, .qk_norm_eps = 1e-6f};
    pk_attention_params pb = p;
    pb.num_q_heads = 6;
    pb.num_kv_heads = 4;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_SHAPE, "num_q_heads 6", "num_kv_heads 4");
    pb = p;
    pb.num_kv_heads = 0;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_SHAPE, "num_kv_heads 0");
    pb = p;
    pb.head_dim = 7;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_SHAPE, "head_dim 7");
    pb.head_dim = 514;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_SHAPE, "head_dim 514", "512");
    pb = p; /* qkv's width (Hq / Hkv + 2) · D · Hkv in 64 bits: no int overflow (UBSan) */
    pb.num_q_heads = INT_MAX;
    pb.num_kv_heads = 1;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_SHAPE, "'qkv'", "17179869192");
    pb = p;
    pb.rope_theta = 0;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_INVALID_ARGUMENT, "rope_theta 0");
    pb = p;
    pb.rope_scaling = (pk_rope_scaling_type)9;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_INVALID_ARGUMENT, "rope scaling 9");
    pb = p;
    pb.rope_scaling = PK_ROPE_SCALING_LLAMA3;
    pb.rope_factor = 8;
    pb.rope_low_freq_factor = 4;
    pb.rope_high_freq_factor = 1;
    pb.rope_original_max_position = 8192;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_INVALID_ARGUMENT, "llama3", "4", "1");
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, NULL, 1), PK_ERR_INVALID_ARGUMENT, "params");
    pb = p;
    pb.kv_splits = -1;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_INVALID_ARGUMENT, "kv_splits -1");
    pb.kv_splits = 5000;
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &pb, 1), PK_ERR_INVALID_ARGUMENT, "kv_splits 5000",
           "4096");
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, NULL, att, &p, 1), PK_ERR_INVALID_ARGUMENT, "q_norm", "k_norm");
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, NULL, kn, att, &p, 1), PK_ERR_INVALID_ARGUMENT, "q_norm", "k_norm");
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn9, kn, att, &p, 1), PK_ERR_SHAPE, "qn9", "[9]", "[8]");
    EXPECT(k, pk_attention_layer(k, qkv, kc_bad, vc, qn, kn, att, &p, 1), PK_ERR_SHAPE, "kc_bad", "[41, 4, 2, 8]",
           "[40, 4, 2, 8]");
    EXPECT(k, pk_attention_layer(k, qkv, kc, kc_bad, qn, kn, att, &p, 1), PK_ERR_SHAPE, "kc_bad", "[40, 4, 2, 8]");
    EXPECT(k, pk_attention_layer(k, qkv, kc, kc, qn, kn, att, &p, 1), PK_ERR_INVALID_ARGUMENT, "k_cache", "v_cache");
    EXPECT(k, pk_attention_layer(k, qkv, kc_att, vc, qn, kn, att, &p, 1), PK_ERR_INVALID_ARGUMENT, "pk_new_tensor");
    EXPECT(k, pk_attention_layer(k, qkv65, kc, vc, qn, kn, att, &p, 1), PK_ERR_SHAPE, "qkv65", "[8, 65]", "[8, 64]");
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, a16, &p, 1), PK_ERR_SHAPE, "a16", "[8, 16]", "[8, 32]");
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &p, 4), PK_ERR_GRID, "grid 4", "num_kv_heads", "2");
    OK(k, pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &p, 2));
    pk_tensor *att2 = act(k, "att2", 32);
    EXPECT(k, pk_attention_layer(k, qkv, kc, vc, NULL, NULL, att2, &p, 1), PK_ERR_INVALID_ARGUMENT, "KV cache");

    /* compile, then nothing can be added */
    OK(k, pk_compile(k, NULL));
    EXPECT_NULL(k, pk_new_tensor(k, "late_after", PK_DTYPE_BF16, 2, (int64_t[]){T, H}, PK_IO_LOCAL), PK_ERR_STATE,
                "late_after", "compiled");
    EXPECT_NULL(k, pk_attach_input(k, "late_in", PK_DTYPE_BF16, 1, (int64_t[]){H}, NULL, g_data), PK_ERR_STATE,
                "late_in", "compiled");
    EXPECT(k, pk_linear_layer(k, r2, wr, tmp, 1), PK_ERR_STATE, "compiled");
    EXPECT(k, pk_rmsnorm_layer(k, h, nw, n, 1e-6f, 1), PK_ERR_STATE, "compiled");
    EXPECT(k, pk_argmax_layer(k, lg, pk_step_output(k), 1), PK_ERR_STATE, "compiled");
    EXPECT(k, pk_compile(k, NULL), PK_ERR_STATE, "compiled already");
    pk_kernel_free(k);
    pk_kernel_free(k2);

    /* Tensors up to 2^40 elements are fine, but a task's view holds 32-bit rows and columns: a
     * K of 2^31 would reach the kernels as a negative int. */
    k = kernel();
    int64_t big = (int64_t)1 << 31;
    pk_tensor *xb = attach(k, "x_wide", PK_DTYPE_BF16, 2, T, big), *wb = w2(k, "w_wide", 2, big);
    pk_tensor *ob = act(k, "o_narrow", 2);
    EXPECT(k, pk_linear_layer(k, xb, wb, ob, 1), PK_ERR_SHAPE, "x_wide", "2147483648", "2^31");
    pk_kernel_free(k);
}

/* ---- compile, run, write --------------------------------------------------------------- */

/* A tiny valid model: embedding → rmsnorm_linear → argmax (argmax 1), embedding →
 * rmsnorm_linear_argmax (argmax 2), or no argmax (0). */
static pk_kernel *tiny(int argmax, int64_t lm_rows) {
    pk_kernel *k = kernel();
    pk_tensor *h = act(k, "h", H), *lg = act(k, "logits", lm_rows);
    OK(k, pk_embedding_layer(k, pk_step_tokens(k), w2(k, "embed", V, H), h, 2));
    if (argmax == 2) {
        OK(k, pk_rmsnorm_linear_argmax_layer(k, h, w1(k, "fn", H), w2(k, "lm", lm_rows, H), lg, pk_step_output(k),
                                             1e-6f, 3));
        return k;
    }
    OK(k, pk_rmsnorm_linear_layer(k, h, w1(k, "fn", H), w2(k, "lm", lm_rows, H), lg, 1e-6f, 2));
    if (argmax) OK(k, pk_argmax_layer(k, lg, pk_step_output(k), 2));
    return k;
}

/* rmsnorm_linear_argmax, in a kernel of its own: x [T, K], norm [K], W [V, K], logits [T, V] bf16,
 * out int32 [T]. */
static void test_lm_argmax_layer(void) {
    pk_kernel *k = kernel();
    pk_tensor *x = act(k, "xl", H), *nw = w1(k, "nwl", H), *nw17 = w1(k, "nwl17", H + 1), *wl = w2(k, "wl", V, H);
    pk_tensor *wl17 = w2(k, "wl17", V, H + 1), *lg = act(k, "lgl", V), *lg33 = act(k, "lgl33", V + 1);
    pk_tensor *lg_f32 = pk_new_tensor(k, "lgl_f32", PK_DTYPE_FP32, 2, (int64_t[]){T, V}, PK_IO_LOCAL);
    pk_tensor *out_bf16 = pk_new_tensor(k, "outl_bf16", PK_DTYPE_BF16, 1, (int64_t[]){T}, PK_IO_LOCAL);
    pk_tensor *out_t9 = pk_new_tensor(k, "outl_t9", PK_DTYPE_INT32, 1, (int64_t[]){T + 1}, PK_IO_LOCAL);
    pk_tensor *out = pk_step_output(k);
#define LMA(x_, nw_, w_, lg_, out_, eps_, grid_) pk_rmsnorm_linear_argmax_layer(k, x_, nw_, w_, lg_, out_, eps_, grid_)
    EXPECT(k, LMA(NULL, nw, wl, lg, out, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT, "pk_rmsnorm_linear_argmax_layer", "x",
           "NULL");
    EXPECT(k, LMA(x, nw17, wl, lg, out, 1e-6f, 2), PK_ERR_SHAPE, "nwl17", "[17]", "[16]");
    EXPECT(k, LMA(x, nw, wl17, lg, out, 1e-6f, 2), PK_ERR_SHAPE, "wl17", "[32, 17]", "[*, 16]");
    EXPECT(k, LMA(x, nw, wl, lg33, out, 1e-6f, 2), PK_ERR_SHAPE, "logits", "lgl33", "[8, 33]", "[8, 32]");
    EXPECT(k, LMA(x, nw, wl, lg_f32, out, 1e-6f, 2), PK_ERR_DTYPE, "logits", "lgl_f32", "fp32");
    EXPECT(k, LMA(x, nw, wl, lg, out_bf16, 1e-6f, 2), PK_ERR_DTYPE, "outl_bf16", "bf16", "int32");
    EXPECT(k, LMA(x, nw, wl, lg, out_t9, 1e-6f, 2), PK_ERR_SHAPE, "outl_t9", "[9]", "[8]");
    EXPECT(k, LMA(x, nw, wl, lg, NULL, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT, "out", "NULL");
    EXPECT(k, LMA(x, nw, wl, lg, attach(k, "outl_attached", PK_DTYPE_INT32, 1, T, 0), 1e-6f, 2),
           PK_ERR_INVALID_ARGUMENT, "outl_attached", "pk_new_tensor");
    EXPECT(k, LMA(x, nw, wl, lg, pk_step_tokens(k), 1e-6f, 2), PK_ERR_INVALID_ARGUMENT, "pk.step_tokens");
    EXPECT(k, LMA(x, nw, wl, lg, out, 0.0f, 2), PK_ERR_INVALID_ARGUMENT, "eps 0");
    EXPECT(k, LMA(x, nw, wl, lg, out, 1e-6f, 0), PK_ERR_GRID, "grid 0");
    EXPECT(k, LMA(x, nw, wl, lg, out, 1e-6f, V + 1), PK_ERR_GRID, "grid 33", "(32)");
    pk_graph_stats st;
    CHECK(pk_kernel_stats(k, &st) == PK_OK, "stats before the LM-head argmax layer");
    OK(k, LMA(x, nw, wl, lg, out, 1e-6f, 5)); /* any grid up to V: tiles of 6 or 7 logits */
    char name[64];
    snprintf(name, sizeof name, "pk.argmax%d.val", st.num_layers);
    const pk_tensor *val = pk_find_tensor(k, name);
    CHECK(val && pk_tensor_dtype(val) == PK_DTYPE_FP32 && pk_tensor_dim(val, 0) == T && pk_tensor_dim(val, 1) == 5,
          "rmsnorm_linear_argmax makes its partial values %s [8, 5]", name);
    pk_layer_info li;
    CHECK(pk_kernel_layer(k, st.num_layers, &li) == PK_OK && !strcmp(li.kind, "rmsnorm_linear_argmax") && li.grid == 5,
          "the layer's kind and grid");
    EXPECT(k, LMA(x, nw, wl, act(k, "lgl2", V), out, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT, "pk.step_output",
           "written by layer");
    EXPECT(k, pk_argmax_layer(k, lg, out, 1), PK_ERR_INVALID_ARGUMENT, "pk.step_output", "written by layer");
#undef LMA
    pk_kernel_free(k);
}

/* rmsnorm_linear_swiglu, in a kernel of its own (its x is read by no other layer). */
static void test_swiglu_layer(void) {
    pk_kernel *k = kernel();
    pk_tensor *xs = act(k, "xs", H), *nw = w1(k, "nw", H), *nws17 = w1(k, "nws17", H + 1), *m13s = act(k, "m13s", I + 1);
    /* W [2I, K] in blocks of gate / up rows, out [T, I] */
    pk_tensor *wsw = w2(k, "wsw", 2 * I, H), *wsw25 = w2(k, "wsw25", 2 * I + 1, H), *sw = act(k, "sw", I);
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw25, 3, sw, 1e-6f, 2), PK_ERR_SHAPE, "wsw25", "[25, 16]",
           "[24, 16]");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 3, m13s, 1e-6f, 1), PK_ERR_SHAPE, "wsw", "[26, 16]");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nws17, wsw, 3, sw, 1e-6f, 2), PK_ERR_SHAPE, "nws17", "[17]");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 3, sw, 1e-6f, 5), PK_ERR_GRID, "grid 5", "12");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 4, sw, 1e-6f, 2), PK_ERR_GRID, "block 4", "6");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 0, sw, 1e-6f, 2), PK_ERR_GRID, "block 0");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 3, sw, 0.0f, 2), PK_ERR_INVALID_ARGUMENT, "eps 0");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, NULL, wsw, 3, sw, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT,
           "norm weight", "NULL");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 3, w2(k, "sw_attached", T, I), 1e-6f, 2),
           PK_ERR_INVALID_ARGUMENT, "'sw_attached'", "pk_new_tensor");
    pk_graph_stats sw_st;
    CHECK(pk_kernel_stats(k, &sw_st) == PK_OK, "stats before the swiglu layer");
    OK(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 3, sw, 1e-6f, 2));
    char sw_name[64];
    snprintf(sw_name, sizeof sw_name, "pk.swiglu%d.gu", sw_st.num_layers);
    const pk_tensor *sw_gu = pk_find_tensor(k, sw_name);
    CHECK(sw_gu && pk_tensor_dim(sw_gu, 0) == T && pk_tensor_dim(sw_gu, 1) == 2 * I,
          "rmsnorm_linear_swiglu makes its projection tensor %s [8, 24]", sw_name);
    pk_layer_info sw_li;
    CHECK(pk_kernel_layer(k, sw_st.num_layers, &sw_li) == PK_OK && !strcmp(sw_li.kind, "rmsnorm_linear_swiglu") &&
              sw_li.grid == 2,
          "the swiglu layer's kind and grid");
    EXPECT(k, pk_rmsnorm_linear_swiglu_layer(k, xs, nw, wsw, 3, sw, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT, "'sw'",
           "written by layer");
    pk_kernel_free(k);
}

/* linear_splitk_with_residual, in a kernel of its own. x [T, I], W [H, I], residual and out [T, H]. */
static void test_splitk_layer(void) {
    pk_kernel *k = kernel();
    pk_tensor *x = act(k, "xk", I), *res = act(k, "resk", H), *out = act(k, "outk", H);
    pk_tensor *wk = w2(k, "wk", H, I), *wk13 = w2(k, "wk13", H, I + 1), *res17 = act(k, "resk17", H + 1);
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk13, res, out, 2), PK_ERR_SHAPE, "wk13", "[16, 13]",
           "[*, 12]");
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk, res17, out, 2), PK_ERR_SHAPE, "resk17", "[8, 17]");
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk, res, out, 5), PK_ERR_GRID, "grid 5", "K", "12");
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk, res, out, 0), PK_ERR_GRID, "grid 0");
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, NULL, res, out, 2), PK_ERR_INVALID_ARGUMENT, "weight",
           "NULL");
    pk_tensor *halves[2] = {w2(k, "wk_a", H / 2, I), w2(k, "wk_b", H / 2, I)};
    pk_tensor *fused = pk_fuse_tensors(k, "wk_fused", halves, 2, 0, 1);
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, fused, res, out, 2), PK_ERR_INVALID_ARGUMENT, "wk_fused",
           "fused", "column blocks");
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk, res, w2(k, "outk_attached", T, H), 2),
           PK_ERR_INVALID_ARGUMENT, "'outk_attached'", "pk_new_tensor");
    pk_graph_stats st;
    CHECK(pk_kernel_stats(k, &st) == PK_OK, "stats before the split-K layer");
    OK(k, pk_linear_splitk_with_residual_layer(k, x, wk, res, out, 3));
    char name[64];
    snprintf(name, sizeof name, "pk.splitk%d.acc", st.num_layers);
    const pk_tensor *acc = pk_find_tensor(k, name);
    CHECK(acc && pk_tensor_dtype(acc) == PK_DTYPE_FP32 && pk_tensor_dim(acc, 0) == T && pk_tensor_dim(acc, 1) == H,
          "linear_splitk_with_residual makes its fp32 accumulator %s [8, 16]", name);
    pk_layer_info li;
    CHECK(pk_kernel_layer(k, st.num_layers, &li) == PK_OK && !strcmp(li.kind, "linear_splitk_with_residual") &&
              li.grid == 3,
          "the split-K layer's kind and grid");
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk, res, out, 3), PK_ERR_INVALID_ARGUMENT, "'outk'",
           "written by layer");
    /* its weight is stored transposed on the GPU: no other kind of layer may read it, before or after */
    EXPECT(k, pk_linear_layer(k, x, wk, act(k, "outk2", H), 2), PK_ERR_INVALID_ARGUMENT, "'wk'", "split-K",
           "transposed");
    pk_tensor *wk_shared = w2(k, "wk_shared", H, I);
    OK(k, pk_linear_layer(k, x, wk_shared, act(k, "outk3", H), 2));
    EXPECT(k, pk_linear_splitk_with_residual_layer(k, x, wk_shared, res, act(k, "outk4", H), 3),
           PK_ERR_INVALID_ARGUMENT, "'wk_shared'", "is read by layer", "transposed");
    pk_kernel_free(k);
}

/* rmsnorm_swiglu_down and its accumulator's readers (rmsnorm_linear_acc) and clearer
 * (linear_with_residual_clear), in a kernel of their own: x [T, H], gate / up [I, H], down [H, I]. */
static pk_tensor *acc64(pk_kernel *k, const char *name, pk_dtype dt, int64_t cols) {
    int64_t dims[2] = {T, cols};
    pk_tensor *t = pk_new_tensor(k, name, dt, 2, dims, PK_IO_LOCAL);
    CHECK(t != NULL, "new_tensor %s: %s", name, pk_kernel_error(k));
    return t;
}
static void test_mlp_fused_layer(void) {
    pk_kernel *k = kernel();
    pk_tensor *x = act(k, "xm", H), *nw = w1(k, "nwm", H), *wd = w2(k, "wdm", H, I);
    pk_tensor *gu_in[2] = {w2(k, "wgm", I, H), w2(k, "wum", I, H)};
    pk_tensor *wgu = pk_fuse_tensors(k, "wgum", gu_in, 2, 0, 3), *wgu1 = pk_fuse_tensors(k, "wgum1", gu_in, 2, 0, 1);
    pk_tensor *acc = acc64(k, "accm", PK_DTYPE_INT64, H), *acc32 = acc64(k, "accm32", PK_DTYPE_FP32, H);
    EXPECT(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu, wd, acc32, 1e-6f, 3), PK_ERR_DTYPE, "accm32", "int64");
    EXPECT(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu1, wd, acc, 1e-6f, 3), PK_ERR_INVALID_ARGUMENT, "wgum1",
           "3 groups");
    EXPECT(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, gu_in[0], wd, acc, 1e-6f, 3), PK_ERR_INVALID_ARGUMENT, "wgm",
           "pk_fuse_tensors");
    EXPECT(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu, w2(k, "wdm13", H, I + 1), acc, 1e-6f, 3), PK_ERR_SHAPE,
           "wdm13", "[16, 12]");
    EXPECT(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu, wd, acc, 1e-6f, 0), PK_ERR_GRID, "grid 0");
    EXPECT(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu, wd, acc, -1.0f, 3), PK_ERR_INVALID_ARGUMENT, "eps");
    /* an accumulator that is not a fused MLP's */
    pk_tensor *wq = w2(k, "wqm", H, H), *h_in = act(k, "h_inm", H), *qkv = act(k, "qkvm", H);
    EXPECT(k, pk_rmsnorm_linear_acc_layer(k, x, acc, nw, wq, qkv, h_in, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT, "accm",
           "not the accumulator");
    EXPECT(k, pk_rmsnorm_linear_acc_layer(k, x, NULL, nw, wq, qkv, h_in, 1e-6f, 2), PK_ERR_INVALID_ARGUMENT,
           "accumulator", "NULL");
    OK(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu, wd, acc, 1e-6f, 3));
    CHECK(pk_find_tensor(k, "pk.mlp0.down_blocks") && pk_tensor_dim(pk_find_tensor(k, "pk.mlp0.down_blocks"), 0) == I &&
              pk_tensor_dim(pk_find_tensor(k, "pk.mlp0.w"), 0) == 3 * I,
          "rmsnorm_swiglu_down keeps down's column blocks [12, 16] and the fused weight [36, 16]");
    EXPECT(k, pk_rmsnorm_linear_acc_layer(k, x, acc, nw, wq, qkv, act(k, "h_in17m", H + 1), 1e-6f, 2), PK_ERR_SHAPE,
           "h_in17m", "[8, 17]");
    OK(k, pk_rmsnorm_linear_acc_layer(k, x, acc, nw, wq, qkv, h_in, 1e-6f, 2));
    pk_tensor *att = act(k, "attm", H), *h2 = act(k, "h2m", H);
    OK(k, pk_linear_layer(k, qkv, w2(k, "wam", H, H), att, 2));
    /* a second reader that the clear layer does not wait on */
    pk_tensor *side = act(k, "sidem", H), *side_sum = act(k, "side_summ", H);
    OK(k, pk_rmsnorm_linear_acc_layer(k, x, acc, nw, w2(k, "wsm", H, H), side, side_sum, 1e-6f, 2));
    EXPECT(k, pk_linear_with_residual_clear_layer(k, att, w2(k, "wom", H, H), h_in, acc, h2, 2),
           PK_ERR_INVALID_ARGUMENT, "accm", "L", "does not wait on");
    pk_kernel_free(k);

    /* the whole chain: compile fails without the clear, passes with it; no reader after the clear */
    for (int with_clear = 0; with_clear < 2; with_clear++) {
        k = kernel();
        x = act(k, "xm", H), nw = w1(k, "nwm", H), wd = w2(k, "wdm", H, I);
        pk_tensor *g2[2] = {w2(k, "wgm", I, H), w2(k, "wum", I, H)};
        wgu = pk_fuse_tensors(k, "wgum", g2, 2, 0, 3);
        acc = acc64(k, "accm", PK_DTYPE_INT64, H);
        h_in = act(k, "h_inm", H), qkv = act(k, "qkvm", H);
        pk_tensor *h_out = act(k, "h_outm", H), *logits = act(k, "lgm", V);
        OK(k, pk_embedding_layer(k, pk_step_tokens(k), w2(k, "embm", V, H), x, 2));
        OK(k, pk_rmsnorm_swiglu_down_layer(k, x, nw, wgu, wd, acc, 1e-6f, 3));
        OK(k, pk_rmsnorm_linear_acc_layer(k, x, acc, nw, w2(k, "wqm", H, H), qkv, h_in, 1e-6f, 2));
        if (with_clear) {
            OK(k, pk_linear_with_residual_clear_layer(k, qkv, w2(k, "wom", H, H), h_in, acc, h_out, 2));
            EXPECT(k, pk_rmsnorm_linear_acc_layer(k, x, acc, nw, w2(k, "wq2m", H, H), act(k, "q2m", H),
                                                  act(k, "s2m", H), 1e-6f, 2),
                   PK_ERR_INVALID_ARGUMENT, "accm", "cleared by layer");
        } else {
            OK(k, pk_linear_with_residual_layer(k, qkv, w2(k, "wom", H, H), h_in, h_out, 2));
        }
        OK(k, pk_rmsnorm_linear_layer(k, h_out, w1(k, "fnm", H), w2(k, "lmm", V, H), logits, 1e-6f, 2));
        OK(k, pk_argmax_layer(k, logits, pk_step_output(k), 1));
        if (with_clear)
            OK(k, pk_compile(k, NULL));
        else
            EXPECT(k, pk_compile(k, NULL), PK_ERR_INVALID_ARGUMENT, "accm", "never cleared",
                   "pk_linear_with_residual_clear_layer");
        pk_kernel_free(k);
    }
}

/* pk_cancel from the token callback: after request 0's second token the run stops at the end of
 * that step. */
typedef struct cancel_probe {
    pk_kernel *k;
    int seen0;
} cancel_probe;
static void cancel_on_token(void *user, int request, int32_t token, int row) {
    cancel_probe *p = user;
    (void)token, (void)row;
    if (request == 0 && ++p->seen0 == 2) pk_cancel(p->k);
}

static void test_cancel(pk_kernel *k, const pk_request *valid) {
    pk_cancel(NULL); /* nothing to cancel: no effect */
    int32_t o0[10], o1[10], o2[10];
    pk_request rs[3] = {*valid, *valid, *valid};
    rs[0].max_new_tokens = 10, rs[0].output = o0;
    rs[1].max_new_tokens = 1, rs[1].output = o1; /* done before the cancel */
    rs[2].max_new_tokens = 10, rs[2].output = o2;
    cancel_probe p = {k, 0};
    OK(k, pk_run(k, rs, 3, cancel_on_token, &p));
    CHECK(rs[0].num_output == 2 && rs[0].finish == PK_FINISH_CANCELLED, "cancelled run: request 0 made %d tokens, finish %d",
          rs[0].num_output, (int)rs[0].finish);
    CHECK(rs[1].num_output == 1 && rs[1].finish == PK_FINISH_LENGTH, "cancelled run: request 1 made %d tokens, finish %d",
          rs[1].num_output, (int)rs[1].finish);
    CHECK(rs[2].num_output < 10 && rs[2].finish == PK_FINISH_CANCELLED, "cancelled run: request 2 made %d tokens, finish %d",
          rs[2].num_output, (int)rs[2].finish);
    /* a cancel between runs is forgotten: the next run goes to the end */
    pk_cancel(k);
    pk_request again = *valid;
    int32_t oa[10];
    again.output = oa;
    OK(k, pk_run(k, &again, 1, NULL, NULL));
    CHECK(again.num_output == valid->max_new_tokens && again.finish == PK_FINISH_LENGTH && !memcmp(oa, valid->output, sizeof(int32_t) * (size_t)again.num_output),
          "the run after a cancel: %d tokens, finish %d", again.num_output, (int)again.finish);
}

static void test_run(void) {
    int32_t prompt[MAXLEN] = {1, 2, 3, 4}, out[MAXLEN];
    pk_request rq = {.prompt = prompt, .prompt_len = 4, .max_new_tokens = 3, .output = out};

    pk_kernel *k = kernel();
    EXPECT(k, pk_compile(k, NULL), PK_ERR_STATE, "no layers");
    pk_kernel_free(k);

    k = tiny(1, V);
    EXPECT(k, pk_run(k, &rq, 1, NULL, NULL), PK_ERR_STATE, "compile");
    EXPECT(k, pk_write_task_graph(k, "/tmp/pk_never.json"), PK_ERR_STATE, "compile");
    OK(k, pk_compile(k, NULL));
    EXPECT(k, pk_compile(k, NULL), PK_ERR_STATE, "compiled already");
    EXPECT(k, pk_write_task_graph(k, "/nonexistent_dir_pk/tg.json"), PK_ERR_IO, "/nonexistent_dir_pk/tg.json");
    EXPECT(k, pk_write_task_graph(k, NULL), PK_ERR_INVALID_ARGUMENT, "path");
    CHECK(pk_write_task_graph(NULL, "/tmp/x.json") == PK_ERR_INVALID_ARGUMENT, "write_task_graph NULL kernel");
    CHECK(pk_compile(NULL, NULL) == PK_ERR_INVALID_ARGUMENT && pk_run(NULL, &rq, 1, NULL, NULL) == PK_ERR_INVALID_ARGUMENT,
          "NULL kernel compile/run");

    pk_request bad;
    bad = rq;
    bad.prompt_len = 0;
    pk_request two[2] = {rq, bad};
    EXPECT(k, pk_run(k, two, 2, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "request 1", "0 tokens");
    bad = rq;
    bad.prompt_len = MAXLEN;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_LIMIT, "request 0", "64 tokens", "max_seq_length 64", "63");
    bad.prompt_len = MAXLEN + 5;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_LIMIT, "request 0", "69");
    int32_t badp[4] = {1, 2, -1, 3};
    bad = rq;
    bad.prompt = badp;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_LIMIT, "request 0", "token 2", "id -1", "32");
    badp[2] = V;
    two[0] = rq;
    two[1] = bad;
    EXPECT(k, pk_run(k, two, 2, NULL, NULL), PK_ERR_LIMIT, "request 1", "token 2", "id 32", "[0, 32)");
    bad = rq;
    bad.output = NULL;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "request 0", "NULL");
    bad = rq;
    bad.prompt = NULL;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "request 0", "NULL");
    bad = rq;
    bad.max_new_tokens = 0;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "request 0", "max_new_tokens 0");
    bad.max_new_tokens = -4;
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "max_new_tokens -4");
    EXPECT(k, pk_run(k, NULL, 1, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "1 requests");
    EXPECT(k, pk_run(k, &rq, -1, NULL, NULL), PK_ERR_INVALID_ARGUMENT, "-1 requests");
    OK(k, pk_run(k, NULL, 0, NULL, NULL));
    /* Still usable after the errors. */
    OK(k, pk_run(k, &rq, 1, NULL, NULL));
    CHECK(rq.num_output == 3 && rq.finish == PK_FINISH_LENGTH, "valid run: %d tokens, finish %d", rq.num_output,
          (int)rq.finish);
    for (int i = 0; i < rq.num_output; i++) CHECK(out[i] >= 0 && out[i] < V, "token %d", out[i]);
    test_cancel(k, &rq);
    /* The longest prompt allowed: one token fits before max_seq_length. */
    static int32_t longp[MAXLEN - 1];
    int32_t lout[5];
    pk_request lr = {.prompt = longp, .prompt_len = MAXLEN - 1, .max_new_tokens = 5, .output = lout};
    OK(k, pk_run(k, &lr, 1, NULL, NULL));
    CHECK(lr.num_output == 1 && lr.finish == PK_FINISH_LENGTH, "prompt of max_seq_length - 1: %d tokens, finish %d",
          lr.num_output, (int)lr.finish);
    uint16_t lbuf[T * V];
    EXPECT(k, pk_tensor_read(k, pk_find_tensor(k, "logits"), lbuf, sizeof lbuf - 2), PK_ERR_SHAPE, "logits", "510", "512");
    OK(k, pk_tensor_read(k, pk_find_tensor(k, "logits"), lbuf, sizeof lbuf));
    pk_kernel_free(k);

    /* A request needing more KV pages than the cache holds. */
    pk_config c = small_config();
    c.num_pages = 3; /* 12 tokens */
    k = pk_kernel_new(&c);
    pk_tensor *h = act(k, "h", H), *lg = act(k, "logits", V);
    OK(k, pk_embedding_layer(k, pk_step_tokens(k), w2(k, "embed", V, H), h, 1));
    OK(k, pk_rmsnorm_linear_layer(k, h, w1(k, "fn", H), w2(k, "lm", V, H), lg, 1e-6f, 1));
    OK(k, pk_argmax_layer(k, lg, pk_step_output(k), 1));
    OK(k, pk_compile(k, NULL));
    bad = rq;
    bad.max_new_tokens = 20; /* 24 tokens: 6 pages */
    EXPECT(k, pk_run(k, &bad, 1, NULL, NULL), PK_ERR_LIMIT, "request 0", "6 KV pages", "4 tokens", "has 3");
    bad.max_new_tokens = 8; /* 12 tokens: fits */
    OK(k, pk_run(k, &bad, 1, NULL, NULL));
    CHECK(bad.num_output == 8, "fits: %d tokens", bad.num_output);
    pk_kernel_free(k);

    /* No argmax into pk_step_output: compiles, cannot run. */
    k = tiny(0, V);
    OK(k, pk_compile(k, NULL));
    EXPECT(k, pk_run(k, &rq, 1, NULL, NULL), PK_ERR_STATE, "pk_step_output");
    pk_kernel_free(k);

    /* Logits wider than the embedding's vocabulary: generated ids would index past it (the argmax
     * as its own layer and in the LM head's). */
    for (int am = 1; am <= 2; am++) {
        k = tiny(am, 2 * V);
        pk_status s = pk_compile(k, NULL);
        if (s == PK_OK) s = pk_run(k, &rq, 1, NULL, NULL);
        expect_(__LINE__, k, "compile+run with 64 logits over a 32-row embedding", s, PK_ERR_SHAPE, "logits", "64",
                "32", (const char *)NULL);
        pk_kernel_free(k);
        /* Narrower logits are fine. */
        k = tiny(am, V / 2);
        OK(k, pk_compile(k, NULL));
        OK(k, pk_run(k, &rq, 1, NULL, NULL));
        CHECK(rq.num_output == 3, "argmax %d: %d tokens", am, rq.num_output);
        pk_kernel_free(k);
    }

    /* A compile whose output directory cannot be made reports PK_ERR_IO. */
    k = tiny(1, V);
    pk_compile_options o = {.output_dir = "/nonexistent_dir_pk/sub"};
    EXPECT(k, pk_compile(k, &o), PK_ERR_IO, "/nonexistent_dir_pk/sub");
    pk_kernel_free(k);
}

/* ---- status names, frees ----------------------------------------------------------------- */

static void test_names_and_frees(void) {
    const char *names[] = {"PK_OK", "PK_ERR_INVALID_ARGUMENT", "PK_ERR_SHAPE", "PK_ERR_STRIDE", "PK_ERR_GRID",
                           "PK_ERR_DTYPE", "PK_ERR_STATE", "PK_ERR_NO_MEMORY", "PK_ERR_IO", "PK_ERR_FORMAT",
                           "PK_ERR_UNSUPPORTED", "PK_ERR_LIMIT", "PK_ERR_BACKEND"};
    for (int s = 0; s <= PK_ERR_BACKEND; s++)
        CHECK(pk_status_name((pk_status)s) && !strcmp(pk_status_name((pk_status)s), names[s]), "status %d: %s", s,
              pk_status_name((pk_status)s));
    CHECK(pk_status_name((pk_status)13) && pk_status_name((pk_status)-1) && pk_status_name((pk_status)1000) &&
              strstr(pk_status_name((pk_status)13), "UNKNOWN"),
          "unknown status name");
    CHECK(pk_dtype_size(PK_DTYPE_BF16) == 2 && pk_dtype_size(PK_DTYPE_FP16) == 2 && pk_dtype_size(PK_DTYPE_FP32) == 4 &&
              pk_dtype_size(PK_DTYPE_INT32) == 4 && pk_dtype_size(PK_DTYPE_INT64) == 8 && pk_dtype_size((pk_dtype)42) == 0 &&
              pk_dtype_size((pk_dtype)-1) == 0,
          "dtype sizes");
    CHECK(!strcmp(pk_dtype_name(PK_DTYPE_INT32), "int32") && pk_dtype_name((pk_dtype)42) != NULL, "dtype names");
    pk_kernel_free(NULL);
    pk_model_free(NULL);
    pk_tokenizer_free(NULL);
    pk_decoder_free(NULL);
    CHECK(1, "every *_free accepts NULL");
}

int main(void) {
    test_config();
    test_tensors();
    test_layers();
    test_swiglu_layer();
    test_splitk_layer();
    test_mlp_fused_layer();
    test_lm_argmax_layer();
    test_run();
    test_names_and_frees();
    return check_report("api_errors");
}
