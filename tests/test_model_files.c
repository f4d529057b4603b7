// SPDX-License-Identifier: Apache-2.0
/* test_model_files.c — safetensors, config.json and model-directory weights.
 * Writes small safetensors files (bytes assembled here), config.json files and sharded model
 * directories under a mkdtemp dir; checks the good parses (bf16/f16/f32 → bf16 bit-exact
 * against pk_f32_to_bf16, zero copy from the mapping, sharded index) and every error path:
 * its status and that the message names the file, tensor, key or number. Special files (a FIFO,
 * a directory, a device) in place of each file must fail at once, not block: alarm() ends the
 * program if one hangs. pk_model_options.check_tensors on tiny models with a NaN or an Inf in
 * BF16, F16 and F32 files. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "model/hf_config.h"
#include "model/safetensors.h"
#include "model/weights.h"

static char g_tmp[256];

/* ---- helpers ------------------------------------------------------------------------------ */

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot create %s", path);
    if (!f) return;
    if (len) CHECK(fwrite(data, 1, len, f) == len, "short write to %s", path);
    fclose(f);
}

static void write_text(const char *path, const char *text) { write_file(path, text, strlen(text)); }

static char *path_in(const char *dir, const char *name) {
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static char *make_dir(const char *name) {
    char *p = path_in(g_tmp, name);
    CHECK(mkdir(p, 0755) == 0, "mkdir %s", p);
    return p;
}

/* A raw safetensors image: LE header length, header text, pad_spaces spaces, data. */
typedef struct blob {
    unsigned char *bytes;
    size_t len;
} blob;

static blob raw_st(uint64_t declared_hlen_or_0, const char *header, size_t pad_spaces,
                   const void *data, size_t data_len) {
    size_t hlen = strlen(header) + pad_spaces;
    uint64_t declared = declared_hlen_or_0 ? declared_hlen_or_0 : hlen;
    blob b;
    b.len = 8 + hlen + data_len;
    b.bytes = malloc(b.len);
    for (int i = 0; i < 8; i++) b.bytes[i] = (unsigned char)(declared >> (8 * i));
    memcpy(b.bytes + 8, header, strlen(header));
    memset(b.bytes + 8 + strlen(header), ' ', pad_spaces);
    if (data_len) memcpy(b.bytes + 8 + hlen, data, data_len);
    return b;
}

/* A well-formed safetensors image of n tensors laid out back to back. data_parity 0: the data
 * section starts at a multiple of 8 (as the safetensors library writes it); 1: at an odd
 * offset, so every BF16 tensor is misaligned in the mapping. */
typedef struct spec {
    const char *name, *dtype;
    int ndim;
    int64_t dims[4];
    const void *data;
    size_t nbytes;
} spec;

static blob build_st(const spec *s, int n, int data_parity) {
    char header[4096];
    size_t used = (size_t)snprintf(header, sizeof header, "{\"__metadata__\":{\"format\":\"pt\"}");
    size_t off = 0, total = 0;
    for (int i = 0; i < n; i++) total += s[i].nbytes;
    unsigned char *data = malloc(total ? total : 1);
    for (int i = 0; i < n; i++) {
        used += (size_t)snprintf(header + used, sizeof header - used,
                                 ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", s[i].name, s[i].dtype);
        for (int d = 0; d < s[i].ndim; d++)
            used += (size_t)snprintf(header + used, sizeof header - used, "%s%lld", d ? "," : "",
                                     (long long)s[i].dims[d]);
        used += (size_t)snprintf(header + used, sizeof header - used,
                                 "],\"data_offsets\":[%zu,%zu]}", off, off + s[i].nbytes);
        if (s[i].nbytes) memcpy(data + off, s[i].data, s[i].nbytes);
        off += s[i].nbytes;
    }
    used += (size_t)snprintf(header + used, sizeof header - used, "}");
    size_t pad = 0;
    if (data_parity == 0) pad = (8 - (8 + used) % 8) % 8;
    else pad = ((8 + used) % 2 == 1) ? 0 : 1;
    blob b = raw_st(0, header, pad, data, total);
    free(data);
    return b;
}

static pk_status parse_header(const char *header, const void *data, size_t data_len,
                              char *err, size_t err_len) {
    blob b = raw_st(0, header, 0, data, data_len);
    pk_safetensors *st = (pk_safetensors *)1;
    pk_status s = pk_safetensors_parse(b.bytes, b.len, "mem.safetensors", &st, err, err_len);
    if (s == PK_OK) pk_safetensors_close(st);
    else CHECK(st == NULL, "out must be NULL on error");
    free(b.bytes);
    return s;
}

/* Checks that parsing `header` fails with `want` and a message containing each needle. */
static void expect_st_error(int line, const char *header, size_t data_len, pk_status want,
                            const char *n1, const char *n2) {
    unsigned char zeros[256] = {0};
    char err[512] = "";
    pk_status s = parse_header(header, zeros, data_len, err, sizeof err);
    CHECK(s == want, "line %d: status %d, want %d (%s)", line, (int)s, (int)want, err);
    CHECK(!n1 || strstr(err, n1), "line %d: message '%s' lacks '%s'", line, err, n1);
    CHECK(!n2 || strstr(err, n2), "line %d: message '%s' lacks '%s'", line, err, n2);
}
#define ST_ERR(hdr, dlen, want, n1, n2) expect_st_error(__LINE__, hdr, dlen, want, n1, n2)

static uint16_t f32_bits_to_bf16(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return pk_f32_to_bf16(f);
}

/* ---- safetensors -------------------------------------------------------------------------- */

static void test_safetensors_good(void) {
    uint16_t a[6] = {0x3f80, 0xbf80, 0x0000, 0x8000, 0x7f80, 0x4049};
    uint16_t b[4] = {0x3c00, 0x0001, 0x7c00, 0xc000};
    uint32_t c[4] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x7fc00001u};
    int64_t i64[2] = {-5, 1LL << 40};
    float scalar = 2.5f;
    spec s[] = {
        {"a", "BF16", 2, {2, 3}, a, sizeof a},
        {"b", "F16", 1, {4}, b, sizeof b},
        {"c", "F32", 2, {2, 2}, c, sizeof c},
        {"ids", "I64", 1, {2}, i64, sizeof i64},
        {"scalar", "F32", 0, {0}, &scalar, sizeof scalar},
        {"empty", "BF16", 2, {0, 4}, NULL, 0},
    };
    blob bl = build_st(s, 6, 0);
    char *path = path_in(g_tmp, "good.safetensors");
    write_file(path, bl.bytes, bl.len);
    char err[512];
    pk_safetensors *st = NULL;
    pk_status rc = pk_safetensors_open(path, &st, err, sizeof err);
    CHECK(rc == PK_OK && st, "open good file: %s", err);
    if (!st) { free(bl.bytes); return; }
    CHECK(pk_safetensors_count(st) == 6, "count %d", pk_safetensors_count(st));
    CHECK(strcmp(pk_safetensors_label(st), path) == 0, "label");
    const char *fmt = pk_safetensors_metadata(st, "format");
    CHECK(fmt && strcmp(fmt, "pt") == 0, "metadata format");
    CHECK(pk_safetensors_metadata(st, "nope") == NULL, "absent metadata");
    /* name order */
    for (int i = 1; i < pk_safetensors_count(st); i++)
        CHECK(strcmp(pk_safetensors_tensor(st, i - 1)->name, pk_safetensors_tensor(st, i)->name) < 0,
              "tensors in name order");
    CHECK(pk_safetensors_tensor(st, 6) == NULL && pk_safetensors_tensor(st, -1) == NULL, "range");
    const pk_st_tensor *ta = pk_safetensors_find(st, "a");
    CHECK(ta && ta->dtype == PK_DTYPE_BF16 && ta->ndim == 2 && ta->dims[0] == 2 &&
              ta->dims[1] == 3 && ta->numel == 6 && ta->nbytes == 12,
          "tensor a");
    CHECK(ta && memcmp(ta->data, a, sizeof a) == 0, "tensor a data");
    CHECK(ta && ((uintptr_t)ta->data % 8) == 0, "data section 8-aligned in the mapping");
    CHECK(ta && ta->file_offset == bl.len - (sizeof a + sizeof b + sizeof c + sizeof i64 + 4),
          "file offset of a");
    const pk_st_tensor *tb = pk_safetensors_find(st, "b");
    CHECK(tb && tb->dtype == PK_DTYPE_FP16 && tb->numel == 4, "tensor b");
    const pk_st_tensor *tc = pk_safetensors_find(st, "c");
    CHECK(tc && tc->dtype == PK_DTYPE_FP32 && tc->nbytes == 16, "tensor c");
    const pk_st_tensor *ti = pk_safetensors_find(st, "ids");
    CHECK(ti && ti->dtype == PK_DTYPE_INT64 && memcmp(ti->data, i64, sizeof i64) == 0, "i64");
    const pk_st_tensor *tsc = pk_safetensors_find(st, "scalar");
    CHECK(tsc && tsc->ndim == 0 && tsc->numel == 1 && tsc->nbytes == 4, "scalar");
    const pk_st_tensor *te = pk_safetensors_find(st, "empty");
    CHECK(te && te->ndim == 2 && te->numel == 0 && te->nbytes == 0, "empty tensor");
    CHECK(pk_safetensors_find(st, "zzz") == NULL && pk_safetensors_find(st, "") == NULL, "find");

    /* conversions */
    pk_bf16 out[6];
    CHECK(pk_st_tensor_to_bf16(ta, out) == PK_OK && memcmp(out, a, sizeof a) == 0, "bf16 copy");
    CHECK(pk_st_tensor_to_bf16(tb, out) == PK_OK, "f16 convert");
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == pk_f32_to_bf16(pk_f16_to_f32(b[i])), "f16[%d] %04x", i, out[i]);
    CHECK(out[0] == 0x3f80 && out[2] == 0x7f80 && out[3] == 0xc000, "f16 known values");
    CHECK(pk_st_tensor_to_bf16(tc, out) == PK_OK, "f32 convert");
    for (int i = 0; i < 4; i++) CHECK(out[i] == f32_bits_to_bf16(c[i]), "f32[%d]", i);
    CHECK(out[0] == 0x3f80 && out[1] == 0x3f80 && out[2] == 0x3f82, "f32 RNE ties to even");
    CHECK((out[3] & 0x7f80) == 0x7f80 && (out[3] & 0x7f), "NaN stays NaN");
    CHECK(pk_st_tensor_to_bf16(ti, out) == PK_ERR_DTYPE, "i64 does not convert");
    pk_safetensors_close(st);
    pk_safetensors_close(NULL);
    free(bl.bytes);

    /* parse from memory: header without metadata, unpadded, trailing bytes after the data */
    unsigned char data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    blob m = raw_st(0, "{\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}  ", 0,
                    data, sizeof data);
    rc = pk_safetensors_parse(m.bytes, m.len, NULL, &st, err, sizeof err);
    CHECK(rc == PK_OK, "memory parse: %s", err);
    if (rc == PK_OK) {
        const pk_st_tensor *x = pk_safetensors_find(st, "x");
        CHECK(x && x->dtype == PK_DTYPE_INT32 && x->data == m.bytes + m.len - 4, "x data");
        CHECK(strcmp(pk_safetensors_label(st), "<memory>") == 0, "default label");
        pk_safetensors_close(st);
    }
    free(m.bytes);
    /* an empty header object is a valid (empty) file */
    m = raw_st(0, "{}", 0, NULL, 0);
    rc = pk_safetensors_parse(m.bytes, m.len, "e", &st, err, sizeof err);
    CHECK(rc == PK_OK && pk_safetensors_count(st) == 0, "empty header: %s", err);
    if (rc == PK_OK) pk_safetensors_close(st);
    free(m.bytes);
}

