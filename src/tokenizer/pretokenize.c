// SPDX-License-Identifier: Apache-2.0
/* pretokenize.c — the pre-tokenizer: Split (a regex with one of HF's five delimiter
 * behaviors, optionally inverted) and ByteLevel (optional prefix space, optional GPT-2 regex,
 * then every byte mapped to GPT-2's printable alphabet), applied in order to every piece.
 *
 * HF runs these regexes with Oniguruma; PCRE2 differs on three points that change real splits,
 * so patterns are rewritten before compiling: \s and \S mean Unicode White_Space (PCRE2's \s
 * also takes U+180E), caseless s/k do not match U+017F (long s) or U+212A (Kelvin sign), and
 * \p{L} / \p{N} take the letters and digits of Unicode 15-16 that PCRE2 10.42 (Unicode 14)
 * doesn't know yet.
 * Matches are iterated like the Rust onig crate's find_iter (an empty match right after the
 * previous match is skipped by one character).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order. */
const uint16_t pk_tok_byte_char[256] = {
    0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107, 0x108, 0x109, 0x10A, 0x10B, 0x10C,
    0x10D, 0x10E, 0x10F, 0x110, 0x111, 0x112, 0x113, 0x114, 0x115, 0x116, 0x117, 0x118, 0x119,
    0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x11F, 0x120, 0x21,  0x22,  0x23,  0x24,  0x25,  0x26,
    0x27,  0x28,  0x29,  0x2A,  0x2B,  0x2C,  0x2D,  0x2E,  0x2F,  0x30,  0x31,  0x32,  0x33,
    0x34,  0x35,  0x36,  0x37,  0x38,  0x39,  0x3A,  0x3B,  0x3C,  0x3D,  0x3E,  0x3F,  0x40,
    0x41,  0x42,  0x43,  0x44,  0x45,  0x46,  0x47,  0x48,  0x49,  0x4A,  0x4B,  0x4C,  0x4D,
    0x4E,  0x4F,  0x50,  0x51,  0x52,  0x53,  0x54,  0x55,  0x56,  0x57,  0x58,  0x59,  0x5A,
    0x5B,  0x5C,  0x5D,  0x5E,  0x5F,  0x60,  0x61,  0x62,  0x63,  0x64,  0x65,  0x66,  0x67,
    0x68,  0x69,  0x6A,  0x6B,  0x6C,  0x6D,  0x6E,  0x6F,  0x70,  0x71,  0x72,  0x73,  0x74,
    0x75,  0x76,  0x77,  0x78,  0x79,  0x7A,  0x7B,  0x7C,  0x7D,  0x7E,  0x121, 0x122, 0x123,
    0x124, 0x125, 0x126, 0x127, 0x128, 0x129, 0x12A, 0x12B, 0x12C, 0x12D, 0x12E, 0x12F, 0x130,
    0x131, 0x132, 0x133, 0x134, 0x135, 0x136, 0x137, 0x138, 0x139, 0x13A, 0x13B, 0x13C, 0x13D,
    0x13E, 0x13F, 0x140, 0x141, 0x142, 0xA1,  0xA2,  0xA3,  0xA4,  0xA5,  0xA6,  0xA7,  0xA8,
    0xA9,  0xAA,  0xAB,  0xAC,  0x143, 0xAE,  0xAF,  0xB0,  0xB1,  0xB2,  0xB3,  0xB4,  0xB5,
    0xB6,  0xB7,  0xB8,  0xB9,  0xBA,  0xBB,  0xBC,  0xBD,  0xBE,  0xBF,  0xC0,  0xC1,  0xC2,
    0xC3,  0xC4,  0xC5,  0xC6,  0xC7,  0xC8,  0xC9,  0xCA,  0xCB,  0xCC,  0xCD,  0xCE,  0xCF,
    0xD0,  0xD1,  0xD2,  0xD3,  0xD4,  0xD5,  0xD6,  0xD7,  0xD8,  0xD9,  0xDA,  0xDB,  0xDC,
    0xDD,  0xDE,  0xDF,  0xE0,  0xE1,  0xE2,  0xE3,  0xE4,  0xE5,  0xE6,  0xE7,  0xE8,  0xE9,
    0xEA,  0xEB,  0xEC,  0xED,  0xEE,  0xEF,  0xF0,  0xF1,  0xF2,  0xF3,  0xF4,  0xF5,  0xF6,
    0xF7,  0xF8,  0xF9,  0xFA,  0xFB,  0xFC,  0xFD,  0xFE,  0xFF,
};

