// SPDX-License-Identifier: Apache-2.0
/* weights.h — the tensors of a Hugging Face model directory, handed out as bf16.
 *
 * The directory holds model.safetensors, or model.safetensors.index.json whose "weight_map"
 * maps each tensor name to a shard file in the same directory (each shard is mapped once;
 * model.safetensors wins when both exist). Every shard is validated at open, and every tensor
 * the index lists must be in its shard. pk_weights_get_bf16 checks the shape and returns bf16
 * data: the mapped bytes themselves for a BF16 tensor at an even address (zero copy), else a
 * converted (FP16, FP32) or realigned copy that w owns; a tensor is converted at most once.
 * Not thread-safe: use one pk_weights from one thread.
 */
#ifndef PK_MODEL_WEIGHTS_H
#define PK_MODEL_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "pk.h"
#include "common/bf16.h"
#include "model/safetensors.h"

#define PK_WEIGHTS_INDEX_FILE "model.safetensors.index.json"
#define PK_WEIGHTS_SINGLE_FILE "model.safetensors"

typedef struct pk_weights pk_weights;

/* Opens the weights of a model directory. On success *out is owned by the caller (free with
 * pk_weights_close); on error *out is NULL and err names the file, tensor and numbers.
 * PK_ERR_IO: neither file exists, or one cannot be read/mapped; PK_ERR_FORMAT: a malformed
 * index or shard, a shard name with '/' or "..", a tensor listed in the index but absent
 * from its shard. */
pk_status pk_weights_open(const char *dir, pk_weights **out, char *err, size_t err_len);

/* Unmaps the shards and frees every copy. Accepts NULL. Pointers handed out become invalid. */
void pk_weights_close(pk_weights *w);

/* 1 if the directory has a tensor called `name`, else 0. */
int pk_weights_has(const pk_weights *w, const char *name);

/* The raw tensor (file dtype, shape, mapped bytes), or NULL. Valid until pk_weights_close. */
const pk_st_tensor *pk_weights_find(const pk_weights *w, const char *name);

/* Number of tensors, and the name of the i-th in name order (NULL when out of range): lets the
 * graph builder list tensors it did not use. */
int pk_weights_count(const pk_weights *w);
const char *pk_weights_name(const pk_weights *w, int i);

/* Looks `name` up, checks it has exactly `ndim` dims equal to dims[0..ndim), and sets *data
 * to its bf16 values (row-major, numel elements). The pointer stays valid and unchanged until
 * pk_weights_close. Errors: PK_ERR_FORMAT "missing tensor 'X' in DIR"; PK_ERR_SHAPE "tensor
 * 'X' in FILE has shape [a, b], expected [c, d]"; PK_ERR_DTYPE for integer tensors;
 * PK_ERR_NO_MEMORY; PK_ERR_INVALID_ARGUMENT (NULLs, ndim outside 0..PK_ST_MAX_DIMS). */
pk_status pk_weights_get_bf16(pk_weights *w, const char *name, int ndim, const int64_t *dims,
                              const pk_bf16 **data, char *err, size_t err_len);

/* on 1: pk_weights_get_bf16 scans each tensor's bf16 values at its first hand-out (a full read
 * of the tensor) and fails with PK_ERR_FORMAT "tensor 'X' [dims] in FILE holds NaN at element
 * i (row r, column c) (BF16)" for the first NaN or infinity, or an F32 value that rounds to
 * infinity. 0 (the default): nothing is scanned and BF16 tensors stay in the mapping untouched. */
void pk_weights_set_check_finite(pk_weights *w, int on);

/* Bytes of bf16 data handed out by pk_weights_get_bf16, each tensor counted once however
 * often it was asked for (tied embeddings). */
int64_t pk_weights_bytes_handed_out(const pk_weights *w);
/* Of those, bytes that had to be converted or copied (not served from the mapping). */
int64_t pk_weights_bytes_copied(const pk_weights *w);

/* The directory the weights were opened from. */
const char *pk_weights_dir(const pk_weights *w);

#endif /* PK_MODEL_WEIGHTS_H */
