// SPDX-License-Identifier: Apache-2.0
/* tensor.c — tensors of a kernel: attached caller memory, pk-owned memory, fused views.
 *
 * Every tensor is row-major. Attached memory is never written by pk. Fused tensors own no
 * memory: they name up to PK_FUSE_MAX inputs whose rows interleave in groups (pk.h).
 */
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "pk_internal.h"

int64_t pk_tensor_numel(const pk_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

static int valid_dtype(pk_dtype d) { return pk_dtype_size(d) != 0; }

/* Checks name, dtype and dims shared by every constructor. */
static pk_status check_new(pk_kernel *k, const char *what, const char *name, pk_dtype dtype,
                           int ndim, const int64_t *dims) {
    if (!name || !name[0]) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: name is NULL or empty", what);
    if (strlen(name) >= PK_NAME_MAX)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: name '%.40s...' longer than %d bytes", what,
                       name, PK_NAME_MAX - 1);
    if (pk_find_tensor(k, name))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: a tensor named '%s' exists already", what, name);
    if (k->compiled) return pk_fail(k, PK_ERR_STATE, "%s '%s': the kernel is compiled already", what, name);
    if (!valid_dtype(dtype))
        return pk_fail(k, PK_ERR_DTYPE, "%s '%s': unknown dtype %d", what, name, (int)dtype);
    if (ndim < 1 || ndim > PK_MAX_DIMS)
        return pk_fail(k, PK_ERR_SHAPE, "%s '%s': ndim %d outside [1, %d]", what, name, ndim, PK_MAX_DIMS);
    if (!dims) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s '%s': dims is NULL", what, name);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 1 || dims[i] > ((int64_t)1 << 40))
            return pk_fail(k, PK_ERR_SHAPE, "%s '%s': dim %d is %lld", what, name, i, (long long)dims[i]);
        numel *= dims[i];
        if (numel > ((int64_t)1 << 40))
            return pk_fail(k, PK_ERR_SHAPE, "%s '%s': more than 2^40 elements", what, name);
    }
    return PK_OK;
}

static pk_tensor *add_tensor(pk_kernel *k, const char *name, pk_dtype dtype, int ndim,
                             const int64_t *dims) {
    if (k->ntensors == k->tensors_cap) {
        int cap = k->tensors_cap ? 2 * k->tensors_cap : 64;
        pk_tensor **p = realloc(k->tensors, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        k->tensors = p;
        k->tensors_cap = cap;
    }
    pk_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->id = k->ntensors;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    t->producer = -1;
    k->tensors[k->ntensors++] = t;
    return t;
}

pk_tensor *pk_attach_input(pk_kernel *k, const char *name, pk_dtype dtype, int ndim,
                           const int64_t *dims, const int64_t *strides, const void *data) {
    if (!k || pk_enter(k) != PK_OK) return NULL;
    if (check_new(k, "pk_attach_input", name, dtype, ndim, dims) != PK_OK) return NULL;
    if (!data) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_attach_input '%s': data is NULL", name);
        return NULL;
    }
    if ((uintptr_t)data % pk_dtype_size(dtype) != 0) { /* the kernels load whole elements */
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_attach_input '%s': data %p is not aligned to its %s elements (%zu bytes)",
                name, data, pk_dtype_name(dtype), pk_dtype_size(dtype));
        return NULL;
    }
    if (strides) {
        int64_t expect = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            if (strides[i] != expect && dims[i] != 1) {
                char b1[96], b2[96];
                pk_fail(k, PK_ERR_STRIDE,
                        "pk_attach_input '%s': strides %s of dims %s are not row-major (dim %d "
                        "has stride %lld, expected %lld)",
                        name, pk_dims_str(strides, ndim, b1, sizeof b1),
                        pk_dims_str(dims, ndim, b2, sizeof b2), i, (long long)strides[i],
                        (long long)expect);
                return NULL;
            }
            expect *= dims[i];
        }
    }
    pk_tensor *t = add_tensor(k, name, dtype, ndim, dims);
    if (!t) {
        pk_fail(k, PK_ERR_NO_MEMORY, "pk_attach_input '%s': out of memory", name);
        return NULL;
    }
    t->storage = PK_STORAGE_ATTACHED;
    t->data = (void *)(uintptr_t)data; /* never written: see pk.h */
    return t;
}

