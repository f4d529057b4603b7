// SPDX-License-Identifier: Apache-2.0
/* decoder.c — streaming decode: ids -> UTF-8 text that never ends inside a character.
 *
 * Each id's bytes were fixed at load (tokenizer.c: byte-level inverse, or the token's own text).
 * The decoder keeps at most 3 bytes of a character still being completed. Ill-formed input is
 * replaced like Rust's String::from_utf8_lossy, which HF's decode ends with: each maximal
 * ill-formed subpart becomes one U+FFFD, so pushing ids one at a time and concatenating the
 * results gives exactly HF's tokenizer.decode(ids, skip_special_tokens=False).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

struct pk_decoder {
    const pk_tokenizer *t;
    uint8_t pend[4]; /* a well-formed but incomplete character */
    int npend;
    bool started; /* for decoders that join tokens with spaces */
};

pk_decoder *pk_decoder_new(const pk_tokenizer *t) {
    if (!t) return NULL;
    pk_decoder *d = calloc(1, sizeof *d);
    if (d) d->t = t;
    return d;
}

void pk_decoder_free(pk_decoder *d) { free(d); }

/* Bytes the character starting with lead byte c needs in all, or 0 if c can't start one. */
static int char_len(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Whether b may follow the prefix p[0..k) (k >= 1) of a character. */
static bool continues(const uint8_t *p, int k, uint8_t b) {
    if ((b & 0xC0) != 0x80) return false;
    if (k == 1) {
        if (p[0] == 0xE0) return b >= 0xA0;
        if (p[0] == 0xED) return b <= 0x9F;
        if (p[0] == 0xF0) return b >= 0x90;
        if (p[0] == 0xF4) return b <= 0x8F;
    }
    return true;
}

typedef struct sink {
    char *out;
    size_t cap, len; /* len may exceed cap - 1: then the caller reports overflow */
} sink;

static void put(sink *k, const void *p, size_t n) {
    if (k->len + n < k->cap) memcpy(k->out + k->len, p, n);
    k->len += n;
}

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Feeds bytes through the lossy UTF-8 state machine held in pend/npend. */
static void feed(uint8_t *pend, int *npend, const uint8_t *b, size_t n, sink *k) {
    for (size_t i = 0; i < n;) {
        uint8_t c = b[i];
        if (*npend == 0) {
            int need = char_len(c);
            if (need == 1) { /* run of ASCII */
                size_t j = i;
                while (j < n && b[j] < 0x80) j++;
                put(k, b + i, j - i);
                i = j;
                continue;
            }
            if (need == 0)
                put(k, REPLACEMENT, 3);
            else
                pend[(*npend)++] = c;
            i++;
            continue;
        }
        if (!continues(pend, *npend, c)) { /* the pending prefix is a maximal subpart */
            put(k, REPLACEMENT, 3);
            *npend = 0;
            continue; /* c starts afresh */
        }
        pend[(*npend)++] = c;
        i++;
        if (*npend == char_len(pend[0])) {
            put(k, pend, (size_t)*npend);
            *npend = 0;
        }
    }
}

static int finish(sink *k) {
    if (k->len >= k->cap) return -1;
    k->out[k->len] = 0;
    return (int)k->len;
}

int pk_decoder_push(pk_decoder *d, int32_t id, char *out, size_t cap) {
    if (!d || !out || cap == 0) return -1;
    const pk_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_ids) return -1;
    if (!t->dec_has[id]) { /* an id inside the range that names no token: HF skips it */
        out[0] = 0;
        return 0;
    }
    sink k = {out, cap, 0};
    uint8_t pend[4];
    int npend = d->npend;
    memcpy(pend, d->pend, sizeof pend);
    if (t->decoder_join_spaces && d->started) feed(pend, &npend, (const uint8_t *)" ", 1, &k);
    feed(pend, &npend, (const uint8_t *)t->dec + t->dec_off[id],
         t->dec_off[id + 1] - t->dec_off[id], &k);
    int r = finish(&k);
    if (r < 0) return -1; /* too small: the state is untouched, the call can be repeated */
    memcpy(d->pend, pend, sizeof pend);
    d->npend = npend;
    d->started = true;
    return r;
}

int pk_decoder_flush(pk_decoder *d, char *out, size_t cap) {
    if (!d || !out || cap == 0) return -1;
    sink k = {out, cap, 0};
    if (d->npend) put(&k, REPLACEMENT, 3);
    int r = finish(&k);
    if (r < 0) return -1;
    d->npend = 0;
    d->started = false;
    return r;
}
