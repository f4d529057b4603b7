// SPDX-License-Identifier: Apache-2.0
/* map.c — the tokenizer's containers: growable buffers and vectors, a string -> int32 hash map
 * (vocabulary, added tokens, word cache) and an id-pair -> (rank, id) map (BPE merges).
 * Both maps are open addressing with linear probing over a power-of-two table kept at most
 * half full, so a lookup touches one or two cache lines. Every function returns -1 on out of
 * memory and leaves the container as it was.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

static size_t grow_cap(size_t cap, size_t need, size_t min) {
    size_t c = cap ? cap : min;
    while (c < need) {
        if (c > SIZE_MAX / 2) return need;
        c *= 2;
    }
    return c;
}

int pk_tok_buf_reserve(pk_tok_buf *b, size_t extra) {
    if (extra > SIZE_MAX - b->len - 1) return -1;
    size_t need = b->len + extra + 1; /* room for a NUL terminator */
    if (need <= b->cap) return 0;
    size_t cap = grow_cap(b->cap, need, 256);
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int pk_tok_buf_append(pk_tok_buf *b, const void *src, size_t n) {
    if (pk_tok_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void pk_tok_buf_free(pk_tok_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

#define VEC_PUSH(vec, elem_type, value)                                                            \
    do {                                                                                           \
        if ((vec)->n == (vec)->cap) {                                                              \
            size_t cap_ = grow_cap((vec)->cap, (vec)->n + 1, 16);                                  \
            if (cap_ > SIZE_MAX / sizeof(elem_type)) return -1;                                    \
            elem_type *v_ = realloc((vec)->v, cap_ * sizeof(elem_type));                           \
            if (!v_) return -1;                                                                    \
            (vec)->v = v_;                                                                         \
            (vec)->cap = cap_;                                                                     \
        }                                                                                          \
        (vec)->v[(vec)->n++] = (value);                                                            \
    } while (0)

int pk_tok_spans_push(pk_tok_spans *s, size_t off, size_t len) {
    pk_tok_span sp = {off, len};
    VEC_PUSH(s, pk_tok_span, sp);
    return 0;
}

void pk_tok_spans_free(pk_tok_spans *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

int pk_tok_ids_push(pk_tok_ids *s, int32_t id) {
    VEC_PUSH(s, int32_t, id);
    return 0;
}

void pk_tok_ids_free(pk_tok_ids *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

void pk_tok_segs_free(pk_tok_segs *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- string map ----------------------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ len;
    const unsigned char *p = (const unsigned char *)s;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < len; i++) w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
    return (uint32_t)h;
}

static int strmap_rehash(pk_tok_strmap *m, uint32_t nslots) {
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return -1;
    uint32_t mask = nslots - 1;
    for (uint32_t i = 0; i < m->n; i++) {
        uint32_t j = m->entries[i].hash & mask;
        while (slots[j]) j = (j + 1) & mask;
        slots[j] = i + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = mask;
    return 0;
}

int32_t pk_tok_strmap_get(const pk_tok_strmap *m, const char *key, size_t len) {
    if (!m->slots || len > UINT32_MAX) return -1;
    uint32_t h = hash_bytes(key, len);
    for (uint32_t j = h & m->mask;; j = (j + 1) & m->mask) {
        uint32_t s = m->slots[j];
        if (!s) return -1;
        const pk_tok_strmap_entry *e = &m->entries[s - 1];
        if (e->hash == h && e->len == len && memcmp(m->keys.p + e->off, key, len) == 0)
            return e->val;
    }
}

int pk_tok_strmap_put(pk_tok_strmap *m, const char *key, size_t len, int32_t val) {
    if (len > UINT32_MAX || m->n >= UINT32_MAX / 4) return -1;
    if (!m->slots || (m->n + 1) * 2 > m->mask + 1) {
        uint32_t nslots = m->slots ? (m->mask + 1) * 2 : 64;
        if (strmap_rehash(m, nslots)) return -1;
    }
    uint32_t h = hash_bytes(key, len);
    uint32_t j = h & m->mask;
    for (;; j = (j + 1) & m->mask) {
        uint32_t s = m->slots[j];
        if (!s) break;
        pk_tok_strmap_entry *e = &m->entries[s - 1];
        if (e->hash == h && e->len == len && memcmp(m->keys.p + e->off, key, len) == 0) {
            e->val = val;
            return 0;
        }
    }
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        pk_tok_strmap_entry *e = realloc(m->entries, (size_t)cap * sizeof *e);
        if (!e) return -1;
        m->entries = e;
        m->cap = cap;
    }
    size_t off = m->keys.len;
    if (pk_tok_buf_append(&m->keys, key, len)) return -1;
    m->entries[m->n] = (pk_tok_strmap_entry){off, (uint32_t)len, h, val};
    m->slots[j] = ++m->n;
    return 0;
}

void pk_tok_strmap_clear(pk_tok_strmap *m) {
    if (m->slots) memset(m->slots, 0, ((size_t)m->mask + 1) * sizeof *m->slots);
    m->n = 0;
    m->keys.len = 0;
}

void pk_tok_strmap_free(pk_tok_strmap *m) {
    free(m->slots);
    free(m->entries);
    pk_tok_buf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

/* ---- pair map ------------------------------------------------------------------------------- */

static uint32_t hash_pair(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

static int pairmap_rehash(pk_tok_pairmap *m, uint32_t nslots) {
    pk_tok_pair_slot *slots = malloc((size_t)nslots * sizeof *slots);
    if (!slots) return -1;
    for (uint32_t i = 0; i < nslots; i++) slots[i].key = UINT64_MAX;
    uint32_t mask = nslots - 1;
    if (m->slots) {
        for (uint32_t i = 0; i <= m->mask; i++) {
            if (m->slots[i].key == UINT64_MAX) continue;
            uint32_t j = hash_pair(m->slots[i].key) & mask;
            while (slots[j].key != UINT64_MAX) j = (j + 1) & mask;
            slots[j] = m->slots[i];
        }
    }
    free(m->slots);
    m->slots = slots;
    m->mask = mask;
    return 0;
}

int pk_tok_pairmap_put(pk_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    if (m->n >= UINT32_MAX / 4) return -1;
    if (!m->slots || (m->n + 1) * 2 > m->mask + 1) {
        if (pairmap_rehash(m, m->slots ? (m->mask + 1) * 2 : 1024)) return -1;
    }
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t j = hash_pair(k) & m->mask;
    while (m->slots[j].key != UINT64_MAX && m->slots[j].key != k) j = (j + 1) & m->mask;
    if (m->slots[j].key == UINT64_MAX) m->n++;
    m->slots[j] = (pk_tok_pair_slot){k, rank, id};
    return 0;
}

const pk_tok_pair_slot *pk_tok_pairmap_get(const pk_tok_pairmap *m, int32_t a, int32_t b) {
    if (!m->slots) return NULL;
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t j = hash_pair(k) & m->mask;; j = (j + 1) & m->mask) {
        if (m->slots[j].key == k) return &m->slots[j];
        if (m->slots[j].key == UINT64_MAX) return NULL;
    }
}

void pk_tok_pairmap_free(pk_tok_pairmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
