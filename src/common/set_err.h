// SPDX-License-Identifier: Apache-2.0
/* set_err.h — the loaders' error return: a printf-style one-line message into the caller's
 * (err, err_len) buffer (either may be NULL / 0: the message is dropped), and the status. */
#ifndef PK_COMMON_SET_ERR_H
#define PK_COMMON_SET_ERR_H

#include <stdarg.h>
#include <stdio.h>

#include "pk.h"

static inline pk_status pk_set_err(char *err, size_t err_len, pk_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline pk_status pk_set_err(char *err, size_t err_len, pk_status s, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return s;
}

#endif /* PK_COMMON_SET_ERR_H */