pk_tensor *pk_new_tensor(pk_kernel *k, const char *name, pk_dtype dtype, int ndim,
                         const int64_t *dims, pk_io_category category) {
    if (!k || pk_enter(k) != PK_OK) return NULL;
    if (check_new(k, "pk_new_tensor", name, dtype, ndim, dims) != PK_OK) return NULL;
    if (category != PK_IO_LOCAL && category != PK_IO_SHARED) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_new_tensor '%s': unknown io category %d", name,
                (int)category);
        return NULL;
    }
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= dims[i];
    size_t bytes = (size_t)numel * pk_dtype_size(dtype);
    /* Large tensors are anonymous mappings: zero pages the kernel commits only where they are
     * written. A GPU backend never writes the host copy of its activations and KV cache (an 8B
     * graph of 2048-row steps has ~20 GB of them), where malloc + memset made the host commit
     * and clear all of it. */
    const int map = bytes >= PK_TENSOR_MAP_BYTES;
    void *data = NULL;
    if (map) {
        data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (data == MAP_FAILED) data = NULL;
    } else if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0) {
        data = NULL;
    }
    pk_tensor *t = data ? add_tensor(k, name, dtype, ndim, dims) : NULL;
    if (!t) {
        if (data && map)
            munmap(data, bytes);
        else
            free(data);
        pk_fail(k, PK_ERR_NO_MEMORY, "pk_new_tensor '%s': out of memory (%zu bytes)", name, bytes);
        return NULL;
    }
    if (!map) memset(data, 0, bytes);
    t->mapped_bytes = map ? bytes : 0;
    t->storage = PK_STORAGE_OWNED;
    t->category = category;
    t->data = data;
    return t;
}

pk_tensor *pk_fuse_tensors(pk_kernel *k, const char *name, pk_tensor *const *inputs, int n,
                           int fused_dim, int num_groups) {
    if (!k || pk_enter(k) != PK_OK) return NULL;
    if (!inputs || n < 1 || n > PK_FUSE_MAX) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_fuse_tensors '%s': %d inputs (1 to %d, non-NULL)",
                name ? name : "(null)", n, PK_FUSE_MAX);
        return NULL;
    }
    if (fused_dim != 0) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_fuse_tensors '%s': fused_dim %d; only 0 is supported",
                name ? name : "(null)", fused_dim);
        return NULL;
    }
    if (num_groups < 1) {
        pk_fail(k, PK_ERR_GRID, "pk_fuse_tensors '%s': num_groups %d < 1", name ? name : "(null)",
                num_groups);
        return NULL;
    }
    int64_t dims[PK_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        const pk_tensor *in = inputs[i];
        if (!in) {
            pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_fuse_tensors '%s': input %d is NULL",
                    name ? name : "(null)", i);
            return NULL;
        }
        if (in->id < 0 || in->id >= k->ntensors || k->tensors[in->id] != in) {
            pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_fuse_tensors '%s': input '%s' belongs to another kernel",
                    name ? name : "(null)", in->name);
            return NULL;
        }
        if (in->storage != PK_STORAGE_ATTACHED && in->storage != PK_STORAGE_COLUMN_BLOCKS) {
            pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                    "pk_fuse_tensors '%s': input '%s' is not an attached input (only weights can be fused)",
                    name ? name : "(null)", in->name);
            return NULL;
        }
        const pk_tensor *first = inputs[0];
        int same = in->ndim == first->ndim && in->dtype == first->dtype;
        for (int d = 1; same && d < in->ndim; d++) same = in->dims[d] == first->dims[d];
        if (!same) {
            char b1[96], b2[96];
            pk_fail(k, PK_ERR_SHAPE,
                    "pk_fuse_tensors '%s': input '%s' %s %s does not match '%s' %s %s beyond dim 0",
                    name ? name : "(null)", in->name, pk_dtype_name(in->dtype),
                    pk_dims_str(in->dims, in->ndim, b1, sizeof b1), first->name,
                    pk_dtype_name(first->dtype), pk_dims_str(first->dims, first->ndim, b2, sizeof b2));
            return NULL;
        }
        if (in->dims[0] % num_groups != 0) {
            pk_fail(k, PK_ERR_GRID, "pk_fuse_tensors '%s': num_groups %d does not divide dim 0 (%lld) of '%s'",
                    name ? name : "(null)", num_groups, (long long)in->dims[0], in->name);
            return NULL;
        }
        dims[0] += in->dims[0];
    }
    for (int d = 1; d < inputs[0]->ndim; d++) dims[d] = inputs[0]->dims[d];
    if (check_new(k, "pk_fuse_tensors", name, inputs[0]->dtype, inputs[0]->ndim, dims) != PK_OK)
        return NULL;
    pk_tensor *t = add_tensor(k, name, inputs[0]->dtype, inputs[0]->ndim, dims);
    if (!t) {
        pk_fail(k, PK_ERR_NO_MEMORY, "pk_fuse_tensors '%s': out of memory", name);
        return NULL;
    }
    t->storage = PK_STORAGE_FUSED;
    t->nfused = n;
    t->groups = num_groups;
    for (int i = 0; i < n; i++) t->fused[i] = inputs[i]->id;
    return t;
}