static void test_safetensors_errors(void) {
    char err[512];
    pk_safetensors *st = NULL;
    unsigned char tiny[5] = {0};
    CHECK(pk_safetensors_parse(tiny, 5, "t.st", &st, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "5 bytes") && strstr(err, "t.st"),
          "too short: %s", err);
    /* header length beyond the file */
    blob b = raw_st(1000, "{}", 0, NULL, 0);
    CHECK(pk_safetensors_parse(b.bytes, b.len, "h.st", &st, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "header length 1000") && strstr(err, "file size 10"),
          "hlen > size: %s", err);
    free(b.bytes);
    b = raw_st(200000000, "{}", 0, NULL, 0);
    CHECK(pk_safetensors_parse(b.bytes, b.len, "h.st", &st, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "200000000") && strstr(err, "absurd"),
          "absurd hlen: %s", err);
    free(b.bytes);
    b = raw_st(0xffffffffffffffffull, "{}", 0, NULL, 0);
    CHECK(pk_safetensors_parse(b.bytes, b.len, "h.st", &st, err, sizeof err) == PK_ERR_FORMAT,
          "2^64-1 hlen: %s", err);
    free(b.bytes);
    CHECK(pk_safetensors_parse(NULL, 0, "x", NULL, err, sizeof err) == PK_ERR_INVALID_ARGUMENT,
          "NULL out");
    CHECK(pk_safetensors_parse(tiny, 5, "x", &st, NULL, 0) == PK_ERR_FORMAT, "NULL err ok");

    ST_ERR("", 0, PK_ERR_FORMAT, "not valid JSON", "mem.safetensors");
    ST_ERR("{\"a\":", 0, PK_ERR_FORMAT, "not valid JSON", NULL);
    ST_ERR("[1,2]", 0, PK_ERR_FORMAT, "not a JSON object", NULL);
    ST_ERR("{} x", 0, PK_ERR_FORMAT, "unexpected bytes", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, PK_ERR_FORMAT,
           "unsupported dtype F64 of tensor 'w' in mem.safetensors", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, PK_ERR_FORMAT,
           "unsupported dtype U8", NULL);
    ST_ERR("{\"w\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,2]}}", 2, PK_ERR_FORMAT,
           "\"dtype\" of tensor 'w'", NULL);
    ST_ERR("{\"w\":{\"shape\":[1],\"data_offsets\":[0,2]}}", 2, PK_ERR_FORMAT, "dtype", "'w'");
    ST_ERR("{\"w\":[1,2]}", 0, PK_ERR_FORMAT, "tensor 'w'", "not an object");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":3,\"data_offsets\":[0,2]}}", 2, PK_ERR_FORMAT,
           "\"shape\" of tensor 'w'", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,-3],\"data_offsets\":[0,12]}}", 12,
           PK_ERR_FORMAT, "shape entry 1 of tensor 'w' is -3", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1.5],\"data_offsets\":[0,2]}}", 2, PK_ERR_FORMAT,
           "is 1.5", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[\"4\"],\"data_offsets\":[0,8]}}", 8,
           PK_ERR_FORMAT, "shape entry 0", "a string");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,2]}}", 2,
           PK_ERR_FORMAT, "'w' has 9 dims", "at most 8");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[0,2]}}", 2,
           PK_OK, NULL, NULL);
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0]}}", 2, PK_ERR_FORMAT,
           "\"data_offsets\" of tensor 'w'", "1 entries");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1]}}", 2, PK_ERR_FORMAT, "data_offsets", "'w'");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[-2,0]}}", 2, PK_ERR_FORMAT,
           "holds -2", "'w'");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 2,
           PK_ERR_FORMAT, "'w'", "not a non-negative integer");
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,4]}}", 8, PK_ERR_FORMAT,
           "[8, 4] of tensor 'w' begin after they end", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[4,12]}}", 10,
           PK_ERR_FORMAT, "[4, 12] of tensor 'w' end beyond the data section (10 bytes)", NULL);
    ST_ERR("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,10]}}", 10,
           PK_ERR_FORMAT, "(10 bytes), but shape [2, 3] of BF16 needs 12 bytes", "'w'");
    ST_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,4503599627370496,8],"
           "\"data_offsets\":[0,8]}}",
           8, PK_ERR_FORMAT, "tensor 'w' of shape [4503599627370496, 4503599627370496, 8]",
           "too large");
    ST_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
           "\"data_offsets\":[0,0]}}",
           8, PK_ERR_FORMAT, "'w'", NULL); /* above 2^53: not an exact JSON integer */
    ST_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[2251799813685248,2],\"data_offsets\":[0,0]}}",
           8, PK_ERR_FORMAT, "needs 18014398509481984 bytes", NULL); /* 2^51·2·4 = 2^54 */
    /* 2^62 elements of 4 bytes and 2^61 of 8 are 2^64 bytes: must not wrap to 0 = end - begin */
    ST_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,0]}}",
           0, PK_ERR_FORMAT, "tensor 'w' of shape [2147483648, 2147483648]", "too large");
    ST_ERR("{\"w\":{\"dtype\":\"I64\",\"shape\":[1073741824,2147483648],\"data_offsets\":[0,0]}}",
           0, PK_ERR_FORMAT, "tensor 'w' of shape [1073741824, 2147483648]", "too large");
    ST_ERR("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[4,12]}}",
           12, PK_ERR_FORMAT, "tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap",
           NULL);
    ST_ERR("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
           "\"b\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[0,16]}}",
           16, PK_ERR_FORMAT, "overlap", "'a'");
    /* touching ranges, holes and empty tensors inside others are fine */
    ST_ERR("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
           "\"e\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[2,2]},"
           "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
           "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]}}",
           16, PK_OK, NULL, NULL);
    ST_ERR("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
           8, PK_ERR_FORMAT, "duplicate tensor name 'a'", NULL);
    ST_ERR("{\"\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, PK_ERR_FORMAT,
           "empty name", NULL);
    ST_ERR("{\"__metadata__\":[1]}", 0, PK_ERR_FORMAT, "\"__metadata__\" is not an object", NULL);
    ST_ERR("{\"__metadata__\":{\"format\":1}}", 0, PK_ERR_FORMAT, "value 'format'", NULL);
    ST_ERR("{\"__metadata__\":{},\"__metadata__\":{}}", 0, PK_ERR_FORMAT, "duplicate", NULL);

    /* files */
    CHECK(pk_safetensors_open(path_in(g_tmp, "nope.safetensors"), &st, err, sizeof err) ==
                  PK_ERR_IO && strstr(err, "nope.safetensors") && st == NULL,
          "missing file: %s", err);
    CHECK(pk_safetensors_open(g_tmp, &st, err, sizeof err) == PK_ERR_IO &&
              strstr(err, "not a regular file"),
          "directory: %s", err);
    write_file(path_in(g_tmp, "empty.safetensors"), "", 0);
    CHECK(pk_safetensors_open(path_in(g_tmp, "empty.safetensors"), &st, err, sizeof err) ==
                  PK_ERR_FORMAT && strstr(err, "empty.safetensors") && strstr(err, "0 bytes"),
          "empty file: %s", err);
    b = raw_st(0, "{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 0,
               "abcdef", 6);
    write_file(path_in(g_tmp, "trunc.safetensors"), b.bytes, b.len);
    free(b.bytes);
    CHECK(pk_safetensors_open(path_in(g_tmp, "trunc.safetensors"), &st, err, sizeof err) ==
                  PK_ERR_FORMAT && strstr(err, "trunc.safetensors") && strstr(err, "'w'"),
          "truncated file: %s", err);
    CHECK(pk_safetensors_open(NULL, &st, err, sizeof err) == PK_ERR_INVALID_ARGUMENT, "NULL path");
}

