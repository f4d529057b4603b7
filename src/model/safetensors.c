// SPDX-License-Identifier: Apache-2.0
/* safetensors.c — parse and validate a safetensors header; map the file read-only.
 *
 * The parsed cJSON tree is kept for the file's lifetime: tensor names and metadata strings
 * point into it. Tensors are stored sorted by name (binary search, duplicate detection); a
 * second order by data offset finds overlapping ranges. JSON numbers arrive as doubles, so
 * every integer is checked to be integral, >= 0 and <= 2^53 before it is used.
 */
#include "model/safetensors.h"
#include "common/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pk reads safetensors data in place and needs a little-endian host"
#endif

#define MAX_EXACT_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact doubles */

struct pk_safetensors {
    char *label;             /* path or caller's label, for messages */
    void *map;               /* mmap'd file, or NULL when parsed from a caller's buffer */
    size_t map_len;
    cJSON *root;             /* parsed header; owns tensor names and metadata strings */
    const cJSON *metadata;   /* "__metadata__" object or NULL */
    pk_st_tensor *tensors;   /* [n], sorted by name */
    int n;
};

static void set_err(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_len, const char *fmt, ...) {
    if (!err || err_len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

size_t pk_st_dtype_size(pk_dtype d) {
    switch (d) {
    case PK_DTYPE_BF16: return 2;
    case PK_DTYPE_FP16: return 2;
    case PK_DTYPE_FP32: return 4;
    case PK_DTYPE_INT32: return 4;
    case PK_DTYPE_INT64: return 8;
    }
    return 0;
}

const char *pk_st_dtype_str(pk_dtype d) {
    switch (d) {
    case PK_DTYPE_BF16: return "BF16";
    case PK_DTYPE_FP16: return "F16";
    case PK_DTYPE_FP32: return "F32";
    case PK_DTYPE_INT32: return "I32";
    case PK_DTYPE_INT64: return "I64";
    }
    return "?";
}

static int dtype_from_str(const char *s, pk_dtype *out) {
    static const struct { const char *name; pk_dtype d; } table[] = {
        {"BF16", PK_DTYPE_BF16}, {"F16", PK_DTYPE_FP16}, {"F32", PK_DTYPE_FP32},
        {"I32", PK_DTYPE_INT32}, {"I64", PK_DTYPE_INT64},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(s, table[i].name) == 0) { *out = table[i].d; return 1; }
    }
    return 0;
}

void pk_st_format_dims(char *buf, size_t len, int ndim, const int64_t *dims) {
    if (!buf || len == 0) return;
    size_t used = 0;
    buf[0] = '\0';
    int w = snprintf(buf, len, "[");
    if (w > 0) used = (size_t)w;
    for (int i = 0; i < ndim && used < len; i++) {
        w = snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
        if (w < 0) return;
        used += (size_t)w;
    }
    if (used < len) snprintf(buf + used, len - used, "]");
}

/* A JSON number that is an exact non-negative integer <= 2^53. */
static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= MAX_EXACT_INT)) return 0; /* also rejects NaN */
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return 0;
    *out = u;
    return 1;
}