int pk_tok_char_byte(uint32_t cp) {
    if (cp >= 0x21 && cp <= 0x7E) return (int)cp;
    if ((cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x143) { /* the 68 other bytes, in order */
        int i = (int)cp - 0x100;
        if (i <= 0x20) return i; /* 0x00..0x20 */
        if (i == 0x21) return 0x7F;
        if (i <= 0x42) return 0x80 + i - 0x22; /* 0x80..0xA0 */
        return 0xAD;
    }
    return -1;
}

/* ---- regex translation ---------------------------------------------------------------------- */

#define WS_CLASS_BODY "\\p{White_Space}"

/* Code points that are \p{L} / \p{N} for HF's Oniguruma (Unicode 16) but unassigned for PCRE2
 * 10.42 (Unicode 14): found by splitting every code point with Split(\p{L} / \p{N}, Removed)
 * in tokenizers 0.23.2 (npm) and comparing with PCRE2. Nothing goes the other way. Harmless
 * with a newer PCRE2 that already has them. */
#define EXTRA_L                                                                                    \
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"               \
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"         \
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}"           \
    "\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}"          \
    "\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}"                    \
    "\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}"                     \
    "\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}"          \
    "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
#define EXTRA_N                                                                                    \
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"         \
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"         \
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"

static int put_str(pk_tok_buf *b, const char *s) { return pk_tok_buf_append(b, s, strlen(s)); }

/* Copies an escape starting at p[i] == '\\' with its braces ({...}) if it has them; returns the
 * index after it. */
static size_t copy_escape(const char *p, size_t len, size_t i, pk_tok_buf *out, int *rc) {
    size_t j = i + 1;
    if (j < len) {
        unsigned char c = (unsigned char)p[j];
        j++;
        if (c >= 0x80) /* an escaped multi-byte character: take all of it */
            while (j < len && ((unsigned char)p[j] & 0xC0) == 0x80) j++;
        if (strchr("pPxNgko", (int)c) && j < len && p[j] == '{') {
            while (j < len && p[j] != '}') j++;
            if (j < len) j++;
        }
    }
    if (pk_tok_buf_append(out, p + i, j - i)) *rc = -1;
    return j;
}