/* ---- config.json -------------------------------------------------------------------------- */

static const char *QWEN3_0_6B =
    "{\n  \"architectures\": [\n    \"Qwen3ForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 151643,\n  \"eos_token_id\": 151645,\n"
    "  \"head_dim\": 128,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": 1024,\n"
    "  \"initializer_range\": 0.02,\n  \"intermediate_size\": 3072,\n"
    "  \"max_position_embeddings\": 40960,\n  \"max_window_layers\": 28,\n"
    "  \"model_type\": \"qwen3\",\n  \"num_attention_heads\": 16,\n  \"num_hidden_layers\": 28,\n"
    "  \"num_key_value_heads\": 8,\n  \"rms_norm_eps\": 1e-06,\n  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000,\n  \"sliding_window\": null,\n  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.51.0\",\n"
    "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": 151936\n}\n";

static const char *LLAMA_3_2_1B =
    "{\n  \"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 128000,\n"
    "  \"eos_token_id\": [128001, 128008, 128009],\n  \"head_dim\": 64,\n"
    "  \"hidden_act\": \"silu\",\n  \"hidden_size\": 2048,\n  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 8192,\n  \"max_position_embeddings\": 131072,\n"
    "  \"mlp_bias\": false,\n  \"model_type\": \"llama\",\n  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 16,\n  \"num_key_value_heads\": 8,\n  \"pretraining_tp\": 1,\n"
    "  \"rms_norm_eps\": 1e-05,\n  \"rope_scaling\": {\n    \"factor\": 32.0,\n"
    "    \"high_freq_factor\": 4.0,\n    \"low_freq_factor\": 1.0,\n"
    "    \"original_max_position_embeddings\": 8192,\n    \"rope_type\": \"llama3\"\n  },\n"
    "  \"rope_theta\": 500000.0,\n  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.45.0.dev0\",\n"
    "  \"use_cache\": true,\n  \"vocab_size\": 128256\n}\n";

/* transformers 5 layout: rope_parameters, dtype, layer_types */
static const char *QWEN3_V5 =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": 151643,"
    " \"dtype\": \"bfloat16\", \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\","
    " \"hidden_size\": 2048, \"intermediate_size\": 6144,"
    " \"layer_types\": [\"full_attention\", \"full_attention\"], \"max_position_embeddings\": 40960,"
    " \"model_type\": \"qwen3\", \"num_attention_heads\": 16, \"num_hidden_layers\": 2,"
    " \"num_key_value_heads\": 8, \"pad_token_id\": null, \"rms_norm_eps\": 1e-06,"
    " \"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\"},"
    " \"sliding_window\": null, \"tie_word_embeddings\": true, \"transformers_version\": \"5.0.0\","
    " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char *LLAMA_V5 =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 2048, \"intermediate_size\": 8192,"
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8,"
    " \"vocab_size\": 128256, \"rope_parameters\": {\"factor\": 32.0, \"high_freq_factor\": 4.0,"
    " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192,"
    " \"rope_theta\": 500000.0, \"rope_type\": \"llama3\"}}";

/* The smallest config pk accepts: Llama-2 style, everything else defaulted. */
static const char *LLAMA_MIN =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 128,"
    " \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 100,"
    " \"eos_token_id\": null}";

static pk_status parse_cfg(const char *json, pk_hf_config *c, char *err, size_t err_len) {
    return pk_hf_config_parse(json, strlen(json), "m/config.json", c, err, err_len);
}

/* `base` with the keys of `extra` (", \"key\": value, ...") set or replaced. */
static void expect_cfg_error(int line, const char *base, const char *extra, pk_status want,
                             const char *n1, const char *n2) {
    char text[4096];
    snprintf(text, sizeof text, "{%s}", extra + 1);
    cJSON *b = cJSON_Parse(base), *e = cJSON_Parse(text);
    CHECK(b && e, "line %d: test JSON does not parse", line);
    if (!b || !e) { cJSON_Delete(b); cJSON_Delete(e); return; }
    for (const cJSON *it = e->child; it; it = it->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(b, it->string);
        cJSON_AddItemToObject(b, it->string, cJSON_Duplicate(it, 1));
    }
    char *json = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    cJSON_Delete(e);
    pk_hf_config c;
    char err[512] = "";
    pk_status s = parse_cfg(json, &c, err, sizeof err);
    CHECK(s == want, "line %d: status %d, want %d (%s)", line, (int)s, (int)want, err);
    CHECK(!n1 || strstr(err, n1), "line %d: message '%s' lacks '%s'", line, err, n1);
    CHECK(!n2 || strstr(err, n2), "line %d: message '%s' lacks '%s'", line, err, n2);
    if (s != PK_OK) CHECK(c.vocab_size == 0 && c.hidden_size == 0, "line %d: zeroed on error", line);
    free(json);
}
#define CFG_ERR(extra, want, n1, n2) expect_cfg_error(__LINE__, LLAMA_MIN, extra, want, n1, n2)

static void test_config_good(void) {
    pk_hf_config c;
    char err[512];
    CHECK(parse_cfg(QWEN3_0_6B, &c, err, sizeof err) == PK_OK, "qwen3: %s", err);
    CHECK(strcmp(c.architecture, "Qwen3ForCausalLM") == 0 && c.arch == PK_HF_ARCH_QWEN3 &&
              c.has_qk_norm == 1, "qwen3 arch");
    CHECK(c.vocab_size == 151936 && c.hidden_size == 1024 && c.intermediate_size == 3072 &&
              c.num_hidden_layers == 28 && c.num_attention_heads == 16 &&
              c.num_key_value_heads == 8 && c.head_dim == 128, "qwen3 sizes");
    CHECK(c.rms_norm_eps == 1e-6 && c.rope_theta == 1e6 && c.rope_scaling == PK_ROPE_SCALING_NONE,
          "qwen3 norm/rope");
    CHECK(c.max_position_embeddings == 40960 && c.tie_word_embeddings == 1, "qwen3 misc");
    CHECK(c.bos_token_id == 151643 && c.eos_token_id == 151645 && c.num_eos_token_ids == 1,
          "qwen3 tokens");
    CHECK(strcmp(c.dtype, "bfloat16") == 0, "qwen3 dtype");
    pk_attention_params ap;
    pk_hf_config_attention_params(&c, &ap);
    CHECK(ap.num_q_heads == 16 && ap.num_kv_heads == 8 && ap.head_dim == 128 &&
              ap.rope_theta == 1e6f && ap.qk_norm_eps == 1e-6f &&
              ap.rope_scaling == PK_ROPE_SCALING_NONE, "qwen3 attention params");

    CHECK(parse_cfg(LLAMA_3_2_1B, &c, err, sizeof err) == PK_OK, "llama: %s", err);
    CHECK(c.arch == PK_HF_ARCH_LLAMA && c.has_qk_norm == 0 && c.vocab_size == 128256 &&
              c.hidden_size == 2048 && c.intermediate_size == 8192 && c.num_hidden_layers == 16 &&
              c.num_attention_heads == 32 && c.num_key_value_heads == 8 && c.head_dim == 64,
          "llama sizes");
    CHECK(c.rms_norm_eps == 1e-5 && c.rope_theta == 500000.0 &&
              c.rope_scaling == PK_ROPE_SCALING_LLAMA3 && c.rope_factor == 32.0 &&
              c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0 &&
              c.rope_original_max_position == 8192, "llama rope");
    CHECK(c.bos_token_id == 128000 && c.eos_token_id == 128001 && c.num_eos_token_ids == 3 &&
              c.eos_token_ids[1] == 128008 && c.eos_token_ids[2] == 128009, "llama eos list");
    CHECK(c.max_position_embeddings == 131072 && c.tie_word_embeddings == 1, "llama misc");
    pk_hf_config_attention_params(&c, &ap);
    CHECK(ap.rope_scaling == PK_ROPE_SCALING_LLAMA3 && ap.rope_factor == 32.0f &&
              ap.rope_original_max_position == 8192, "llama attention params");

    CHECK(parse_cfg(QWEN3_V5, &c, err, sizeof err) == PK_OK, "qwen3 v5: %s", err);
    CHECK(c.rope_theta == 1e6 && c.rope_scaling == PK_ROPE_SCALING_NONE &&
              strcmp(c.dtype, "bfloat16") == 0 && c.hidden_size == 2048, "qwen3 v5 values");
    CHECK(parse_cfg(LLAMA_V5, &c, err, sizeof err) == PK_OK, "llama v5: %s", err);
    CHECK(c.rope_theta == 500000.0 && c.rope_scaling == PK_ROPE_SCALING_LLAMA3 &&
              c.rope_factor == 32.0 && c.rope_original_max_position == 8192, "llama v5 rope");
    CHECK(c.tie_word_embeddings == 0 && c.bos_token_id == -1 && c.eos_token_id == -1,
          "llama v5 defaults");

    CHECK(parse_cfg(LLAMA_MIN, &c, err, sizeof err) == PK_OK, "llama min: %s", err);
    CHECK(c.num_key_value_heads == 4 && c.head_dim == 16 && c.rope_theta == 10000.0 &&
              c.rms_norm_eps == 1e-6 && c.max_position_embeddings == 2048 &&
              c.tie_word_embeddings == 0 && c.bos_token_id == -1 && c.eos_token_id == -1 &&
              c.num_eos_token_ids == 0 && c.dtype[0] == '\0', "llama defaults");
    /* Qwen3 without head_dim: transformers' default 128, not hidden / heads */
    const char *q = "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 64,"
                    " \"intermediate_size\": 128, \"num_attention_heads\": 4,"
                    " \"num_hidden_layers\": 2, \"vocab_size\": 100, \"head_dim\": null}";
    CHECK(parse_cfg(q, &c, err, sizeof err) == PK_OK && c.head_dim == 128 &&
              c.max_position_embeddings == 32768, "qwen3 defaults: %s", err);

    /* optional keys */
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"default\"}", PK_OK, NULL, NULL);
    CFG_ERR(", \"rope_scaling\": null, \"rope_theta\": 1e4", PK_OK, NULL, NULL);
    CFG_ERR(", \"eos_token_id\": [1,2,3,4,5,6,7,8,9,10]", PK_OK, NULL, NULL);
    CHECK(parse_cfg("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64,"
                    " \"intermediate_size\": 128, \"num_attention_heads\": 4,"
                    " \"num_hidden_layers\": 2, \"vocab_size\": 100,"
                    " \"eos_token_id\": [1,2,3,4,5,6,7,8,9,10]}",
                    &c, err, sizeof err) == PK_OK &&
              c.num_eos_token_ids == 8 && c.eos_token_ids[7] == 8 && c.eos_token_id == 1,
          "eos list keeps 8: %s", err);
    CFG_ERR(", \"eos_token_id\": []", PK_OK, NULL, NULL);
    CFG_ERR(", \"max_position_embeddings\": 4096.0", PK_OK, NULL, NULL);

    /* load from a directory */
    char *dir = make_dir("cfg_dir");
    write_text(path_in(dir, "config.json"), QWEN3_0_6B);
    CHECK(pk_hf_config_load(dir, &c, err, sizeof err) == PK_OK && c.vocab_size == 151936,
          "load: %s", err);
    char *bad = make_dir("cfg_bad_arch");
    write_text(path_in(bad, "config.json"),
               "{\"architectures\": [\"MistralForCausalLM\"], \"vocab_size\": 5}");
    char want[600];
    snprintf(want, sizeof want,
             "unsupported architecture 'MistralForCausalLM' in %s/config.json (pk runs "
             "Qwen3ForCausalLM, LlamaForCausalLM)", bad);
    CHECK(pk_hf_config_load(bad, &c, err, sizeof err) == PK_ERR_UNSUPPORTED && strstr(err, want),
          "arch message: %s", err);
    CHECK(pk_hf_config_load(path_in(g_tmp, "no_such_dir"), &c, err, sizeof err) == PK_ERR_IO &&
              strstr(err, "no_such_dir/config.json"), "missing config: %s", err);
    CHECK(pk_hf_config_load(NULL, &c, err, sizeof err) == PK_ERR_INVALID_ARGUMENT, "NULL dir");
}

