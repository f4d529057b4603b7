// SPDX-License-Identifier: Apache-2.0
/* file.h — opening the files pk parses (a model directory's, tokenizer.json).
 *
 * Every such file (config.json, model.safetensors, model.safetensors.index.json, each shard,
 * tokenizer.json) must be a regular file, or a symlink to one: a FIFO, device, socket or directory
 * of that name is refused with a message naming it. open() uses O_NONBLOCK, so a FIFO with no writer cannot
 * block it (the regular files that pass are unaffected by the flag). A file read whole has a
 * size cap, checked against fstat before anything is allocated and again while reading.
 */
#ifndef PK_COMMON_FILE_H
#define PK_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "pk.h"

/* Opens path read-only. On success *fd is open (the caller closes it) and *size is its size.
 * Errors, *fd -1: PK_ERR_IO "cannot open PATH: reason" or "PATH is a FIFO, not a regular file"
 * (directory, character device, block device, socket likewise). */
pk_status pk_file_open_regular(const char *path, int *fd, uint64_t *size, char *err, size_t err_len);

/* Reads a whole regular file of at most max bytes into a malloc'd buffer with a NUL after its
 * *len bytes (the caller frees it). A larger file is PK_ERR_FORMAT "PATH is N bytes, more than
 * WHAT can be (M)"; what names the kind ("a config.json"). Other errors as above, or
 * PK_ERR_NO_MEMORY. */
pk_status pk_file_read_capped(const char *path, size_t max, const char *what, char **out, size_t *len, char *err,
                              size_t err_len);

#endif /* PK_COMMON_FILE_H */