/* Rewrites an Oniguruma-flavoured pattern for PCRE2 (see the file comment). */
static int translate_regex(const char *p, size_t len, pk_tok_buf *out) {
    bool icase_stack[256];
    int depth = 0;
    bool icase = false;
    bool in_class = false;
    size_t class_start = 0;
    int rc = 0;
    out->len = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        char c = p[i];
        if (c == '\\') {
            char e = i + 1 < len ? p[i + 1] : 0;
            if (e == 's') {
                rc = put_str(out, in_class ? WS_CLASS_BODY : "[" WS_CLASS_BODY "]");
                i += 2;
            } else if (e == 'S') {
                rc = put_str(out, "\\P{White_Space}");
                i += 2;
            } else if (e == 'p' && i + 4 < len && p[i + 2] == '{' &&
                       (p[i + 3] == 'L' || p[i + 3] == 'N') && p[i + 4] == '}') {
                const char *extra = p[i + 3] == 'L' ? "\\p{L}" EXTRA_L : "\\p{N}" EXTRA_N;
                if (!in_class) rc = put_str(out, "[");
                if (!rc) rc = put_str(out, extra);
                if (!rc && !in_class) rc = put_str(out, "]");
                i += 5;
            } else if (e == 'Q') { /* \Q...\E: literal, copy as is */
                size_t j = i + 2;
                while (j + 1 < len && !(p[j] == '\\' && p[j + 1] == 'E')) j++;
                j = j + 1 < len ? j + 2 : len;
                rc = pk_tok_buf_append(out, p + i, j - i);
                i = j;
            } else {
                i = copy_escape(p, len, i, out, &rc);
            }
            continue;
        }
        if (in_class) {
            if (c == ']' && i > class_start) in_class = false;
            if (c == '[' && i + 1 < len && p[i + 1] == ':') { /* [:alpha:] */
                size_t j = i + 2;
                while (j + 1 < len && !(p[j] == ':' && p[j + 1] == ']')) j++;
                j = j + 1 < len ? j + 2 : len;
                rc = pk_tok_buf_append(out, p + i, j - i);
                i = j;
                continue;
            }
            rc = pk_tok_buf_append(out, &c, 1);
            i++;
            continue;
        }
        if (c == '[') {
            in_class = true;
            size_t j = i + 1;
            if (j < len && p[j] == '^') j++;
            class_start = j + 1; /* a ']' right at the start is a literal */
            rc = pk_tok_buf_append(out, &c, 1);
            i++;
            continue;
        }
        if (c == '(') {
            if (depth < (int)(sizeof icase_stack / sizeof icase_stack[0]))
                icase_stack[depth] = icase;
            depth++;
            size_t j = i + 1;
            if (j < len && p[j] == '?') {
                size_t k = j + 1;
                bool on = true, nicase = icase, flags = false;
                while (k < len && (p[k] == '-' || p[k] == 'i' || p[k] == 'm' || p[k] == 's' ||
                                   p[k] == 'x' || p[k] == 'n' || p[k] == 'U' || p[k] == 'J')) {
                    if (p[k] == '-') on = false;
                    if (p[k] == 'i') nicase = on;
                    flags = true;
                    k++;
                }
                if (flags && k < len && (p[k] == ')' || p[k] == ':')) {
                    if (p[k] == ')') depth--; /* (?i): for the rest of the enclosing group */
                    icase = nicase;
                    rc = pk_tok_buf_append(out, p + i, k + 1 - i); /* flag letters as they are */
                    i = k + 1;
                    continue;
                } else if (k < len &&
                           ((p[k] == '<' && k + 1 < len && p[k + 1] != '=' && p[k + 1] != '!') ||
                            (p[k] == 'P' && k + 1 < len && p[k + 1] == '<') || p[k] == '\'')) {
                    /* a group name: copy it through, its letters are not pattern */
                    char close = p[k] == '\'' ? '\'' : '>';
                    size_t e = k + 1;
                    while (e < len && p[e] != close) e++;
                    if (e < len) e++;
                    rc = pk_tok_buf_append(out, p + i, e - i);
                    i = e;
                    continue;
                }
            } else if (j < len && p[j] == '*') { /* (*VERB) */
                size_t e = j;
                while (e < len && p[e] != ')') e++;
                if (e < len) e++;
                depth--;
                rc = pk_tok_buf_append(out, p + i, e - i);
                i = e;
                continue;
            }
            rc = pk_tok_buf_append(out, &c, 1);
            i++;
            continue;
        }
        if (c == ')') {
            if (depth > 0) {
                depth--;
                if (depth < (int)(sizeof icase_stack / sizeof icase_stack[0]))
                    icase = icase_stack[depth];
            }
            rc = pk_tok_buf_append(out, &c, 1);
            i++;
            continue;
        }
        if (c == '{') { /* a quantifier {n,m}: no letters to rewrite */
            size_t j = i;
            while (j < len && p[j] != '}') j++;
            if (j < len) j++;
            rc = pk_tok_buf_append(out, p + i, j - i);
            i = j;
            continue;
        }
        if (icase && (c == 's' || c == 'S')) {
            rc = put_str(out, "[sS]");
        } else if (icase && (c == 'k' || c == 'K')) {
            rc = put_str(out, "[kK]");
        } else {
            rc = pk_tok_buf_append(out, &c, 1);
        }
        i++;
    }
    return rc;
}

pcre2_code *pk_tok_regex_compile(const char *pattern, size_t len, bool literal, char *err,
                                 size_t err_len) {
    pk_tok_buf tr = {0};
    const char *src = pattern;
    size_t src_len = len;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
    if (literal) {
        opts = PCRE2_UTF | PCRE2_LITERAL; /* PCRE2_UCP is not allowed with it */
    } else {
        if (translate_regex(pattern, len, &tr)) {
            snprintf(err, err_len, "out of memory");
            pk_tok_buf_free(&tr);
            return NULL;
        }
        src = tr.p ? tr.p : "";
        src_len = tr.len;
    }
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, src_len, opts, &code, &off, NULL);
    pk_tok_buf_free(&tr);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        snprintf(err, err_len, "PCRE2 rejects it: %s", (const char *)msg);
        return NULL;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter runs if JIT can't */
    return re;
}