static void test_config_errors(void) {
    pk_hf_config c;
    char err[512];
    CHECK(pk_hf_config_parse("", 0, "x/config.json", &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "x/config.json is not valid JSON"), "empty: %s", err);
    CHECK(parse_cfg("{\"a\": ", &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "not valid JSON"), "truncated: %s", err);
    CHECK(parse_cfg("[1]", &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "not a JSON object"), "array: %s", err);
    CHECK(parse_cfg("{} {}", &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "unexpected bytes"), "trailing: %s", err);
    CHECK(parse_cfg("{}", &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "missing key 'architectures' in m/config.json"), "no arch: %s", err);
    CHECK(parse_cfg("{\"architectures\": []}", &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "architectures"), "empty arch: %s", err);
    CHECK(parse_cfg("{\"architectures\": \"LlamaForCausalLM\"}", &c, err, sizeof err) ==
              PK_ERR_FORMAT && strstr(err, "list"), "arch string: %s", err);
    CHECK(parse_cfg("{\"architectures\": [\"Qwen2ForCausalLM\"]}", &c, err, sizeof err) ==
              PK_ERR_UNSUPPORTED && strstr(err, "'Qwen2ForCausalLM'"), "qwen2: %s", err);
    CHECK(pk_hf_config_parse(NULL, 0, NULL, NULL, err, sizeof err) == PK_ERR_INVALID_ARGUMENT,
          "NULL out");
    CHECK(pk_hf_config_parse("{\0}", 3, NULL, &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "config.json"), "embedded NUL: %s", err);

    const char *no_vocab = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64,"
                           " \"intermediate_size\": 128, \"num_attention_heads\": 4,"
                           " \"num_hidden_layers\": 2}";
    CHECK(parse_cfg(no_vocab, &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "missing key 'vocab_size' in m/config.json"), "no vocab: %s", err);
    CFG_ERR(", \"hidden_size\": 0", PK_ERR_FORMAT, "'hidden_size' = 0", "out of range");
    CFG_ERR(", \"hidden_size\": -64", PK_ERR_FORMAT, "'hidden_size' = -64", NULL);
    CFG_ERR(", \"hidden_size\": 64.5", PK_ERR_FORMAT, "'hidden_size'", "64.5, not an integer");
    CFG_ERR(", \"hidden_size\": \"64\"", PK_ERR_FORMAT, "'hidden_size'", "not an integer");
    CFG_ERR(", \"vocab_size\": 3000000000", PK_ERR_FORMAT, "'vocab_size' = 3000000000",
            "2147483647");
    CFG_ERR(", \"vocab_size\": 1e300", PK_ERR_FORMAT, "'vocab_size'", "not an integer");
    CFG_ERR(", \"num_hidden_layers\": 0", PK_ERR_FORMAT, "'num_hidden_layers' = 0", NULL);
    CFG_ERR(", \"num_attention_heads\": 32, \"num_key_value_heads\": 6", PK_ERR_FORMAT,
            "num_attention_heads 32", "num_key_value_heads 6");
    CFG_ERR(", \"num_key_value_heads\": 8", PK_ERR_FORMAT, "'num_key_value_heads' = 8", "[1, 4]");
    CFG_ERR(", \"num_key_value_heads\": 0", PK_ERR_FORMAT, "'num_key_value_heads' = 0", NULL);
    CFG_ERR(", \"head_dim\": 65", PK_ERR_FORMAT, "head_dim 65", "odd");
    CFG_ERR(", \"head_dim\": 1024", PK_ERR_FORMAT, "'head_dim' = 1024", "512");
    CFG_ERR(", \"head_dim\": 0", PK_ERR_FORMAT, "'head_dim' = 0", NULL);
    CFG_ERR(", \"num_attention_heads\": 3", PK_ERR_FORMAT, "hidden_size 64", "num_attention_heads 3");
    CFG_ERR(", \"hidden_size\": 4096, \"num_attention_heads\": 4", PK_ERR_FORMAT, "head_dim 1024",
            NULL);
    CFG_ERR(", \"rms_norm_eps\": -1e-6", PK_ERR_FORMAT, "'rms_norm_eps' = -1e-06", NULL);
    CFG_ERR(", \"rms_norm_eps\": 0", PK_ERR_FORMAT, "'rms_norm_eps'", NULL);
    CFG_ERR(", \"rope_theta\": 0", PK_ERR_FORMAT, "'rope_theta' = 0", NULL);
    /* positive doubles that are 0 as the fp32 the layers take: refused here, naming the key */
    CFG_ERR(", \"rms_norm_eps\": 1e-300", PK_ERR_FORMAT, "'rms_norm_eps' = 1e-300", NULL);
    CFG_ERR(", \"rope_theta\": 1e-60", PK_ERR_FORMAT, "'rope_theta' = 1e-60", NULL);
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 1e-50, \"low_freq_factor\":"
            " 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
            PK_ERR_FORMAT, "'rope_scaling.factor' = 1e-50", NULL);
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\":"
            " 1.0, \"high_freq_factor\": 1.00000001, \"original_max_position_embeddings\": 8192}",
            PK_ERR_FORMAT, "high_freq_factor 1", "must exceed low_freq_factor 1");
    CFG_ERR(", \"rope_theta\": \"1e4\"", PK_ERR_FORMAT, "'rope_theta'", "not a number");
    CFG_ERR(", \"max_position_embeddings\": 0", PK_ERR_FORMAT, "'max_position_embeddings' = 0",
            NULL);
    CFG_ERR(", \"tie_word_embeddings\": 1", PK_ERR_FORMAT, "'tie_word_embeddings'",
            "not true or false");
    CFG_ERR(", \"bos_token_id\": -3", PK_ERR_FORMAT, "'bos_token_id' = -3", NULL);
    CFG_ERR(", \"eos_token_id\": [1, \"2\"]", PK_ERR_FORMAT, "'eos_token_id[1]'", NULL);
    CFG_ERR(", \"eos_token_id\": 1.5", PK_ERR_FORMAT, "'eos_token_id'", "1.5");
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}", PK_ERR_UNSUPPORTED,
            "rope scaling type 'yarn'", "m/config.json");
    CFG_ERR(", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}", PK_ERR_UNSUPPORTED,
            "'linear'", NULL);
    CFG_ERR(", \"rope_parameters\": {\"rope_type\": \"dynamic\", \"rope_theta\": 1e4}",
            PK_ERR_UNSUPPORTED, "'dynamic'", "rope_parameters");
    CFG_ERR(", \"rope_scaling\": {\"factor\": 2.0}", PK_ERR_FORMAT, "rope_type", NULL);
    CFG_ERR(", \"rope_scaling\": 3", PK_ERR_FORMAT, "'rope_scaling'", NULL);
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1.0,"
            " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
            PK_ERR_FORMAT, "missing key 'rope_scaling.factor'", NULL);
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\":"
            " 4.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
            PK_ERR_FORMAT, "high_freq_factor 4", "low_freq_factor 4");
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\":"
            " 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 0}",
            PK_ERR_FORMAT, "'rope_scaling.original_max_position_embeddings' = 0", NULL);
    CFG_ERR(", \"rope_parameters\": {\"rope_theta\": -5}", PK_ERR_FORMAT,
            "'rope_parameters.rope_theta' = -5", NULL);
    CFG_ERR(", \"hidden_act\": \"gelu\"", PK_ERR_UNSUPPORTED, "hidden_act 'gelu'", NULL);
    CFG_ERR(", \"attention_bias\": true", PK_ERR_UNSUPPORTED, "'attention_bias' = true", NULL);
    CFG_ERR(", \"mlp_bias\": true", PK_ERR_UNSUPPORTED, "'mlp_bias' = true", NULL);
    CFG_ERR(", \"use_sliding_window\": true", PK_ERR_UNSUPPORTED, "use_sliding_window", NULL);
    CFG_ERR(", \"layer_types\": [\"full_attention\", \"sliding_attention\"]", PK_ERR_UNSUPPORTED,
            "'layer_types'[1] = 'sliding_attention'", NULL);
    CFG_ERR(", \"torch_dtype\": 5", PK_ERR_FORMAT, "'torch_dtype'", NULL);
    /* Python's json keeps the last of two equal keys, cJSON the first: refuse them */
    CHECK(parse_cfg("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64,"
                    " \"intermediate_size\": 128, \"num_attention_heads\": 4,"
                    " \"num_hidden_layers\": 2, \"vocab_size\": 100, \"hidden_size\": 9}",
                    &c, err, sizeof err) == PK_ERR_FORMAT &&
              strstr(err, "duplicate key 'hidden_size' in m/config.json"), "dup key: %s", err);
    CFG_ERR(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"rope_type\": \"yarn\"}", PK_ERR_FORMAT,
            "duplicate key 'rope_type' in m/config.json", NULL);
}