/* Describes a bad JSON value for a message: the number, or its JSON type. */
static void describe_json(const cJSON *v, char *buf, size_t len) {
    if (!v) snprintf(buf, len, "missing");
    else if (cJSON_IsNumber(v)) snprintf(buf, len, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, len, "a string");
    else if (cJSON_IsArray(v)) snprintf(buf, len, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, len, "an object");
    else if (cJSON_IsBool(v)) snprintf(buf, len, "a boolean");
    else if (cJSON_IsNull(v)) snprintf(buf, len, "null");
    else snprintf(buf, len, "invalid");
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const pk_st_tensor *)a)->name, ((const pk_st_tensor *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const pk_st_tensor *x = *(const pk_st_tensor *const *)a, *y = *(const pk_st_tensor *const *)b;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

void pk_safetensors_close(pk_safetensors *st) {
    if (!st) return;
    if (st->map) munmap(st->map, st->map_len);
    cJSON_Delete(st->root);
    free(st->tensors);
    free(st->label);
    free(st);
}

/* Fills *t from one header entry; data_base/data_len describe the data section. */
static pk_status parse_entry(const cJSON *e, const char *label, const uint8_t *data_base,
                             uint64_t data_len, uint64_t data_start, pk_st_tensor *t,
                             char *err, size_t err_len) {
    const char *name = e->string;
    char what[64];
    if (name[0] == '\0') {
        set_err(err, err_len, "%s: a tensor in the header has an empty name", label);
        return PK_ERR_FORMAT;
    }
    if (!cJSON_IsObject(e)) {
        describe_json(e, what, sizeof what);
        set_err(err, err_len, "%s: header entry of tensor '%s' is %s, not an object", label,
                name, what);
        return PK_ERR_FORMAT;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) {
        describe_json(dt, what, sizeof what);
        set_err(err, err_len, "%s: \"dtype\" of tensor '%s' is %s, not a string", label, name,
                what);
        return PK_ERR_FORMAT;
    }
    if (!dtype_from_str(dt->valuestring, &t->dtype)) {
        set_err(err, err_len,
                "unsupported dtype %.32s of tensor '%s' in %s (pk reads BF16, F16, F32, I32, I64)",
                dt->valuestring, name, label);
        return PK_ERR_FORMAT;
    }
    if (!cJSON_IsArray(shape)) {
        describe_json(shape, what, sizeof what);
        set_err(err, err_len, "%s: \"shape\" of tensor '%s' is %s, not an array", label, name,
                what);
        return PK_ERR_FORMAT;
    }
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > PK_ST_MAX_DIMS) {
        set_err(err, err_len, "%s: tensor '%s' has %d dims, at most %d are allowed", label, name,
                ndim, PK_ST_MAX_DIMS);
        return PK_ERR_FORMAT;
    }
    t->ndim = ndim;
    /* numel saturates at 2^60 + 1 so neither the product nor numel · dtype size (<= 8) ever
     * overflows; the size check then fails. */
    const uint64_t cap = (uint64_t)1 << 60;
    uint64_t numel = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_u64(d, &v)) {
            describe_json(d, what, sizeof what);
            set_err(err, err_len,
                    "%s: shape entry %d of tensor '%s' is %s, not a non-negative integer", label,
                    i, name, what);
            return PK_ERR_FORMAT;
        }
        t->dims[i] = (int64_t)v;
        if (numel != 0 && v != 0 && numel > cap / v) numel = cap + 1;
        else numel *= v;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
        describe_json(offs, what, sizeof what);
        if (cJSON_IsArray(offs))
            snprintf(what, sizeof what, "an array of %d entries", cJSON_GetArraySize(offs));
        set_err(err, err_len, "%s: \"data_offsets\" of tensor '%s' is %s, not [begin, end]",
                label, name, what);
        return PK_ERR_FORMAT;
    }
    uint64_t begin, end;
    if (!json_u64(offs->child, &begin) || !json_u64(offs->child->next, &end)) {
        const cJSON *bad = json_u64(offs->child, &begin) ? offs->child->next : offs->child;
        describe_json(bad, what, sizeof what);
        set_err(err, err_len,
                "%s: data_offsets of tensor '%s' holds %s, not a non-negative integer", label,
                name, what);
        return PK_ERR_FORMAT;
    }
    if (begin > end) {
        set_err(err, err_len, "%s: data_offsets [%llu, %llu] of tensor '%s' begin after they end",
                label, (unsigned long long)begin, (unsigned long long)end, name);
        return PK_ERR_FORMAT;
    }
    if (end > data_len) {
        set_err(err, err_len,
                "%s: data_offsets [%llu, %llu] of tensor '%s' end beyond the data section "
                "(%llu bytes)",
                label, (unsigned long long)begin, (unsigned long long)end, name,
                (unsigned long long)data_len);
        return PK_ERR_FORMAT;
    }
    size_t esize = pk_st_dtype_size(t->dtype);
    char dims[160];
    if (numel > cap || numel * esize != end - begin) {
        pk_st_format_dims(dims, sizeof dims, t->ndim, t->dims);
        if (numel > cap)
            set_err(err, err_len,
                    "%s: tensor '%s' of shape %s is too large (data_offsets hold %llu bytes)",
                    label, name, dims, (unsigned long long)(end - begin));
        else
            set_err(err, err_len,
                    "%s: tensor '%s' has data_offsets [%llu, %llu] (%llu bytes), but shape %s "
                    "of %s needs %llu bytes",
                    label, name, (unsigned long long)begin, (unsigned long long)end,
                    (unsigned long long)(end - begin), dims, pk_st_dtype_str(t->dtype),
                    (unsigned long long)(numel * esize));
        return PK_ERR_FORMAT;
    }
    t->name = name;
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)(end - begin);
    t->data = data_base + begin;
    t->file_offset = data_start + begin;
    return PK_OK;
}

