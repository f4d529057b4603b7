// SPDX-License-Identifier: Apache-2.0
/* trie.c — finding added tokens ("<|im_end|>", "<think>") in text, as HF's AddedVocabulary:
 * leftmost-longest matches over a byte trie, then the token's single_word / lstrip / rstrip
 * rules. The text between matches comes out as plain segments (id -1) for the rest of the
 * pipeline. The root has a 256-entry child table so text without added tokens costs one load
 * per byte.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

int pk_tok_trie_init(pk_tok_trie *tr) {
    memset(tr, 0, sizeof *tr);
    tr->nodes = malloc(16 * sizeof *tr->nodes);
    if (!tr->nodes) return -1;
    tr->cap = 16;
    tr->n = 1;
    tr->nodes[0] = (pk_tok_trie_node){-1, -1, -1, 0};
    for (int i = 0; i < 256; i++) tr->root[i] = -1;
    return 0;
}

static int32_t trie_child(const pk_tok_trie *tr, int32_t node, uint8_t byte) {
    if (node == 0) return tr->root[byte];
    for (int32_t c = tr->nodes[node].child; c >= 0; c = tr->nodes[c].sibling)
        if (tr->nodes[c].byte == byte) return c;
    return -1;
}

int pk_tok_trie_add(pk_tok_trie *tr, const char *s, size_t len, int32_t added) {
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = trie_child(tr, node, b);
        if (c < 0) {
            if (tr->n == tr->cap) {
                if (tr->cap > INT32_MAX / 2) return -1;
                pk_tok_trie_node *nodes = realloc(tr->nodes, (size_t)tr->cap * 2 * sizeof *nodes);
                if (!nodes) return -1;
                tr->nodes = nodes;
                tr->cap *= 2;
            }
            c = tr->n++;
            tr->nodes[c] = (pk_tok_trie_node){-1, -1, -1, b};
            if (node == 0) {
                tr->root[b] = c;
            } else {
                tr->nodes[c].sibling = tr->nodes[node].child;
                tr->nodes[node].child = c;
            }
        }
        node = c;
    }
    tr->nodes[node].added = added; /* a later duplicate wins, as in HF's map */
    return 0;
}

void pk_tok_trie_free(pk_tok_trie *tr) {
    free(tr->nodes);
    memset(tr, 0, sizeof *tr);
}

static int segs_push(pk_tok_segs *s, size_t off, size_t len, int32_t id) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        pk_tok_seg *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (pk_tok_seg){off, len, id};
    return 0;
}

/* Rust regex's \w on the character before s[at] (before = true) or at s[at]. */
static bool word_char(const pk_tokenizer *t, const char *s, size_t len, size_t at, bool before) {
    size_t start = at;
    if (before) {
        if (at == 0) return false;
        start = at - 1;
        while (start > 0 && ((uint8_t)s[start] & 0xC0) == 0x80) start--;
    } else if (at >= len) {
        return false;
    }
    uint32_t cp;
    int n = pk_utf8_char((const uint8_t *)s + start, len - start, &cp);
    if (!n) return false;
    int rc = pcre2_match(t->word_re, (PCRE2_SPTR)s + start, (size_t)n, 0,
                         PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, t->md, NULL);
    return rc >= 0;
}

int pk_tok_split_added(pk_tokenizer *t, const pk_tok_trie *tr, const char *s, size_t len,
                       pk_tok_segs *out) {
    out->n = 0;
    size_t start_offset = 0;
    size_t pos = tr->nodes ? 0 : len; /* no added tokens at all: one plain segment */
    while (pos < len) {
        /* the longest token starting at pos */
        int32_t node = tr->root[(uint8_t)s[pos]], best = -1;
        size_t best_end = 0;
        for (size_t q = pos + 1; node >= 0; q++) {
            if (tr->nodes[node].added >= 0) {
                best = tr->nodes[node].added;
                best_end = q;
            }
            if (q >= len) break;
            node = trie_child(tr, node, (uint8_t)s[q]);
        }
        if (best < 0) {
            pos++;
            continue;
        }
        const pk_tok_added *a = &t->added[best];
        size_t start = pos, stop = best_end;
        pos = best_end;
        if (a->single_word) {
            bool start_space = start == 0 || !word_char(t, s, len, start, true);
            bool stop_space = stop == len || !word_char(t, s, len, stop, false);
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t cs = ns - 1;
                while (cs > 0 && ((uint8_t)s[cs] & 0xC0) == 0x80) cs--;
                uint32_t cp;
                if (!pk_utf8_char((const uint8_t *)s + cs, len - cs, &cp) ||
                    !pk_uni_is_white_space(cp))
                    break;
                ns = cs;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < len) {
                uint32_t cp;
                int n = pk_utf8_char((const uint8_t *)s + stop, len - stop, &cp);
                if (!n || !pk_uni_is_white_space(cp)) break;
                stop += (size_t)n;
            }
        }
        if (start_offset < start && segs_push(out, start_offset, start - start_offset, -1))
            return -1;
        if (segs_push(out, start, stop > start ? stop - start : 0, a->id)) return -1;
        start_offset = stop;
    }
    if (start_offset < len && segs_push(out, start_offset, len - start_offset, -1)) return -1;
    return 0;
}