/* ---- weights ------------------------------------------------------------------------------ */

static void expect_weights_error(int line, const char *dir, pk_status want, const char *n1,
                                 const char *n2) {
    pk_weights *w = (pk_weights *)1;
    char err[1024] = "";
    pk_status s = pk_weights_open(dir, &w, err, sizeof err);
    CHECK(s == want, "line %d: status %d, want %d (%s)", line, (int)s, (int)want, err);
    CHECK(w == NULL, "line %d: out NULL on error", line);
    CHECK(!n1 || strstr(err, n1), "line %d: message '%s' lacks '%s'", line, err, n1);
    CHECK(!n2 || strstr(err, n2), "line %d: message '%s' lacks '%s'", line, err, n2);
}
#define W_ERR(dir, want, n1, n2) expect_weights_error(__LINE__, dir, want, n1, n2)

static void test_weights_single(void) {
    uint64_t seed = 42;
    enum { R = 4, C = 6, N = R * C };
    uint16_t bf[N], h[N];
    uint32_t f[N];
    for (int i = 0; i < N; i++) {
        float v = check_rand_f32(&seed) * (float)(1 << (i % 12)) * 1e-3f;
        bf[i] = pk_f32_to_bf16(v);
        uint32_t u;
        memcpy(&u, &v, 4);
        f[i] = u ^ (uint32_t)(check_rand_u64(&seed) & 0xffff); /* exercise rounding bits */
        h[i] = (uint16_t)(check_rand_u64(&seed) & 0xffff);
    }
    f[0] = 0x3f808000u; /* tie → even (down) */
    f[1] = 0x3f818000u; /* tie → even (up) */
    f[2] = 0x7f7fffffu; /* max float rounds to inf */
    f[3] = 0x00000001u; /* smallest subnormal */
    f[4] = 0xffc00000u; /* NaN */
    h[0] = 0x0001; h[1] = 0x7bff; h[2] = 0xfc00; h[3] = 0x7e00; h[4] = 0x8000;
    int64_t ids[3] = {1, 2, 3};
    spec s[] = {
        {"model.embed_tokens.weight", "BF16", 2, {R, C}, bf, sizeof bf},
        {"model.norm.weight", "F16", 2, {R, C}, h, sizeof h},
        {"lm_head.weight", "F32", 2, {R, C}, f, sizeof f},
        {"position_ids", "I64", 1, {3}, ids, sizeof ids},
    };
    char *dir = make_dir("single");
    blob b = build_st(s, 4, 0);
    write_file(path_in(dir, "model.safetensors"), b.bytes, b.len);
    free(b.bytes);
    pk_weights *w = NULL;
    char err[1024];
    CHECK(pk_weights_open(dir, &w, err, sizeof err) == PK_OK && w, "open single: %s", err);
    if (!w) return;
    CHECK(pk_weights_count(w) == 4 && strcmp(pk_weights_dir(w), dir) == 0, "count/dir");
    CHECK(pk_weights_has(w, "lm_head.weight") && !pk_weights_has(w, "lm_head"), "has");
    CHECK(pk_weights_name(w, 0) && strcmp(pk_weights_name(w, 0), "lm_head.weight") == 0 &&
              pk_weights_name(w, 4) == NULL, "names in order");
    int64_t dims[2] = {R, C};
    const pk_bf16 *p = NULL;
    CHECK(pk_weights_get_bf16(w, "model.embed_tokens.weight", 2, dims, &p, err, sizeof err) ==
              PK_OK, "bf16: %s", err);
    CHECK(p && p == pk_weights_find(w, "model.embed_tokens.weight")->data, "bf16 is zero copy");
    CHECK(p && memcmp(p, bf, sizeof bf) == 0, "bf16 values");
    CHECK(pk_weights_bytes_handed_out(w) == N * 2 && pk_weights_bytes_copied(w) == 0, "stats 1");
    CHECK(pk_weights_get_bf16(w, "model.norm.weight", 2, dims, &p, err, sizeof err) == PK_OK,
          "f16: %s", err);
    int bad = 0;
    for (int i = 0; p && i < N; i++) bad += p[i] != pk_f32_to_bf16(pk_f16_to_f32(h[i]));
    CHECK(p && bad == 0, "f16 → bf16 exact: %d mismatches", bad);
    CHECK(p && p[0] == f32_bits_to_bf16(0x33800000u) && p[1] == 0x4780 && p[2] == 0xff80 &&
              (p[3] & 0x7fff) > 0x7f80 && p[4] == 0x8000,
          "f16 specials %04x %04x %04x %04x %04x", p[0], p[1], p[2], p[3], p[4]);
    const pk_bf16 *p16 = p;
    CHECK(pk_weights_get_bf16(w, "lm_head.weight", 2, dims, &p, err, sizeof err) == PK_OK,
          "f32: %s", err);
    bad = 0;
    for (int i = 0; p && i < N; i++) bad += p[i] != f32_bits_to_bf16(f[i]);
    CHECK(p && bad == 0, "f32 → bf16 exact: %d mismatches", bad);
    CHECK(p && p[0] == 0x3f80 && p[1] == 0x3f82 && p[2] == 0x7f80 && p[3] == 0x0000 &&
              (p[4] & 0x7fff) > 0x7f80, "f32 specials");
    CHECK(pk_weights_bytes_handed_out(w) == 3 * N * 2 && pk_weights_bytes_copied(w) == 2 * N * 2,
          "stats 2: %lld %lld", (long long)pk_weights_bytes_handed_out(w),
          (long long)pk_weights_bytes_copied(w));
    /* asking again returns the same copy and counts nothing more (tied embeddings) */
    CHECK(pk_weights_get_bf16(w, "model.norm.weight", 2, dims, &p, err, sizeof err) == PK_OK &&
              p == p16, "second request: same copy");
    CHECK(pk_weights_bytes_handed_out(w) == 3 * N * 2 && pk_weights_bytes_copied(w) == 2 * N * 2,
          "stats 3");

    /* errors */
    CHECK(pk_weights_get_bf16(w, "model.layers.3.mlp.up_proj.weight", 2, dims, &p, err,
                              sizeof err) == PK_ERR_FORMAT && p == NULL,
          "missing status");
    char want[1024];
    snprintf(want, sizeof want, "missing tensor 'model.layers.3.mlp.up_proj.weight' in %s", dir);
    CHECK(strstr(err, want), "missing message: %s", err);
    int64_t wrong[2] = {C, R};
    CHECK(pk_weights_get_bf16(w, "lm_head.weight", 2, wrong, &p, err, sizeof err) ==
                  PK_ERR_SHAPE && strstr(err, "tensor 'lm_head.weight'") &&
              strstr(err, "has shape [4, 6], expected [6, 4]") && strstr(err, "model.safetensors"),
          "shape message: %s", err);
    int64_t flat[1] = {N};
    CHECK(pk_weights_get_bf16(w, "lm_head.weight", 1, flat, &p, err, sizeof err) ==
                  PK_ERR_SHAPE && strstr(err, "has shape [4, 6], expected [24]"),
          "ndim message: %s", err);
    int64_t three[1] = {3};
    CHECK(pk_weights_get_bf16(w, "position_ids", 1, three, &p, err, sizeof err) == PK_ERR_DTYPE &&
              strstr(err, "'position_ids'") && strstr(err, "I64"), "dtype message: %s", err);
    CHECK(pk_weights_get_bf16(w, "lm_head.weight", 9, dims, &p, err, sizeof err) ==
              PK_ERR_INVALID_ARGUMENT, "ndim 9");
    CHECK(pk_weights_get_bf16(w, "lm_head.weight", 2, dims, NULL, err, sizeof err) ==
              PK_ERR_INVALID_ARGUMENT, "NULL data");
    pk_weights_close(w);
    pk_weights_close(NULL);
}

