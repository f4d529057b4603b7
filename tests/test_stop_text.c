// SPDX-License-Identifier: Apache-2.0
/* test_stop_text.c — stop strings over streamed text (tools/stop_text.c): pieces pass through
 * without stops; the text ends before the earliest stop string, across piece boundaries, which is
 * never emitted; a tail that only looks like a stop's start comes out when it turns out not to be
 * one, or at the flush; and 20,000 random texts (4,000 under the sanitizers) over a 3-letter
 * alphabet, split at random, emit exactly the text before the first occurrence of any stop
 * string in the whole text.
 */
#include <string.h>

#include "../tools/stop_text.h"
#include "check.h"

typedef struct sink {
    char buf[4096];
    size_t n;
    int calls;
} sink;

static void emit(void *user, const char *t, size_t n) {
    sink *s = user;
    if (s->n + n < sizeof s->buf) memcpy(s->buf + s->n, t, n), s->n += n;
    s->buf[s->n] = '\0';
    s->calls++;
}

/* Pushes pieces (NULL-terminated), then flushes; returns the last push's result. */
static int feed(const char *const *stops, int nstops, const char *const *pieces, sink *out) {
    stop_text st = {.nstops = nstops};
    for (int i = 0; i < nstops; i++) st.stops[i] = stops[i];
    memset(out, 0, sizeof *out);
    int rc = 0;
    for (int i = 0; pieces[i] && rc == 0; i++) rc = stop_text_push(&st, pieces[i], strlen(pieces[i]), emit, out);
    stop_text_flush(&st, emit, out);
    stop_text_free(&st);
    return rc;
}

int main(void) {
    sink o;
    CHECK(feed(NULL, 0, (const char *const[]){"Hello", " world", NULL}, &o) == 0 && !strcmp(o.buf, "Hello world") &&
              o.calls == 2,
          "no stops: '%s' in %d calls", o.buf, o.calls);
    const char *end[] = {"END"};
    CHECK(feed(end, 1, (const char *const[]){"Hello wor", "ld. END more", "never", NULL}, &o) == 1 &&
              !strcmp(o.buf, "Hello world. "),
          "a stop string inside a piece: '%s'", o.buf);
    CHECK(feed(end, 1, (const char *const[]){"ab", "cE", "N", "D!", NULL}, &o) == 1 && !strcmp(o.buf, "abc"),
          "a stop string over three pieces: '%s'", o.buf);
    CHECK(feed(end, 1, (const char *const[]){"aEN", "X", NULL}, &o) == 0 && !strcmp(o.buf, "aENX"),
          "a tail that was not a stop: '%s'", o.buf);
    CHECK(feed(end, 1, (const char *const[]){"aE", NULL}, &o) == 0 && !strcmp(o.buf, "aE"), "the flush: '%s'", o.buf);
    const char *two[] = {"cd", "b"};
    CHECK(feed(two, 2, (const char *const[]){"abcd", NULL}, &o) == 1 && !strcmp(o.buf, "a"), "the earliest stop: '%s'",
          o.buf);
    CHECK(feed(end, 1, (const char *const[]){"END", NULL}, &o) == 1 && o.n == 0 && o.calls == 0,
          "a stop first: '%s', %d calls", o.buf, o.calls);

    /* random texts and splits against the rule on the whole text */
    uint64_t seed = 5;
    int bad = 0;
    for (int it = 0; it < (SANITIZED ? 4000 : 20000); it++) {
        char text[64], stops[3][8];
        const char *sp[3];
        const int n = 1 + (int)(check_rand_u64(&seed) % 40), ns = 1 + (int)(check_rand_u64(&seed) % 3);
        for (int i = 0; i < n; i++) text[i] = (char)('a' + check_rand_u64(&seed) % 3);
        text[n] = '\0';
        for (int k = 0; k < ns; k++) {
            const int m = 1 + (int)(check_rand_u64(&seed) % 4);
            for (int i = 0; i < m; i++) stops[k][i] = (char)('a' + check_rand_u64(&seed) % 3);
            stops[k][m] = '\0';
            sp[k] = stops[k];
        }
        size_t want = (size_t)n; /* the first occurrence of any stop */
        for (int k = 0; k < ns; k++) {
            const char *f = strstr(text, stops[k]);
            if (f && (size_t)(f - text) < want) want = (size_t)(f - text);
        }
        stop_text st = {.nstops = ns};
        for (int k = 0; k < ns; k++) st.stops[k] = sp[k];
        memset(&o, 0, sizeof o);
        int rc = 0;
        for (int at = 0; at < n && rc == 0;) {
            const int piece = 1 + (int)(check_rand_u64(&seed) % 5), len = at + piece > n ? n - at : piece;
            rc = stop_text_push(&st, text + at, (size_t)len, emit, &o);
            at += len;
        }
        stop_text_flush(&st, emit, &o); /* a stop found may be decided here: hit says so */
        stop_text_free(&st);
        if (o.n != want || memcmp(o.buf, text, want) != 0 || st.hit != (want < (size_t)n)) {
            if (bad++ < 3)
                CHECK(0, "text '%s', stops '%s' '%s' '%s': emitted '%s' (rc %d, hit %d), want %zu bytes", text,
                      sp[0], ns > 1 ? sp[1] : "", ns > 2 ? sp[2] : "", o.buf, rc, st.hit, want);
        }
    }
    CHECK(bad == 0, "%d random texts emitted other than the text before the first stop", bad);
    return check_report("stop_text");
}