pk_tensor *pk_column_blocks(pk_kernel *k, const char *name, const pk_tensor *w, int64_t block) {
    PK_ASSERT(w->storage == PK_STORAGE_ATTACHED && w->ndim == 2 && w->dtype == PK_DTYPE_BF16);
    const int64_t N = w->dims[0], K = w->dims[1];
    PK_ASSERT(block >= 1 && K % block == 0);
    if (check_new(k, "pk_column_blocks", name, w->dtype, 2, (int64_t[]){K, N}) != PK_OK) return NULL;
    const size_t bytes = (size_t)N * (size_t)K * sizeof(uint16_t);
    void *data = NULL;
    if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0) data = NULL;
    pk_tensor *t = data ? add_tensor(k, name, w->dtype, 2, (int64_t[]){K, N}) : NULL;
    if (!t) {
        free(data);
        pk_fail(k, PK_ERR_NO_MEMORY, "copying '%s' in column blocks: out of memory (%zu bytes)", w->name, bytes);
        return NULL;
    }
    const uint16_t *src = w->data;
    uint16_t *dst = data;
    for (int64_t b0 = 0; b0 < K; b0 += block) /* block b0 / block: [N][block] at b0 · N */
        for (int64_t n = 0; n < N; n++)
            memcpy(dst + b0 * N + n * block, src + n * K + b0, (size_t)block * sizeof *src);
    t->storage = PK_STORAGE_COLUMN_BLOCKS;
    t->data = data;
    return t;
}

int pk_tensor_ndim(const pk_tensor *t) { return t ? t->ndim : 0; }
int64_t pk_tensor_dim(const pk_tensor *t, int i) {
    return (t && i >= 0 && i < t->ndim) ? t->dims[i] : 0;
}
pk_dtype pk_tensor_dtype(const pk_tensor *t) { return t ? t->dtype : PK_DTYPE_BF16; }
const char *pk_tensor_name(const pk_tensor *t) { return t ? t->name : ""; }

pk_tensor *pk_find_tensor(const pk_kernel *k, const char *name) {
    if (!k || !name) return NULL;
    for (int i = 0; i < k->ntensors; i++)
        if (strcmp(k->tensors[i]->name, name) == 0) return k->tensors[i];
    return NULL;
}

pk_status pk_tensor_read(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (!t || !dst) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_tensor_read: tensor or dst is NULL");
    if (t->id < 0 || t->id >= k->ntensors || k->tensors[t->id] != t)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_tensor_read: tensor '%s' belongs to another kernel", t->name);
    size_t need = (size_t)pk_tensor_numel(t) * pk_dtype_size(t->dtype);
    if (bytes != need)
        return pk_fail(k, PK_ERR_SHAPE, "pk_tensor_read '%s': buffer of %zu bytes, tensor has %zu",
                       t->name, bytes, need);
    /* A compiled kernel's own tensors live where its backend computes them; inputs stay here. */
    if (k->compiled && t->storage == PK_STORAGE_OWNED) return k->backend->read_tensor(k, t, dst, bytes);
    if (t->storage == PK_STORAGE_FUSED) {
        /* Rows interleaved by group, as the layers read them. */
        size_t row_bytes = need / (size_t)t->dims[0];
        char *out = dst;
        for (int g = 0; g < t->groups; g++)
            for (int i = 0; i < t->nfused; i++) {
                const pk_tensor *in = k->tensors[t->fused[i]];
                size_t rows = (size_t)in->dims[0] / (size_t)t->groups;
                memcpy(out, (const char *)in->data + (size_t)g * rows * row_bytes, rows * row_bytes);
                out += rows * row_bytes;
            }
        return PK_OK;
    }
    memcpy(dst, t->data, need);
    return PK_OK;
}

pk_tensor *pk_step_tokens(pk_kernel *k) {
    return (k && k->cfg.world_size) ? k->tensors[k->t_step_tokens] : NULL;
}
pk_tensor *pk_step_output(pk_kernel *k) {
    return (k && k->cfg.world_size) ? k->tensors[k->t_step_output] : NULL;
}