static void test_weights_misaligned(void) {
    uint16_t bf[5] = {0x1234, 0x3f80, 0xbf80, 0x7f80, 0x0001};
    spec s[] = {{"w", "BF16", 1, {5}, bf, sizeof bf}};
    char *dir = make_dir("odd");
    blob b = build_st(s, 1, 1);
    CHECK(((8 + (size_t)b.bytes[0]) & 1) == 1, "data section starts at an odd offset");
    write_file(path_in(dir, "model.safetensors"), b.bytes, b.len);
    free(b.bytes);
    pk_weights *w = NULL;
    char err[512];
    CHECK(pk_weights_open(dir, &w, err, sizeof err) == PK_OK, "open odd: %s", err);
    if (!w) return;
    const pk_st_tensor *t = pk_weights_find(w, "w");
    CHECK(t && ((uintptr_t)t->data & 1) == 1, "mapped data is at an odd address");
    if (!t) { pk_weights_close(w); return; }
    int64_t dims[1] = {5};
    const pk_bf16 *p = NULL;
    CHECK(pk_weights_get_bf16(w, "w", 1, dims, &p, err, sizeof err) == PK_OK, "get odd: %s", err);
    CHECK(p && (const void *)p != t->data && ((uintptr_t)p & 1) == 0, "odd bf16 is copied");
    CHECK(p && memcmp(p, bf, sizeof bf) == 0, "odd bf16 values");
    CHECK(pk_weights_bytes_copied(w) == 10 && pk_weights_bytes_handed_out(w) == 10, "odd stats");
    pk_weights_close(w);
}

static void write_shard(const char *dir, const char *file, const spec *s, int n) {
    blob b = build_st(s, n, 0);
    write_file(path_in(dir, file), b.bytes, b.len);
    free(b.bytes);
}

static void test_weights_sharded(void) {
    uint16_t a[4] = {1, 2, 3, 4}, bb[2] = {5, 6};
    uint32_t c[3] = {0x3f800000u, 0x40000000u, 0x3f808001u};
    spec s1[] = {{"model.embed_tokens.weight", "BF16", 2, {2, 2}, a, sizeof a},
                 {"extra.not.in.index", "BF16", 1, {2}, bb, sizeof bb}};
    spec s2[] = {{"model.norm.weight", "BF16", 1, {2}, bb, sizeof bb},
                 {"lm_head.weight", "F32", 1, {3}, c, sizeof c}};
    const char *index =
        "{\"metadata\": {\"total_size\": 26}, \"weight_map\": {"
        "\"lm_head.weight\": \"model-00002-of-00002.safetensors\","
        "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
        "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
    char *dir = make_dir("sharded");
    write_shard(dir, "model-00001-of-00002.safetensors", s1, 2);
    write_shard(dir, "model-00002-of-00002.safetensors", s2, 2);
    write_text(path_in(dir, "model.safetensors.index.json"), index);
    pk_weights *w = NULL;
    char err[1024];
    CHECK(pk_weights_open(dir, &w, err, sizeof err) == PK_OK, "open sharded: %s", err);
    if (w) {
        CHECK(pk_weights_count(w) == 3, "index lists 3 tensors (%d)", pk_weights_count(w));
        CHECK(!pk_weights_has(w, "extra.not.in.index"), "unlisted shard tensor is hidden");
        int64_t d22[2] = {2, 2}, d2[1] = {2}, d3[1] = {3};
        const pk_bf16 *p;
        CHECK(pk_weights_get_bf16(w, "model.embed_tokens.weight", 2, d22, &p, err, sizeof err) ==
                  PK_OK && memcmp(p, a, sizeof a) == 0, "shard 1 tensor: %s", err);
        CHECK(pk_weights_get_bf16(w, "model.norm.weight", 1, d2, &p, err, sizeof err) == PK_OK &&
                  memcmp(p, bb, sizeof bb) == 0, "shard 2 tensor: %s", err);
        CHECK(pk_weights_get_bf16(w, "lm_head.weight", 1, d3, &p, err, sizeof err) == PK_OK &&
                  p[0] == 0x3f80 && p[1] == 0x4000 && p[2] == 0x3f81, "shard 2 f32: %s", err);
        CHECK(pk_weights_get_bf16(w, "lm_head.weight", 1, d2, &p, err, sizeof err) ==
                  PK_ERR_SHAPE && strstr(err, "model-00002-of-00002.safetensors") &&
                  strstr(err, "[3], expected [2]"), "shard shape message: %s", err);
        CHECK(pk_weights_bytes_handed_out(w) == 18, "sharded bytes %lld",
              (long long)pk_weights_bytes_handed_out(w));
        pk_weights_close(w);
    }

    /* model.safetensors wins over the index */
    char *both = make_dir("both");
    write_shard(both, "model.safetensors", s2, 2);
    write_text(path_in(both, "model.safetensors.index.json"), "not json");
    CHECK(pk_weights_open(both, &w, err, sizeof err) == PK_OK && pk_weights_count(w) == 2,
          "single file preferred: %s", err);
    pk_weights_close(w);

    /* index errors */
    char *d = make_dir("idx_slash");
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"sub/model.safetensors\"}}");
    W_ERR(d, PK_ERR_FORMAT, "shard name 'sub/model.safetensors' of tensor 'a'",
          "model.safetensors.index.json");
    d = make_dir("idx_dotdot");
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"..\"}}");
    W_ERR(d, PK_ERR_FORMAT, "shard name '..'", NULL);
    d = make_dir("idx_dotdot2");
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"x..safetensors\", \"b\": \"\"}}");
    W_ERR(d, PK_ERR_FORMAT, "shard name 'x..safetensors'", NULL);
    d = make_dir("idx_missing_tensor");
    write_shard(d, "s1.safetensors", s1, 2);
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"model.embed_tokens.weight\": \"s1.safetensors\","
               " \"model.layers.0.mlp.up_proj.weight\": \"s1.safetensors\"}}");
    W_ERR(d, PK_ERR_FORMAT, "tensor 'model.layers.0.mlp.up_proj.weight' listed in",
          "missing from its shard");
    d = make_dir("idx_missing_shard");
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"gone.safetensors\"}}");
    W_ERR(d, PK_ERR_IO, "gone.safetensors", NULL);
    d = make_dir("idx_bad_shard");
    write_file(path_in(d, "bad.safetensors"), "\x05\0\0\0\0\0\0\0{oops", 13);
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"bad.safetensors\"}}");
    W_ERR(d, PK_ERR_FORMAT, "bad.safetensors", "not valid JSON");
    d = make_dir("idx_no_map");
    write_text(path_in(d, "model.safetensors.index.json"), "{\"metadata\": {}}");
    W_ERR(d, PK_ERR_FORMAT, "no \"weight_map\"", "model.safetensors.index.json");
    d = make_dir("idx_empty_map");
    write_text(path_in(d, "model.safetensors.index.json"), "{\"weight_map\": {}}");
    W_ERR(d, PK_ERR_FORMAT, "is empty", NULL);
    d = make_dir("idx_not_string");
    write_text(path_in(d, "model.safetensors.index.json"), "{\"weight_map\": {\"a\": 1}}");
    W_ERR(d, PK_ERR_FORMAT, "tensor 'a'", "not a file name");
    d = make_dir("idx_dup");
    write_shard(d, "s1.safetensors", s1, 2);
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"model.embed_tokens.weight\": \"s1.safetensors\","
               " \"model.embed_tokens.weight\": \"s1.safetensors\"}}");
    W_ERR(d, PK_ERR_FORMAT, "'model.embed_tokens.weight' is listed twice", NULL);
    d = make_dir("idx_bad_json");
    write_text(path_in(d, "model.safetensors.index.json"), "{\"weight_map\": ");
    W_ERR(d, PK_ERR_FORMAT, "model.safetensors.index.json is not valid JSON", NULL);
    d = make_dir("empty_dir");
    W_ERR(d, PK_ERR_IO, "no model.safetensors or model.safetensors.index.json in", "empty_dir");
    W_ERR(path_in(g_tmp, "no_such_model"), PK_ERR_IO, "no_such_model", NULL);
    d = make_dir("bad_single");
    write_file(path_in(d, "model.safetensors"), "\x02\0\0\0\0\0\0\0[]", 10);
    W_ERR(d, PK_ERR_FORMAT, "bad_single/model.safetensors", "not a JSON object");
    W_ERR(NULL, PK_ERR_INVALID_ARGUMENT, NULL, NULL);
}

/* ---- special and oversize files ----------------------------------------------------------- */

