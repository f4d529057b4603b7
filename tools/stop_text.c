// SPDX-License-Identifier: Apache-2.0
/* stop_text.c — stop_text.h: the held text is scanned for the earliest stop string; it ends the
 * text once no stop can still begin before it (the held text's longest tail that a stop string
 * starts with begins after it); until then, and without one, all before that tail is emitted. */
#include "stop_text.h"

#include <stdlib.h>
#include <string.h>

/* The first occurrence of any stop string in s->held, or -1. */
static long first_stop(const stop_text *s) {
    long best = -1;
    for (int i = 0; i < s->nstops; i++) {
        const size_t m = strlen(s->stops[i]);
        for (size_t at = 0; at + m <= s->len && (best < 0 || (long)at < best); at++)
            if (!memcmp(s->held + at, s->stops[i], m)) {
                best = (long)at;
                break;
            }
    }
    return best;
}

/* Bytes at the end of s->held that some stop string begins with (the longest such tail). */
static size_t tail_kept(const stop_text *s) {
    size_t keep = 0;
    for (int i = 0; i < s->nstops; i++) {
        const size_t m = strlen(s->stops[i]);
        for (size_t k = m - 1 < s->len ? m - 1 : s->len; k > keep; k--)
            if (!memcmp(s->held + s->len - k, s->stops[i], k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

int stop_text_push(stop_text *s, const char *text, size_t n, stop_text_emit emit, void *user) {
    if (s->hit) return 1;
    if (s->nstops == 0) {
        if (n) emit(user, text, n);
        return 0;
    }
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1) cap *= 2;
        char *p = realloc(s->held, cap);
        if (!p) return -1;
        s->held = p, s->cap = cap;
    }
    memcpy(s->held + s->len, text, n);
    s->len += n;
    const long at = first_stop(s);
    const size_t out = s->len - tail_kept(s); /* a stop may still begin at out */
    if (at >= 0 && (size_t)at <= out) { /* none can begin before the one found */
        if (at > 0) emit(user, s->held, (size_t)at);
        s->hit = 1;
        s->len = 0;
        return 1;
    }
    if (out) {
        emit(user, s->held, out);
        memmove(s->held, s->held + out, s->len - out);
        s->len -= out;
    }
    return 0;
}

void stop_text_flush(stop_text *s, stop_text_emit emit, void *user) {
    if (!s->hit) { /* a stop string found may have waited for a longer one that began before it */
        const long at = first_stop(s);
        const size_t n = at >= 0 ? (size_t)at : s->len;
        if (n) emit(user, s->held, n);
        s->hit = at >= 0;
    }
    s->len = 0;
}

void stop_text_free(stop_text *s) {
    free(s->held);
    s->held = NULL;
    s->len = s->cap = 0;
}