/* ---- splitting ------------------------------------------------------------------------------ */

typedef struct match_piece {
    size_t off, len;
    bool is_match;
} match_piece;

typedef struct match_list {
    match_piece *v;
    size_t n, cap;
} match_list;

static int ml_push(match_list *m, size_t off, size_t len, bool is_match) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        match_piece *v = realloc(m->v, cap * sizeof *v);
        if (!v) return -1;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = (match_piece){off, len, is_match};
    return 0;
}

/* Cuts s[0..len) into matches and the gaps between them (HF Pattern::find_matches). */
static int find_matches(pk_tokenizer *t, pcre2_code *re, const char *s, size_t len,
                        match_list *out) {
    out->n = 0;
    if (len == 0) return ml_push(out, 0, 0, false);
    size_t prev = 0, last_end = 0;
    size_t last_match_end = SIZE_MAX;
    while (last_end <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, len, last_end, PCRE2_NO_UTF_CHECK, t->md, t->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            pk_tok_set_err(t, "pre-tokenizer regex failed on a %zu-byte piece: %s", len,
                           (const char *)msg);
            return -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms) me = ms; /* \K tricks; not in tokenizer patterns */
        if (ms == me && last_match_end == me) {
            if (last_end >= len) break;
            uint32_t cp;
            int n = pk_utf8_char((const uint8_t *)s + last_end, len - last_end, &cp);
            last_end += n ? (size_t)n : 1;
            continue;
        }
        last_end = me;
        last_match_end = me;
        if (prev != ms && ml_push(out, prev, ms - prev, false)) return -1;
        if (ml_push(out, ms, me - ms, true)) return -1;
        prev = me;
    }
    if (prev != len && ml_push(out, prev, len - prev, false)) return -1;
    return 0;
}

/* Splits s by re with a delimiter behavior; pushes the non-empty pieces (offset by base). */
static int split_piece(pk_tokenizer *t, pcre2_code *re, pk_tok_split_behavior behavior, bool invert,
                       const char *s, size_t len, size_t base, pk_tok_spans *out) {
    match_list m = {t->match_scratch, 0, t->match_cap}; /* reused across calls */
    int rc = -1;
    if (find_matches(t, re, s, len, &m)) goto done;
    if (invert)
        for (size_t i = 0; i < m.n; i++) m.v[i].is_match = !m.v[i].is_match;
    /* Fold the (offset, is_match) list into (offset, remove) pieces. */
    size_t w = 0;
    switch (behavior) {
    case PK_TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < m.n; i++) m.v[i].is_match = false;
        w = m.n;
        break;
    case PK_TOK_SPLIT_REMOVED:
        w = m.n;
        break;
    case PK_TOK_SPLIT_CONTIGUOUS: {
        bool prev_match = false;
        for (size_t i = 0; i < m.n; i++) {
            if (w > 0 && m.v[i].is_match == prev_match) {
                m.v[w - 1].len = m.v[i].off + m.v[i].len - m.v[w - 1].off;
            } else {
                m.v[w++] = m.v[i];
            }
            prev_match = m.v[i].is_match;
        }
        for (size_t i = 0; i < w; i++) m.v[i].is_match = false;
        break;
    }
    case PK_TOK_SPLIT_MERGED_WITH_PREVIOUS: {
        bool prev_match = false;
        for (size_t i = 0; i < m.n; i++) {
            bool im = m.v[i].is_match;
            if (im && !prev_match && w > 0) {
                m.v[w - 1].len = m.v[i].off + m.v[i].len - m.v[w - 1].off;
            } else {
                m.v[w] = m.v[i];
                m.v[w++].is_match = false;
            }
            prev_match = im;
        }
        break;
    }
    case PK_TOK_SPLIT_MERGED_WITH_NEXT: {
        /* HF folds from the end: a match joins the piece after it. */
        bool prev_match = false;
        size_t n = m.n;
        size_t r = n; /* output grows downward from the end: m.v[r..n) */
        for (size_t i = n; i-- > 0;) {
            bool im = m.v[i].is_match;
            if (im && !prev_match && r < n) {
                size_t end = m.v[r].off + m.v[r].len;
                m.v[r].off = m.v[i].off;
                m.v[r].len = end - m.v[i].off;
            } else {
                match_piece mp = m.v[i];
                mp.is_match = false;
                m.v[--r] = mp;
            }
            prev_match = im;
        }
        memmove(m.v, m.v + r, (n - r) * sizeof *m.v);
        w = n - r;
        break;
    }
    }
    for (size_t i = 0; i < w; i++) {
        if (m.v[i].is_match || m.v[i].len == 0) continue; /* removed, or empty */
        if (pk_tok_spans_push(out, base + m.v[i].off, m.v[i].len)) goto done;
    }
    rc = 0;
