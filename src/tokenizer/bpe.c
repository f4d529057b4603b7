// SPDX-License-Identifier: Apache-2.0
/* bpe.c — the BPE model: one pre-token (already in the model's alphabet) to ids.
 *
 * Same algorithm as HF's Word::merge_all, so ties and odd merge lists give HF's ids: symbols
 * form a linked list; a min-heap holds candidate merges ordered by (rank, position); a popped
 * candidate is skipped when stale (its left symbol was merged away or now pairs differently).
 * O(n log n) per word. Results are cached per word (words up to CACHE_WORD_MAX bytes), and
 * with ignore_merges a word that is itself a vocabulary entry is emitted as is.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define CACHE_WORD_MAX 256
#define CACHE_MAX_WORDS 100000
#define CACHE_MAX_IDS (1u << 22)

typedef struct sym {
    int32_t id;
    int32_t prev, next; /* -1 = none */
    uint32_t len;       /* 0 = merged into its left neighbour */
} sym;

typedef struct cand {
    int32_t rank, pos, new_id;
} cand;

static bool cand_less(cand a, cand b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(c, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0];
    cand last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        cand best = last;
        if (l < *n && cand_less(h[l], best)) {
            m = l;
            best = h[l];
        }
        if (r < *n && cand_less(h[r], best)) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int reserve_scratch(pk_tokenizer *t, size_t n) {
    if (n > t->bpe_syms_cap) {
        sym *s = realloc(t->bpe_syms, n * sizeof *s);
        if (!s) return -1;
        t->bpe_syms = s;
        t->bpe_syms_cap = n;
    }
    /* each merge pushes at most 2 candidates on top of the n - 1 initial ones */
    size_t hn = 3 * n + 1;
    if (hn > t->bpe_heap_cap) {
        cand *h = realloc(t->bpe_heap, hn * sizeof *h);
        if (!h) return -1;
        t->bpe_heap = h;
        t->bpe_heap_cap = hn;
    }
    return 0;
}

static int32_t lookup_piece(pk_tokenizer *t, const char *c, size_t n, bool first, bool last) {
    if ((first || !t->subword_prefix) && (!last || !t->word_suffix))
        return pk_tok_strmap_get(&t->vocab, c, n);
    t->tmp.len = 0;
    if ((!first && t->subword_prefix &&
         pk_tok_buf_append(&t->tmp, t->subword_prefix, t->subword_prefix_len)) ||
        pk_tok_buf_append(&t->tmp, c, n) ||
        (last && t->word_suffix && pk_tok_buf_append(&t->tmp, t->word_suffix, t->word_suffix_len)))
        return -2;
    return pk_tok_strmap_get(&t->vocab, t->tmp.p, t->tmp.len);
}

/* Builds the initial symbols of w (HF BPE::merge_word before merge_all). Returns the count. */
static int64_t initial_symbols(pk_tokenizer *t, const char *w, size_t len) {
    sym *s = t->bpe_syms;
    int64_t n = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    bool have_unk = false;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int cl = pk_utf8_char((const uint8_t *)w + i, len - i, &cp);
        if (!cl) cl = 1; /* not reached: pieces are well-formed */
        bool first = i == 0, last = i + (size_t)cl >= len;
        int32_t id = lookup_piece(t, w + i, (size_t)cl, first, last);
        if (id == -2) {
            pk_tok_set_err(t, "out of memory");
            return -1;
        }
        if (id >= 0) {
            if (have_unk) {
                s[n++] = (sym){unk_id, -1, -1, unk_len};
                have_unk = false;
            }
            s[n++] = (sym){id, -1, -1, (uint32_t)cl};
        } else {
            if (t->byte_fallback) {
                /* every byte of the looked-up string as <0xAB>, if all exist */
                const char *k = w + i;
                size_t kn = (size_t)cl;
                if ((!first && t->subword_prefix) || (last && t->word_suffix)) {
                    k = t->tmp.p;
                    kn = t->tmp.len;
                }
                int32_t ids[64];
                size_t nb = 0;
                bool all = kn <= 64;
                for (size_t j = 0; all && j < kn; j++) {
                    static const char hex[] = "0123456789ABCDEF";
                    uint8_t b = (uint8_t)k[j];
                    char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
                    int32_t bid = pk_tok_strmap_get(&t->vocab, name, 6);
                    if (bid < 0)
                        all = false;
                    else
                        ids[nb++] = bid;
                }
                if (all) {
                    if ((size_t)n + nb > t->bpe_syms_cap &&
                        reserve_scratch(t, (size_t)n + nb + len)) {
                        pk_tok_set_err(t, "out of memory");
                        return -1;
                    }
                    s = t->bpe_syms;
                    for (size_t j = 0; j < nb; j++) s[n++] = (sym){ids[j], -1, -1, 1};
                    i += (size_t)cl;
                    continue;
                }
            }
            if (t->unk_token) {
                int32_t uid = pk_tok_strmap_get(&t->vocab, t->unk_token, strlen(t->unk_token));
                if (uid < 0) {
                    pk_tok_set_err(t, "model.unk_token \"%s\" is not in model.vocab", t->unk_token);
                    return -1;
                }
                if (have_unk && t->fuse_unk) {
                    unk_len += (uint32_t)cl;
                } else {
                    if (have_unk) s[n++] = (sym){unk_id, -1, -1, unk_len};
                    unk_id = uid;
                    unk_len = (uint32_t)cl;
                    have_unk = true;
                }
            }
            /* no unk token: HF drops the character */
        }
        i += (size_t)cl;
    }
    if (have_unk) s[n++] = (sym){unk_id, -1, -1, unk_len};
    return n;
}