pk_status pk_safetensors_parse(const void *buf, size_t len, const char *label,
                               pk_safetensors **out, char *err, size_t err_len) {
    if (err && err_len) err[0] = '\0';
    if (!out) {
        set_err(err, err_len, "pk_safetensors_parse: out is NULL");
        return PK_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (!label) label = "<memory>";
    if (!buf && len) {
        set_err(err, err_len, "pk_safetensors_parse: buffer of %s is NULL", label);
        return PK_ERR_INVALID_ARGUMENT;
    }
    const uint8_t *p = buf;
    if (len < 8) {
        set_err(err, err_len, "%s: %zu bytes is too short for a safetensors file (need 8 for "
                "the header length)", label, len);
        return PK_ERR_FORMAT;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > PK_ST_MAX_HEADER_BYTES) {
        set_err(err, err_len, "%s: header length %llu is absurd (more than %llu bytes)", label,
                (unsigned long long)hlen, (unsigned long long)PK_ST_MAX_HEADER_BYTES);
        return PK_ERR_FORMAT;
    }
    if (hlen > len - 8) {
        set_err(err, err_len, "%s: header length %llu exceeds the file size %zu", label,
                (unsigned long long)hlen, len);
        return PK_ERR_FORMAT;
    }
    pk_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->label = strdup(label))) {
        free(st);
        set_err(err, err_len, "%s: out of memory", label);
        return PK_ERR_NO_MEMORY;
    }
    pk_status s = PK_OK;
    pk_st_tensor **by_off = NULL;
    /* A NUL-terminated private copy, so the JSON parser never reads the data section. */
    char *hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        set_err(err, err_len, "%s: out of memory for a %llu-byte header", label,
                (unsigned long long)hlen);
        s = PK_ERR_NO_MEMORY;
        goto fail;
    }
    memcpy(hdr, p + 8, (size_t)hlen);
    hdr[hlen] = '\0';
    const char *end = NULL;
    st->root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
    if (!st->root) {
        size_t at = end && end >= hdr && end <= hdr + hlen ? (size_t)(end - hdr) : 0;
        set_err(err, err_len, "%s: header (%llu bytes) is not valid JSON (error near byte %zu)",
                label, (unsigned long long)hlen, at);
        free(hdr);
        s = PK_ERR_FORMAT;
        goto fail;
    }
    for (const char *q = end; q && q < hdr + hlen; q++) {
        if (*q != ' ' && *q != '\t' && *q != '\r' && *q != '\n') {
            set_err(err, err_len, "%s: unexpected bytes after the JSON header (at byte %zu of %llu)",
                    label, (size_t)(q - hdr), (unsigned long long)hlen);
            free(hdr);
            s = PK_ERR_FORMAT;
            goto fail;
        }
    }
    free(hdr);
    if (!cJSON_IsObject(st->root)) {
        set_err(err, err_len, "%s: header is not a JSON object", label);
        s = PK_ERR_FORMAT;
        goto fail;
    }
    int count = 0;
    for (const cJSON *e = st->root->child; e; e = e->next) {
        if (!e->string) { /* cannot happen for a parsed object, but never trust it */
            set_err(err, err_len, "%s: header entry without a name", label);
            s = PK_ERR_FORMAT;
            goto fail;
        }
        if (strcmp(e->string, "__metadata__") == 0) {
            if (st->metadata) {
                set_err(err, err_len, "%s: duplicate \"__metadata__\" in the header", label);
                s = PK_ERR_FORMAT;
                goto fail;
            }
            if (!cJSON_IsObject(e)) {
                set_err(err, err_len, "%s: \"__metadata__\" is not an object", label);
                s = PK_ERR_FORMAT;
                goto fail;
            }
            for (const cJSON *m = e->child; m; m = m->next) {
                if (!cJSON_IsString(m)) {
                    set_err(err, err_len, "%s: \"__metadata__\" value '%s' is not a string",
                            label, m->string ? m->string : "");
                    s = PK_ERR_FORMAT;
                    goto fail;
                }
            }
            st->metadata = e;
            continue;
        }
        count++;
    }
    if (count > 0) {
        st->tensors = calloc((size_t)count, sizeof *st->tensors);
        by_off = malloc((size_t)count * sizeof *by_off);
        if (!st->tensors || !by_off) {
            set_err(err, err_len, "%s: out of memory for %d tensors", label, count);
            s = PK_ERR_NO_MEMORY;
            goto fail;
        }
    }
    const uint64_t data_start = 8 + hlen;
    const uint64_t data_len = (uint64_t)len - data_start;
    for (const cJSON *e = st->root->child; e; e = e->next) {
        if (e == st->metadata) continue;
        s = parse_entry(e, label, p + data_start, data_len, data_start, &st->tensors[st->n], err,
                        err_len);
        if (s != PK_OK) goto fail;
        st->n++;
    }
    if (st->n > 1) {
        qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, cmp_tensor_name);
        for (int i = 1; i < st->n; i++) {
            if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0) {
                set_err(err, err_len, "%s: duplicate tensor name '%s' in the header", label,
                        st->tensors[i].name);
                s = PK_ERR_FORMAT;
                goto fail;
            }
        }
        for (int i = 0; i < st->n; i++) by_off[i] = &st->tensors[i];
        qsort(by_off, (size_t)st->n, sizeof *by_off, cmp_tensor_offset);
        /* `last` is the non-empty range seen so far that ends furthest. */
        const pk_st_tensor *last = NULL;
        for (int i = 0; i < st->n; i++) {
            const pk_st_tensor *t = by_off[i];
            if (t->nbytes == 0) continue;
            if (last && t->file_offset < last->file_offset + last->nbytes) {
                set_err(err, err_len,
                        "%s: tensors '%s' (data_offsets [%llu, %llu]) and '%s' "
                        "(data_offsets [%llu, %llu]) overlap",
                        label, last->name, (unsigned long long)(last->file_offset - data_start),
                        (unsigned long long)(last->file_offset - data_start + last->nbytes),
                        t->name, (unsigned long long)(t->file_offset - data_start),
                        (unsigned long long)(t->file_offset - data_start + t->nbytes));
                s = PK_ERR_FORMAT;
                goto fail;
            }
            if (!last || t->file_offset + t->nbytes > last->file_offset + last->nbytes) last = t;
        }
    }
    free(by_off);
    *out = st;
    return PK_OK;