done:
    if (rc && !t->err[0]) pk_tok_set_err(t, "out of memory");
    t->match_scratch = m.v;
    t->match_cap = m.cap;
    return rc;
}

static int map_bytes(pk_tok_buf *out, const char *s, size_t len) {
    if (pk_tok_buf_reserve(out, 2 * len)) return -1;
    for (size_t i = 0; i < len; i++)
        out->len += (size_t)pk_utf8_put(pk_tok_byte_char[(uint8_t)s[i]], out->p + out->len);
    out->p[out->len] = 0;
    return 0;
}

int pk_tok_pretokenize(pk_tokenizer *t, const char *s, size_t len, const pk_tok_buf **buf_out,
                       const pk_tok_spans **spans_out) {
    /* Pieces live in pre[cur] (or in s itself before the first ByteLevel step). */
    int cur = 0;
    const char *base = s;
    pk_tok_spans *sp = &t->spans[0];
    sp->n = 0;
    if (pk_tok_spans_push(sp, 0, len)) goto oom;
    t->pre[0].len = 0;
    if (pk_tok_buf_append(&t->pre[0], s, len)) goto oom;
    base = t->pre[0].p;
    for (int k = 0; k < t->n_steps; k++) {
        const pk_tok_step *st = &t->steps[k];
        pk_tok_spans *in = &t->spans[0], *out = &t->spans[1];
        out->n = 0;
        if (st->kind == PK_TOK_STEP_SPLIT) {
            for (size_t i = 0; i < in->n; i++) {
                if (split_piece(t, st->re, st->behavior, st->invert, base + in->v[i].off,
                                in->v[i].len, in->v[i].off, out))
                    return -1;
            }
        } else {
            pk_tok_buf *ob = &t->pre[cur ^ 1];
            ob->len = 0;
            for (size_t i = 0; i < in->n; i++) {
                const char *ps = base + in->v[i].off;
                size_t pl = in->v[i].len;
                if (st->add_prefix_space && (pl == 0 || ps[0] != ' ')) {
                    t->tmp.len = 0;
                    if (pk_tok_buf_append(&t->tmp, " ", 1) || pk_tok_buf_append(&t->tmp, ps, pl))
                        goto oom;
                    ps = t->tmp.p;
                    pl = t->tmp.len;
                }
                size_t first = out->n;
                if (st->re) {
                    if (split_piece(t, st->re, PK_TOK_SPLIT_ISOLATED, false, ps, pl, 0, out))
                        return -1;
                } else if (pl > 0 && pk_tok_spans_push(out, 0, pl)) {
                    goto oom;
                }
                for (size_t j = first; j < out->n; j++) { /* map into ob, re-point the span */
                    size_t off = ob->len;
                    if (map_bytes(ob, ps + out->v[j].off, out->v[j].len)) goto oom;
                    out->v[j].off = off;
                    out->v[j].len = ob->len - off;
                }
            }
            cur ^= 1;
            base = t->pre[cur].p;
        }
        pk_tok_spans tmp = t->spans[0];
        t->spans[0] = t->spans[1];
        t->spans[1] = tmp;
    }
    *buf_out = &t->pre[cur];
    *spans_out = &t->spans[0];
    return 0;
oom:
    pk_tok_set_err(t, "out of memory");
    return -1;
}