static int merge_word(pk_tokenizer *t, const char *w, size_t len, pk_tok_ids *out) {
    /* symbols: at most one per byte, or 64 per character with byte fallback */
    if (reserve_scratch(t, len + 1)) goto oom;
    int64_t n64 = initial_symbols(t, w, len);
    if (n64 < 0) return -1;
    int32_t n = (int32_t)n64;
    if (reserve_scratch(t, (size_t)n + 1)) goto oom;
    sym *s = t->bpe_syms;
    cand *h = t->bpe_heap;
    size_t hn = 0;
    for (int32_t i = 0; i < n; i++) {
        s[i].prev = i - 1;
        s[i].next = i + 1 < n ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < n; i++) {
        const pk_tok_pair_slot *m = pk_tok_pairmap_get(&t->merges, s[i].id, s[i + 1].id);
        if (m) heap_push(h, &hn, (cand){m->rank, i, m->id});
    }
    while (hn > 0) {
        cand top = heap_pop(h, &hn);
        sym *a = &s[top.pos];
        if (a->len == 0 || a->next < 0) continue;
        int32_t next_pos = a->next;
        sym right = s[next_pos];
        const pk_tok_pair_slot *m = pk_tok_pairmap_get(&t->merges, a->id, right.id);
        if (!m || m->id != top.new_id) continue; /* stale */
        a->id = top.new_id;
        a->len += right.len;
        a->next = right.next;
        s[next_pos].len = 0;
        if (right.next >= 0) s[right.next].prev = top.pos;
        if (hn + 2 > t->bpe_heap_cap) { /* cannot happen: bounded above; be safe */
            pk_tok_set_err(t, "BPE heap overflow");
            return -1;
        }
        if (a->prev >= 0) {
            const pk_tok_pair_slot *pm = pk_tok_pairmap_get(&t->merges, s[a->prev].id, a->id);
            if (pm) heap_push(h, &hn, (cand){pm->rank, a->prev, pm->id});
        }
        if (a->next >= 0) {
            const pk_tok_pair_slot *nm = pk_tok_pairmap_get(&t->merges, a->id, s[a->next].id);
            if (nm) heap_push(h, &hn, (cand){nm->rank, top.pos, nm->id});
        }
    }
    for (int32_t i = 0; i < n; i++)
        if (s[i].len && pk_tok_ids_push(out, s[i].id)) goto oom;
    return 0;
oom:
    pk_tok_set_err(t, "out of memory");
    return -1;
}

int pk_tok_bpe(pk_tokenizer *t, const char *w, size_t len, pk_tok_ids *out) {
    if (len == 0) return 0;
    if (t->ignore_merges) {
        int32_t id = pk_tok_strmap_get(&t->vocab, w, len);
        if (id >= 0) return pk_tok_ids_push(out, id) ? pk_tok_set_err(t, "out of memory") : 0;
    }
    bool cacheable = len <= CACHE_WORD_MAX;
    if (cacheable) {
        int32_t off = pk_tok_strmap_get(&t->cache, w, len);
        if (off >= 0) {
            const int32_t *c = t->cache_ids.v + off;
            for (int32_t i = 0; i < c[0]; i++)
                if (pk_tok_ids_push(out, c[1 + i])) return pk_tok_set_err(t, "out of memory");
            return 0;
        }
    }
    size_t start = out->n;
    if (merge_word(t, w, len, out)) return -1;
    if (cacheable) {
        if (t->cache.n >= CACHE_MAX_WORDS || t->cache_ids.n >= CACHE_MAX_IDS) {
            pk_tok_strmap_clear(&t->cache);
            t->cache_ids.n = 0;
        }
        size_t count = out->n - start;
        int32_t off = (int32_t)t->cache_ids.n;
        bool ok = pk_tok_ids_push(&t->cache_ids, (int32_t)count) == 0;
        for (size_t i = 0; ok && i < count; i++)
            ok = pk_tok_ids_push(&t->cache_ids, out->v[start + i]) == 0;
        if (ok) ok = pk_tok_strmap_put(&t->cache, w, len, off) == 0;
        if (!ok) { /* a cache that can't grow is just dropped */
            pk_tok_strmap_clear(&t->cache);
            t->cache_ids.n = 0;
        }
    }
    return 0;
}

void pk_tok_bpe_free_scratch(pk_tokenizer *t) {
    free(t->bpe_syms);
    free(t->bpe_heap);
    t->bpe_syms = t->bpe_heap = NULL;
    t->bpe_syms_cap = t->bpe_heap_cap = 0;
}
