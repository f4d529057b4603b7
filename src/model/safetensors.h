// SPDX-License-Identifier: Apache-2.0
/* safetensors.h — read-only access to one .safetensors file (memory-mapped) or buffer.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header, then the data section.
 * The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
 * relative to the data section) plus an optional "__metadata__" object of strings.
 * Everything is validated before a tensor is handed out: header length, JSON shape, dtype,
 * dims (at most PK_ST_MAX_DIMS, each >= 0), offsets inside the data section, byte count equal
 * to product(shape) · dtype size (overflow-checked), no two tensors overlapping, no duplicate
 * names. Errors return a pk_status and a one-line message naming the file, tensor and numbers;
 * nothing here prints, aborts or exits. Not thread-safe to close while others read; all
 * read-only queries on an open file may run concurrently.
 */
#ifndef PK_MODEL_SAFETENSORS_H
#define PK_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "pk.h"
#include "common/bf16.h"

#define PK_ST_MAX_DIMS 8
#define PK_ST_MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000) /* larger headers are refused */

typedef struct pk_st_tensor {
    const char *name;             /* NUL-terminated, owned by the pk_safetensors */
    pk_dtype dtype;               /* BF16, FP16, FP32, INT32 or INT64 */
    int ndim;                     /* 0 (scalar) .. PK_ST_MAX_DIMS */
    int64_t dims[PK_ST_MAX_DIMS]; /* dims[ndim..] are 0 */
    int64_t numel;                /* product of dims (1 for a scalar) */
    const void *data;             /* into the mapping / caller's buffer; may be unaligned */
    size_t nbytes;                /* numel · pk_st_dtype_size(dtype) */
    uint64_t file_offset;         /* byte offset of data from the start of the file */
} pk_st_tensor;

typedef struct pk_safetensors pk_safetensors;

/* Bytes per element of a dtype this module hands out (0 for others). */
size_t pk_st_dtype_size(pk_dtype d);
/* The safetensors spelling of a dtype ("BF16", "F16", "F32", "I32", "I64"; "?" otherwise). */
const char *pk_st_dtype_str(pk_dtype d);

/* Maps `path` read-only and parses it. On success *out owns the mapping (free with
 * pk_safetensors_close); on error *out is NULL and err holds the reason. err may be NULL or
 * err_len 0. Statuses: PK_ERR_IO (cannot open/stat/map, not a regular file), PK_ERR_FORMAT
 * (anything malformed), PK_ERR_NO_MEMORY, PK_ERR_INVALID_ARGUMENT (NULL path/out). */
pk_status pk_safetensors_open(const char *path, pk_safetensors **out, char *err, size_t err_len);

/* Parses a whole safetensors file held in memory. The buffer is NOT copied: it must stay valid
 * and unchanged until pk_safetensors_close, and tensor data pointers point into it. `label`
 * names the buffer in error messages (a path; NULL: "<memory>") and is copied. */
pk_status pk_safetensors_parse(const void *buf, size_t len, const char *label,
                               pk_safetensors **out, char *err, size_t err_len);

/* Frees everything (and unmaps the file when opened by path). Accepts NULL. Every pointer
 * obtained from st becomes invalid. */
void pk_safetensors_close(pk_safetensors *st);

/* Number of tensors, and the i-th in name order (NULL when i is out of range). */
int pk_safetensors_count(const pk_safetensors *st);
const pk_st_tensor *pk_safetensors_tensor(const pk_safetensors *st, int i);
/* The tensor called `name`, or NULL. O(log n). Valid until pk_safetensors_close. */
const pk_st_tensor *pk_safetensors_find(const pk_safetensors *st, const char *name);
/* A string value of "__metadata__" (e.g. "format" → "pt"), or NULL. */
const char *pk_safetensors_metadata(const pk_safetensors *st, const char *key);
/* The path or label the file was opened with. */
const char *pk_safetensors_label(const pk_safetensors *st);

/* Converts a float tensor (BF16, FP16, FP32) to bf16 into dst (t->numel elements): BF16 is
 * copied bit-exactly, FP16 goes through fp32 exactly, FP32 rounds to nearest even
 * (pk_f32_to_bf16). Reads the little-endian bytes one element at a time, so t->data may have
 * any alignment. Returns PK_ERR_DTYPE for integer tensors (dst untouched). */
pk_status pk_st_tensor_to_bf16(const pk_st_tensor *t, pk_bf16 *dst);

/* Writes "[a, b, c]" (truncated to len - 1 bytes) for messages. */
void pk_st_format_dims(char *buf, size_t len, int ndim, const int64_t *dims);

#endif /* PK_MODEL_SAFETENSORS_H */
