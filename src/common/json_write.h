// SPDX-License-Identifier: Apache-2.0
/* json_write.h — a JSON string literal written to a stream (quotes, backslashes and control
 * characters escaped), for the files pk writes by hand: traces (runtime/cpu/trace.c) and
 * `pk bench --json` (tools/pk.c). */
#ifndef PK_COMMON_JSON_WRITE_H
#define PK_COMMON_JSON_WRITE_H

#include <stdio.h>

static inline void pk_json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

#endif /* PK_COMMON_JSON_WRITE_H */
