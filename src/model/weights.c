// SPDX-License-Identifier: Apache-2.0
/* weights.c — a model directory's tensors over one or more mapped safetensors shards.
 *
 * entries[] (sorted by name) is the directory's tensor list: every tensor of model.safetensors,
 * or exactly the tensors the index's weight_map lists, each pointing into its shard. A tensor
 * that needs conversion gets one malloc'd bf16 copy, made on first request and kept. With
 * check_finite each tensor's bf16 values are scanned once, at its first hand-out: what the
 * kernel will read, so an F32 value beyond bf16's range (rounded to infinity) is caught too.
 */
#include "model/weights.h"
#include "common/file.h"
#include "common/set_err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The largest models' indexes (about 100 bytes per tensor) are near 10 MB. */
#define MAX_INDEX_BYTES ((size_t)64 << 20)

typedef struct weight_entry {
    const char *name;        /* the shard's copy of the name */
    const pk_st_tensor *t;   /* in shards[shard] */
    int shard;
    int handed_out;          /* counted in bytes_handed_out */
    int checked;             /* scanned for NaN / Inf (check_finite) */
    pk_bf16 *copy;           /* converted/realigned data, or NULL */
} weight_entry;

struct pk_weights {
    char *dir;
    pk_safetensors **shards; /* [num_shards] */
    int num_shards;
    weight_entry *entries;   /* [n], sorted by name */
    int n;
    int64_t bytes_handed_out, bytes_copied;
    int check_finite;        /* pk_weights_set_check_finite */
};

static char *join_path(const char *dir, const char *file) {
    size_t n = strlen(dir) + 1 + strlen(file) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

void pk_weights_close(pk_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->entries[i].copy);
    free(w->entries);
    for (int i = 0; i < w->num_shards; i++) pk_safetensors_close(w->shards[i]);
    free(w->shards);
    free(w->dir);
    free(w);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const weight_entry *)a)->name, ((const weight_entry *)b)->name);
}

static pk_status open_single(pk_weights *w, const char *path, char *err, size_t err_len) {
    w->shards = calloc(1, sizeof *w->shards);
    if (!w->shards) return pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory");
    pk_status s = pk_safetensors_open(path, &w->shards[0], err, err_len);
    if (s != PK_OK) return s;
    w->num_shards = 1;
    int n = pk_safetensors_count(w->shards[0]);
    if (n > 0) {
        w->entries = calloc((size_t)n, sizeof *w->entries);
        if (!w->entries) return pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const pk_st_tensor *t = pk_safetensors_tensor(w->shards[0], i);
        w->entries[i] = (weight_entry){.name = t->name, .t = t, .shard = 0};
    }
    w->n = n; /* already in name order */
    return PK_OK;
}

static int bad_shard_name(const char *s) {
    return s[0] == '\0' || strchr(s, '/') != NULL || strstr(s, "..") != NULL;
}

