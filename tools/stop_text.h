// SPDX-License-Identifier: Apache-2.0
/* stop_text.h — stop strings over streamed text (pk serve's "stop", pk generate's --stop): the
 * text is held back while it may be the start of a stop string, and ends before the first stop
 * string it comes to, which is never emitted (OpenAI's rule). Pure: no I/O, no model.
 */
#ifndef PK_STOP_TEXT_H
#define PK_STOP_TEXT_H

#include <stddef.h>

#define STOP_TEXT_MAX 4       /* stop strings at most */
#define STOP_TEXT_MAX_LEN 256 /* bytes of one */

typedef void (*stop_text_emit)(void *user, const char *text, size_t n);

typedef struct stop_text {
    const char *stops[STOP_TEXT_MAX]; /* the caller's, NUL-terminated, non-empty */
    int nstops;
    char *held; /* text not emitted yet: it may start a stop string */
    size_t len, cap;
    int hit;    /* a stop string came: nothing more is emitted */
} stop_text;

/* Appends n bytes of text and emits what can no longer be part of a stop string. Returns 1 when
 * a stop string came (the text before it emitted, it and the rest dropped), -1 when out of
 * memory, else 0. After a hit it emits nothing more. */
int stop_text_push(stop_text *s, const char *text, size_t n, stop_text_emit emit, void *user);
/* The end of the text: emits what is held up to a stop string found in it (no longer one can
 * complete any more). */
void stop_text_flush(stop_text *s, stop_text_emit emit, void *user);
void stop_text_free(stop_text *s);

#endif /* PK_STOP_TEXT_H */