/* A sparse file of `size` bytes (no disk blocks). */
static void write_sparse(const char *path, off_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "create %s", path);
    if (fd < 0) return;
    CHECK(ftruncate(fd, size) == 0, "ftruncate %s", path);
    close(fd);
}

static void expect_cfg_load_error(int line, const char *dir, pk_status want, const char *n1, const char *n2) {
    pk_hf_config c;
    char err[1024] = "";
    pk_status s = pk_hf_config_load(dir, &c, err, sizeof err);
    CHECK(s == want, "line %d: status %d, want %d (%s)", line, (int)s, (int)want, err);
    CHECK(!n1 || strstr(err, n1), "line %d: message '%s' lacks '%s'", line, err, n1);
    CHECK(!n2 || strstr(err, n2), "line %d: message '%s' lacks '%s'", line, err, n2);
}
#define CFG_LOAD_ERR(dir, want, n1, n2) expect_cfg_load_error(__LINE__, dir, want, n1, n2)

static void test_special_files(void) {
    char want[1024];
    /* config.json */
    char *d = make_dir("fifo_config");
    CHECK(mkfifo(path_in(d, "config.json"), 0644) == 0, "mkfifo");
    snprintf(want, sizeof want, "%s/config.json is a FIFO, not a regular file", d);
    CFG_LOAD_ERR(d, PK_ERR_IO, want, NULL);
    char err[1024] = "";
    CHECK(pk_model_load(d, NULL, err, sizeof err) == NULL && strstr(err, want), "pk_model_load: %s", err);
    d = make_dir("dir_config");
    make_dir("dir_config/config.json");
    CFG_LOAD_ERR(d, PK_ERR_IO, "config.json is a directory, not a regular file", NULL);
    d = make_dir("dev_config");
    CHECK(symlink("/dev/zero", path_in(d, "config.json")) == 0, "symlink");
    CFG_LOAD_ERR(d, PK_ERR_IO, "config.json is a character device, not a regular file", NULL);
    d = make_dir("big_config");
    write_sparse(path_in(d, "config.json"), (16 << 20) + 1);
    CFG_LOAD_ERR(d, PK_ERR_FORMAT, "config.json is 16777217 bytes, more than a config.json can be", NULL);
    d = make_dir("link_config"); /* a symlink to a regular file is fine */
    write_text(path_in(d, "real.json"), LLAMA_MIN);
    CHECK(symlink("real.json", path_in(d, "config.json")) == 0, "symlink");
    pk_hf_config c;
    CHECK(pk_hf_config_load(d, &c, err, sizeof err) == PK_OK, "symlinked config.json: %s", err);

    /* model.safetensors, the index, a shard */
    d = make_dir("fifo_single");
    CHECK(mkfifo(path_in(d, "model.safetensors"), 0644) == 0, "mkfifo");
    W_ERR(d, PK_ERR_IO, "fifo_single/model.safetensors is a FIFO, not a regular file", NULL);
    d = make_dir("dir_single");
    make_dir("dir_single/model.safetensors");
    W_ERR(d, PK_ERR_IO, "dir_single/model.safetensors is a directory, not a regular file", NULL);
    d = make_dir("dev_single");
    CHECK(symlink("/dev/zero", path_in(d, "model.safetensors")) == 0, "symlink");
    W_ERR(d, PK_ERR_IO, "model.safetensors is a character device", NULL);
    d = make_dir("fifo_index");
    CHECK(mkfifo(path_in(d, "model.safetensors.index.json"), 0644) == 0, "mkfifo");
    W_ERR(d, PK_ERR_IO, "fifo_index/model.safetensors.index.json is a FIFO, not a regular file", NULL);
    d = make_dir("dir_index");
    make_dir("dir_index/model.safetensors.index.json");
    W_ERR(d, PK_ERR_IO, "model.safetensors.index.json is a directory", NULL);
    d = make_dir("big_index");
    write_sparse(path_in(d, "model.safetensors.index.json"), (64 << 20) + 1);
    W_ERR(d, PK_ERR_FORMAT, "model.safetensors.index.json is 67108865 bytes",
          "more than a model.safetensors.index.json can be");
    d = make_dir("fifo_shard");
    CHECK(mkfifo(path_in(d, "s2.safetensors"), 0644) == 0, "mkfifo");
    uint16_t a[2] = {1, 2};
    spec s1[] = {{"a", "BF16", 1, {2}, a, sizeof a}};
    write_shard(d, "s1.safetensors", s1, 1);
    write_text(path_in(d, "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}");
    W_ERR(d, PK_ERR_IO, "fifo_shard/s2.safetensors is a FIFO, not a regular file", NULL);
    d = make_dir("dir_shard");
    make_dir("dir_shard/s1.safetensors");
    write_text(path_in(d, "model.safetensors.index.json"), "{\"weight_map\": {\"a\": \"s1.safetensors\"}}");
    W_ERR(d, PK_ERR_IO, "dir_shard/s1.safetensors is a directory, not a regular file", NULL);
    pk_safetensors *st = (pk_safetensors *)1;
    CHECK(pk_safetensors_open(path_in(g_tmp, "fifo_shard/s2.safetensors"), &st, err, sizeof err) == PK_ERR_IO &&
              st == NULL && strstr(err, "is a FIFO"), "pk_safetensors_open on a FIFO: %s", err);
}

/* ---- check_tensors ------------------------------------------------------------------------ */

/* A one-layer Qwen3 of hidden size 8 whose tensors are all of dtype ("BF16", "F16", "F32"),
 * small random values; element bad_index of tensor bad_name (NULL: none) gets the value whose
 * bits are bad_bits (in that dtype). Tied embeddings: the embedding is also the LM head. */
enum { TM_V = 16, TM_H = 8, TM_I = 16, TM_HQ = 2, TM_HKV = 1, TM_D = 8 };
static const char *TINY_NAMES[] = {
    "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
    "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
    "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
    "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
    "model.layers.0.post_attention_layernorm.weight", "model.layers.0.mlp.gate_proj.weight",
    "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.norm.weight",
};
static const int64_t TINY_DIMS[][2] = {
    {TM_V, TM_H}, {TM_H, 0}, {TM_HQ * TM_D, TM_H}, {TM_HKV * TM_D, TM_H}, {TM_HKV * TM_D, TM_H},
    {TM_H, TM_HQ * TM_D}, {TM_D, 0}, {TM_D, 0}, {TM_H, 0}, {TM_I, TM_H}, {TM_I, TM_H}, {TM_H, TM_I}, {TM_H, 0},
};
enum { TINY_N = (int)(sizeof TINY_NAMES / sizeof TINY_NAMES[0]) };

static char *write_tiny_model(const char *name, const char *dtype, const char *bad_name, int64_t bad_index,
                              uint32_t bad_bits) {
    char *dir = make_dir(name);
    const size_t esize = strcmp(dtype, "F32") == 0 ? 4 : 2;
    spec s[TINY_N];
    unsigned char *bufs[TINY_N];
    uint64_t seed = 7;
    for (int i = 0; i < TINY_N; i++) {
        const int nd = TINY_DIMS[i][1] ? 2 : 1;
        const int64_t numel = TINY_DIMS[i][0] * (nd == 2 ? TINY_DIMS[i][1] : 1);
        bufs[i] = malloc((size_t)numel * esize);
        for (int64_t j = 0; j < numel; j++) {
            float v = check_rand_f32(&seed) * 0.1f;
            uint32_t u;
            memcpy(&u, &v, 4);
            if (esize == 2) u = strcmp(dtype, "BF16") == 0 ? pk_f32_to_bf16(v) : 0x2000u | (u >> 16 & 0x83ffu);
            if (bad_name && strcmp(bad_name, TINY_NAMES[i]) == 0 && j == bad_index) u = bad_bits;
            memcpy(bufs[i] + (size_t)j * esize, &u, esize); /* little-endian host */
        }
        s[i] = (spec){TINY_NAMES[i], dtype, nd, {TINY_DIMS[i][0], TINY_DIMS[i][1]}, bufs[i], (size_t)numel * esize};
    }
    blob b = build_st(s, TINY_N, 0);
    write_file(path_in(dir, "model.safetensors"), b.bytes, b.len);
    free(b.bytes);
    for (int i = 0; i < TINY_N; i++) free(bufs[i]);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": %d, \"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": 1, \"num_attention_heads\": %d, "
             "\"num_key_value_heads\": %d, \"head_dim\": %d, \"max_position_embeddings\": 64, "
             "\"tie_word_embeddings\": true}",
             TM_V, TM_H, TM_I, TM_HQ, TM_HKV, TM_D);
    write_text(path_in(dir, "config.json"), cfg);
    return dir;
}

/* Loads dir on the CPU with check_tensors; returns whether it loaded, err the reason. */
static int load_checked(const char *dir, int check, char *err, size_t err_len) {
    pk_config cfg = pk_config_default();
    cfg.backend = PK_BACKEND_CPU;
    cfg.num_workers = 1;
    cfg.max_seq_length = 64;
    pk_model_options o = pk_model_options_default();
    o.check_tensors = check;
    pk_model *m = pk_model_load_with(dir, &cfg, &o, err, err_len);
    pk_model_free(m);
    return m != NULL;
}