static pk_status open_index(pk_weights *w, const char *index_path, char *err, size_t err_len) {
    char *text = NULL;
    size_t len = 0;
    pk_status s = pk_file_read_capped(index_path, MAX_INDEX_BYTES, "a " PK_WEIGHTS_INDEX_FILE, &text, &len,
                                      err, err_len);
    if (s != PK_OK) return s;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    const char **shard_names = NULL; /* distinct, in first-seen order; point into root */
    int *entry_shard = NULL;
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        s = pk_set_err(err, err_len, PK_ERR_FORMAT, "%s is not valid JSON (error near byte %zu)",
                    index_path, at);
        goto done;
    }
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(map)) {
        s = pk_set_err(err, err_len, PK_ERR_FORMAT, "%s has no \"weight_map\" object", index_path);
        goto done;
    }
    int n = cJSON_GetArraySize(map);
    if (n == 0) {
        s = pk_set_err(err, err_len, PK_ERR_FORMAT, "\"weight_map\" of %s is empty", index_path);
        goto done;
    }
    shard_names = calloc((size_t)n, sizeof *shard_names);
    entry_shard = calloc((size_t)n, sizeof *entry_shard);
    w->entries = calloc((size_t)n, sizeof *w->entries);
    if (!shard_names || !entry_shard || !w->entries) {
        s = pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory for %d tensors", n);
        goto done;
    }
    int num_names = 0, i = 0;
    for (const cJSON *e = map->child; e; e = e->next, i++) {
        if (!cJSON_IsString(e)) {
            s = pk_set_err(err, err_len, PK_ERR_FORMAT,
                        "%s: weight_map entry of tensor '%s' is not a file name", index_path,
                        e->string ? e->string : "");
            goto done;
        }
        const char *file = e->valuestring;
        if (bad_shard_name(file)) {
            s = pk_set_err(err, err_len, PK_ERR_FORMAT,
                        "%s: shard name '%s' of tensor '%s' is not a plain file name in the "
                        "model directory",
                        index_path, file, e->string ? e->string : "");
            goto done;
        }
        int k = num_names - 1; /* shards are listed in runs: try the last one first */
        if (k < 0 || strcmp(shard_names[k], file) != 0) {
            for (k = 0; k < num_names && strcmp(shard_names[k], file) != 0; k++) {}
            if (k == num_names) shard_names[num_names++] = file;
        }
        entry_shard[i] = k;
    }
    w->shards = calloc((size_t)num_names, sizeof *w->shards);
    if (!w->shards) {
        s = pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    for (int k = 0; k < num_names; k++) {
        char *path = join_path(w->dir, shard_names[k]);
        if (!path) {
            s = pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
        s = pk_safetensors_open(path, &w->shards[k], err, err_len);
        free(path);
        if (s != PK_OK) goto done;
        w->num_shards++;
    }
    i = 0;
    for (const cJSON *e = map->child; e; e = e->next, i++) {
        const pk_safetensors *sh = w->shards[entry_shard[i]];
        const pk_st_tensor *t = pk_safetensors_find(sh, e->string);
        if (!t) {
            s = pk_set_err(err, err_len, PK_ERR_FORMAT,
                        "tensor '%s' listed in %s is missing from its shard %s", e->string,
                        index_path, pk_safetensors_label(sh));
            goto done;
        }
        w->entries[i] = (weight_entry){.name = t->name, .t = t, .shard = entry_shard[i]};
    }
    w->n = n;
    qsort(w->entries, (size_t)n, sizeof *w->entries, cmp_entry);
    for (int j = 1; j < n; j++) {
        if (strcmp(w->entries[j - 1].name, w->entries[j].name) == 0) {
            s = pk_set_err(err, err_len, PK_ERR_FORMAT,
                        "tensor '%s' is listed twice in the weight_map of %s",
                        w->entries[j].name, index_path);
            goto done;
        }
    }
done:
    free(shard_names);
    free(entry_shard);
    cJSON_Delete(root);
    free(text);
    return s;
}

pk_status pk_weights_open(const char *dir, pk_weights **out, char *err, size_t err_len) {
    if (err && err_len) err[0] = '\0';
    if (out) *out = NULL;
    if (!dir || !out)
        return pk_set_err(err, err_len, PK_ERR_INVALID_ARGUMENT, "pk_weights_open: %s is NULL",
                       dir ? "out" : "dir");
    pk_weights *w = calloc(1, sizeof *w);
    char *single = join_path(dir, PK_WEIGHTS_SINGLE_FILE);
    char *index = join_path(dir, PK_WEIGHTS_INDEX_FILE);
    pk_status s;
    if (!w || !single || !index || !(w->dir = strdup(dir))) {
        s = pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    struct stat sb;
    if (stat(single, &sb) == 0) {
        s = open_single(w, single, err, err_len);
    } else if (stat(index, &sb) == 0) {
        s = open_index(w, index, err, err_len);
    } else {
        struct stat db;
        if (stat(dir, &db) != 0 || !S_ISDIR(db.st_mode))
            s = pk_set_err(err, err_len, PK_ERR_IO, "model directory %s: %s", dir,
                        stat(dir, &db) != 0 ? strerror(errno) : "not a directory");
        else
            s = pk_set_err(err, err_len, PK_ERR_IO, "no %s or %s in %s", PK_WEIGHTS_SINGLE_FILE,
                        PK_WEIGHTS_INDEX_FILE, dir);
    }
done:
    free(single);
    free(index);
    if (s != PK_OK) {
        pk_weights_close(w);
        return s;
    }
    *out = w;
    return PK_OK;
}

static weight_entry *find_entry(const pk_weights *w, const char *name) {
    if (!w || !name) return NULL;
    int lo = 0, hi = w->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, w->entries[mid].name);
        if (c == 0) return &w->entries[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int pk_weights_has(const pk_weights *w, const char *name) { return find_entry(w, name) != NULL; }

const pk_st_tensor *pk_weights_find(const pk_weights *w, const char *name) {
    const weight_entry *e = find_entry(w, name);
    return e ? e->t : NULL;
}

int pk_weights_count(const pk_weights *w) { return w ? w->n : 0; }

const char *pk_weights_name(const pk_weights *w, int i) {
    if (!w || i < 0 || i >= w->n) return NULL;
    return w->entries[i].name;
}

void pk_weights_set_check_finite(pk_weights *w, int on) {
    if (w) w->check_finite = on != 0;
}

/* The first NaN or infinity of e's bf16 values p (its data as handed out), as an error naming
 * the tensor, the file, the element (with its row and column for a matrix) and, where the file
 * holds a finite F32 value that rounds to infinity, that value. */
static pk_status check_finite(const weight_entry *e, const char *file, const pk_bf16 *p, char *err,
                              size_t err_len) {
    const pk_st_tensor *t = e->t;
    const size_t n = (size_t)t->numel;
    size_t i = 0;
    while (i < n && (p[i] & 0x7f80u) != 0x7f80u) i++; /* exponent all ones: Inf or NaN */
    if (i == n) return PK_OK;
    char where[96] = "";
    if (t->ndim == 2 && t->dims[1] > 0)
        snprintf(where, sizeof where, " (row %lld, column %lld)", (long long)(i / (size_t)t->dims[1]),
                 (long long)(i % (size_t)t->dims[1]));
    char shape[160];
    pk_st_format_dims(shape, sizeof shape, t->ndim, t->dims);
    const char *what = (p[i] & 0x7fu) ? "NaN" : (p[i] & 0x8000u) ? "-inf" : "+inf";
    if (t->dtype == PK_DTYPE_FP32) {
        const uint8_t *b = (const uint8_t *)t->data + 4 * i;
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        float f;
        memcpy(&f, &u, sizeof f);
        if (isfinite(f))
            return pk_set_err(err, err_len, PK_ERR_FORMAT,
                           "tensor '%s' %s in %s: element %zu%s is %g, beyond bf16's range (it rounds to "
                           "%s); check_tensors refuses non-finite weights",
                           e->name, shape, file, i, where, (double)f, what);
    }
    return pk_set_err(err, err_len, PK_ERR_FORMAT,
                   "tensor '%s' %s in %s holds %s at element %zu%s (%s); check_tensors refuses non-finite "
                   "weights",
                   e->name, shape, file, what, i, where, pk_st_dtype_str(t->dtype));
}

pk_status pk_weights_get_bf16(pk_weights *w, const char *name, int ndim, const int64_t *dims,
                              const pk_bf16 **data, char *err, size_t err_len) {
    if (err && err_len) err[0] = '\0';
    if (data) *data = NULL;
    if (!w || !name || !data || (ndim > 0 && !dims) || ndim < 0 || ndim > PK_ST_MAX_DIMS)
        return pk_set_err(err, err_len, PK_ERR_INVALID_ARGUMENT,
                       "pk_weights_get_bf16: invalid arguments (w, name, data, dims non-NULL; "
                       "ndim %d in 0..%d)", ndim, PK_ST_MAX_DIMS);
    weight_entry *e = find_entry(w, name);
    if (!e) return pk_set_err(err, err_len, PK_ERR_FORMAT, "missing tensor '%s' in %s", name, w->dir);
    const pk_st_tensor *t = e->t;
    const char *file = pk_safetensors_label(w->shards[e->shard]);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->dims[i] == dims[i];
    if (!same) {
        char have[200], want[200];
        pk_st_format_dims(have, sizeof have, t->ndim, t->dims);
        pk_st_format_dims(want, sizeof want, ndim, dims);
        return pk_set_err(err, err_len, PK_ERR_SHAPE, "tensor '%s' in %s has shape %s, expected %s",
                       name, file, have, want);
    }
    if (t->dtype != PK_DTYPE_BF16 && t->dtype != PK_DTYPE_FP16 && t->dtype != PK_DTYPE_FP32)
        return pk_set_err(err, err_len, PK_ERR_DTYPE,
                       "tensor '%s' in %s has dtype %s; pk needs BF16, F16 or F32 weights", name,
                       file, pk_st_dtype_str(t->dtype));
    const size_t bytes = (size_t)t->numel * sizeof(pk_bf16);
    const pk_bf16 *result;
    if (e->copy) {
        result = e->copy;
    } else if (t->dtype == PK_DTYPE_BF16 && ((uintptr_t)t->data & 1u) == 0) {
        result = (const pk_bf16 *)t->data; /* zero copy from the mapping */
    } else {
        e->copy = malloc(bytes ? bytes : 1);
        if (!e->copy)
            return pk_set_err(err, err_len, PK_ERR_NO_MEMORY,
                           "out of memory converting tensor '%s' (%zu bytes)", name, bytes);
        pk_st_tensor_to_bf16(t, e->copy); /* dtype checked above: cannot fail */
        w->bytes_copied += (int64_t)bytes;
        result = e->copy;
    }
    if (w->check_finite && !e->checked) {
        pk_status cs = check_finite(e, file, result, err, err_len);
        if (cs != PK_OK) return cs;
        e->checked = 1;
    }
    if (!e->handed_out) {
        e->handed_out = 1;
        w->bytes_handed_out += (int64_t)bytes;
    }
    *data = result;
    return PK_OK;
}

int64_t pk_weights_bytes_handed_out(const pk_weights *w) { return w ? w->bytes_handed_out : 0; }
int64_t pk_weights_bytes_copied(const pk_weights *w) { return w ? w->bytes_copied : 0; }
const char *pk_weights_dir(const pk_weights *w) { return w ? w->dir : ""; }