fail:
    free(by_off);
    pk_safetensors_close(st);
    return s;
}

pk_status pk_safetensors_open(const char *path, pk_safetensors **out, char *err, size_t err_len) {
    if (err && err_len) err[0] = '\0';
    if (!path || !out) {
        if (out) *out = NULL;
        set_err(err, err_len, "pk_safetensors_open: %s is NULL", path ? "out" : "path");
        return PK_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    int fd;
    uint64_t size;
    pk_status os = pk_file_open_regular(path, &fd, &size, err, err_len);
    if (os != PK_OK) return os;
    if (size < 8) {
        close(fd);
        set_err(err, err_len, "%s: %llu bytes is too short for a safetensors file (need 8 for "
                "the header length)", path, (unsigned long long)size);
        return PK_ERR_FORMAT;
    }
    if (size > (uint64_t)SIZE_MAX) {
        close(fd);
        set_err(err, err_len, "%s: %llu bytes does not fit in memory", path,
                (unsigned long long)size);
        return PK_ERR_IO;
    }
    size_t len = (size_t)size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        set_err(err, err_len, "cannot map %s (%zu bytes): %s", path, len, strerror(map_errno));
        return PK_ERR_IO;
    }
    pk_safetensors *st = NULL;
    pk_status s = pk_safetensors_parse(map, len, path, &st, err, err_len);
    if (s != PK_OK) {
        munmap(map, len);
        return s;
    }
    st->map = map;
    st->map_len = len;
    *out = st;
    return PK_OK;
}

int pk_safetensors_count(const pk_safetensors *st) { return st ? st->n : 0; }

const pk_st_tensor *pk_safetensors_tensor(const pk_safetensors *st, int i) {
    if (!st || i < 0 || i >= st->n) return NULL;
    return &st->tensors[i];
}

const pk_st_tensor *pk_safetensors_find(const pk_safetensors *st, const char *name) {
    if (!st || !name) return NULL;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->tensors[mid].name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *pk_safetensors_metadata(const pk_safetensors *st, const char *key) {
    if (!st || !st->metadata || !key) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st->metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *pk_safetensors_label(const pk_safetensors *st) { return st ? st->label : ""; }

pk_status pk_st_tensor_to_bf16(const pk_st_tensor *t, pk_bf16 *dst) {
    if (!t) return PK_ERR_INVALID_ARGUMENT;
    if (t->dtype != PK_DTYPE_BF16 && t->dtype != PK_DTYPE_FP16 && t->dtype != PK_DTYPE_FP32)
        return PK_ERR_DTYPE;
    const uint8_t *src = t->data;
    size_t n = (size_t)t->numel;
    if (n == 0) return PK_OK;
    if (!dst) return PK_ERR_INVALID_ARGUMENT;
    switch (t->dtype) {
    case PK_DTYPE_BF16:
        memcpy(dst, src, n * 2); /* byte copy: works at any alignment of src */
        return PK_OK;
    case PK_DTYPE_FP16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
            dst[i] = pk_f32_to_bf16(pk_f16_to_f32(h));
        }
        return PK_OK;
    case PK_DTYPE_FP32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
                         (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
            float f;
            memcpy(&f, &u, sizeof f);
            dst[i] = pk_f32_to_bf16(f);
        }
        return PK_OK;
    case PK_DTYPE_INT32:
    case PK_DTYPE_INT64:
        break;
    }
    return PK_ERR_DTYPE;
}