static void expect_bad_weight(int line, const char *dir, const char *n1, const char *n2) {
    char err[1024] = "";
    CHECK(load_checked(dir, 0, err, sizeof err), "line %d: %s must load unchecked: %s", line, dir, err);
    CHECK(!load_checked(dir, 1, err, sizeof err), "line %d: %s must fail with check_tensors", line, dir);
    CHECK(strstr(err, n1) && strstr(err, n2) && strstr(err, "model.safetensors"),
          "line %d: message '%s' lacks '%s' / '%s' / the file", line, err, n1, n2);
}
#define BAD_WEIGHT(dir, n1, n2) expect_bad_weight(__LINE__, dir, n1, n2)

static void test_check_tensors(void) {
    char err[1024] = "";
    const char *dtypes[] = {"BF16", "F16", "F32"};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "tiny_clean_%s", dtypes[i]);
        char *d = write_tiny_model(name, dtypes[i], NULL, 0, 0);
        CHECK(load_checked(d, 1, err, sizeof err), "clean %s model with check_tensors: %s", dtypes[i], err);
        CHECK(load_checked(d, 0, err, sizeof err), "clean %s model: %s", dtypes[i], err);
    }
    BAD_WEIGHT(write_tiny_model("tiny_nan_bf16", "BF16", "model.layers.0.mlp.up_proj.weight", 21, 0x7fc0u),
               "tensor 'model.layers.0.mlp.up_proj.weight' [16, 8]",
               "holds NaN at element 21 (row 2, column 5) (BF16)");
    BAD_WEIGHT(write_tiny_model("tiny_inf_bf16", "BF16", "model.norm.weight", 3, 0xff80u), "'model.norm.weight'",
               "holds -inf at element 3 (BF16)");
    BAD_WEIGHT(write_tiny_model("tiny_nan_f32", "F32", "model.layers.0.self_attn.k_proj.weight", 0, 0x7fc00001u),
               "'model.layers.0.self_attn.k_proj.weight'", "holds NaN at element 0 (row 0, column 0) (F32)");
    BAD_WEIGHT(write_tiny_model("tiny_inf_f32", "F32", "model.embed_tokens.weight", 127, 0x7f800000u),
               "'model.embed_tokens.weight' [16, 8]", "holds +inf at element 127 (row 15, column 7) (F32)");
    BAD_WEIGHT(write_tiny_model("tiny_big_f32", "F32", "model.layers.0.mlp.down_proj.weight", 9, 0x7f7fffffu),
               "'model.layers.0.mlp.down_proj.weight'", "element 9 (row 0, column 9) is 3.40282e+38, beyond bf16");
    BAD_WEIGHT(write_tiny_model("tiny_inf_f16", "F16", "model.layers.0.self_attn.o_proj.weight", 17, 0x7c00u),
               "'model.layers.0.self_attn.o_proj.weight'", "holds +inf at element 17 (row 1, column 1) (F16)");
    BAD_WEIGHT(write_tiny_model("tiny_nan_f16", "F16", "model.layers.0.input_layernorm.weight", 7, 0xfe00u),
               "'model.layers.0.input_layernorm.weight'", "holds NaN at element 7 (F16)");
    /* the option itself: only 0 or 1 */
    char *d = path_in(g_tmp, "tiny_clean_BF16");
    const int bad[] = {-1, 2, 1000};
    for (int i = 0; i < 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "check_tensors is %d", bad[i]);
        CHECK(!load_checked(d, bad[i], err, sizeof err) && strstr(err, want), "check_tensors %d: %s", bad[i], err);
    }
    CHECK(pk_model_options_default().check_tensors == 0, "check_tensors is off by default");

    /* pk_weights: with the check off a BF16 tensor is served from the mapping untouched */
    pk_weights *w = NULL;
    d = path_in(g_tmp, "tiny_nan_bf16");
    CHECK(pk_weights_open(d, &w, err, sizeof err) == PK_OK, "open: %s", err);
    if (w) {
        int64_t dims[2] = {TM_I, TM_H};
        const pk_bf16 *p = NULL;
        CHECK(pk_weights_get_bf16(w, "model.layers.0.mlp.up_proj.weight", 2, dims, &p, err, sizeof err) == PK_OK &&
                  p == pk_weights_find(w, "model.layers.0.mlp.up_proj.weight")->data, "unchecked: zero copy");
        pk_weights_set_check_finite(w, 1); /* the check applies to tensors not yet checked */
        CHECK(pk_weights_get_bf16(w, "model.layers.0.mlp.up_proj.weight", 2, dims, &p, err, sizeof err) ==
                  PK_ERR_FORMAT && p == NULL && strstr(err, "NaN at element 21"), "checked: %s", err);
        pk_weights_close(w);
    }
}

/* Removes a directory tree written by this test (lstat: a symlink is removed, not followed). */
static void remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            char child[1024];
            snprintf(child, sizeof child, "%s/%s", path, de->d_name);
            remove_tree(child);
        }
        if (d) closedir(d);
        if (rmdir(path) != 0) fprintf(stderr, "could not remove %s\n", path);
    } else if (unlink(path) != 0) {
        fprintf(stderr, "could not remove %s\n", path);
    }
}

/* pk_model_load keeps the first error: a wrong-shaped q_proj must be named even though the
 * weights looked up after it (q_norm, k_norm, ...) are fine. */
static void test_model_load_first_error(void) {
    char *dir = make_dir("model_q_proj");
    char cwd[1024], target[1200];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    snprintf(target, sizeof target, "%s/models/pk-tiny/model.safetensors", cwd);
    CHECK(symlink(target, path_in(dir, "model.safetensors")) == 0, "symlink %s", target);
    write_text(path_in(dir, "config.json"),
               "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 4096, "
               "\"hidden_size\": 256, \"intermediate_size\": 768, \"num_hidden_layers\": 4, "
               "\"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 64, "
               "\"max_position_embeddings\": 512, \"tie_word_embeddings\": true}");
    char err[512] = "";
    pk_model *m = pk_model_load(dir, NULL, err, sizeof err);
    CHECK(m == NULL, "the model must not load");
    CHECK(strstr(err, "model.layers.0.self_attn.q_proj.weight") && strstr(err, "[512, 256]"),
          "message '%s' lacks the q_proj tensor and its expected shape [512, 256]", err);
    pk_model_free(m);
}

/* A KV cache pk_new_tensor refuses (here: more than 2^40 elements) fails the load with its
 * message; it must not drop the decoder layer and return a model without it. */
static void test_model_load_kv_cache_error(void) {
    static uint16_t zeros[2048];
    enum { D = 512, HQ = 4, QD = HQ * D };
    spec s[] = {
        {"model.embed_tokens.weight", "BF16", 2, {2, 1}, zeros, 4},
        {"model.layers.0.input_layernorm.weight", "BF16", 1, {1}, zeros, 2},
        {"model.layers.0.self_attn.q_proj.weight", "BF16", 2, {QD, 1}, zeros, 2 * QD},
        {"model.layers.0.self_attn.k_proj.weight", "BF16", 2, {QD, 1}, zeros, 2 * QD},
        {"model.layers.0.self_attn.v_proj.weight", "BF16", 2, {QD, 1}, zeros, 2 * QD},
        {"model.layers.0.self_attn.o_proj.weight", "BF16", 2, {1, QD}, zeros, 2 * QD},
        {"model.layers.0.self_attn.q_norm.weight", "BF16", 1, {D}, zeros, 2 * D},
        {"model.layers.0.self_attn.k_norm.weight", "BF16", 1, {D}, zeros, 2 * D},
        {"model.layers.0.post_attention_layernorm.weight", "BF16", 1, {1}, zeros, 2},
        {"model.layers.0.mlp.gate_proj.weight", "BF16", 2, {1, 1}, zeros, 2},
        {"model.layers.0.mlp.up_proj.weight", "BF16", 2, {1, 1}, zeros, 2},
        {"model.layers.0.mlp.down_proj.weight", "BF16", 2, {1, 1}, zeros, 2},
        {"model.norm.weight", "BF16", 1, {1}, zeros, 2},
    };
    char *dir = make_dir("model_kv_cache");
    blob b = build_st(s, (int)(sizeof s / sizeof s[0]), 0);
    write_file(path_in(dir, "model.safetensors"), b.bytes, b.len);
    free(b.bytes);
    write_text(path_in(dir, "config.json"),
               "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 2, "
               "\"hidden_size\": 1, \"intermediate_size\": 1, \"num_hidden_layers\": 1, "
               "\"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"head_dim\": 512, "
               "\"max_position_embeddings\": 512, \"tie_word_embeddings\": true}");
    pk_config cfg = pk_config_default();
    cfg.max_seq_length = 512;
    cfg.num_pages = 1 << 22; /* [2^22, 256, 4, 512]: 2^41 elements */
    cfg.page_size = 256;
    char err[512] = "";
    pk_model *m = pk_model_load(dir, &cfg, err, sizeof err);
    pk_graph_stats st = {0};
    if (m) pk_kernel_stats(pk_model_kernel(m), &st);
    CHECK(m == NULL, "the model loaded (with %d layers) although its KV cache was refused",
          st.num_layers);
    CHECK(strstr(err, "model.layers.0.k_cache") && strstr(err, "2^40"),
          "message '%s' lacks the cache tensor and the limit", err);
    pk_model_free(m);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/pk_model_files_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    alarm(120); /* a special file that blocks open() or read() ends the test instead of hanging it */
    test_safetensors_good();
    test_safetensors_errors();
    test_config_good();
    test_config_errors();
    test_weights_single();
    test_weights_misaligned();
    test_weights_sharded();
    test_model_load_first_error();
    test_model_load_kv_cache_error();
    test_special_files();
    test_check_tensors();
    remove_tree(g_tmp);
    return check_report("model_files");
}
