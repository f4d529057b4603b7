// SPDX-License-Identifier: Apache-2.0
/* tokenizer.c — loading tokenizer.json and the public tokenizer API (see pk.h).
 *
 * Supported, as Hugging Face tokenizers 0.23 reads them: model BPE (vocab, merges as "a b" or
 * [a, b], ignore_merges, unk_token/fuse_unk, byte_fallback, continuing_subword_prefix,
 * end_of_word_suffix; dropout only 0), added_tokens (ids assigned as HF does), normalizer null
 * or NFC, pre_tokenizer null / Split / ByteLevel / Sequence of them, decoder null or ByteLevel.
 * Anything else is refused at load with the key that names it. post_processor, truncation and
 * padding are ignored: pk_tokenizer_encode is HF's encode(text, add_special_tokens=False).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/file.h" /* pk_file_read_capped: a regular file under a cap */
#include "tokenizer/tokenizer_impl.h"

int pk_tok_set_err(pk_tokenizer *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* A short, printable excerpt of s for error messages (cap >= 8): control characters escaped,
 * cut at a character boundary with "..." when too long. */
static const char *excerpt(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    const char *p = s;
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        size_t w = c < 0x20 || c == 0x7F ? 4 : 1;
        if (n + w + 4 > cap) break; /* keep room for "...\0" */
        if (w == 4)
            snprintf(buf + n, cap - n, "\\x%02x", c);
        else
            buf[n] = (char)c;
        n += w;
    }
    if (*p) {
        while (n > 0 && ((unsigned char)buf[n - 1] & 0xC0) == 0x80) n--;
        if (n > 0 && (unsigned char)buf[n - 1] >= 0xC0) n--;
        memcpy(buf + n, "...", 4);
    } else {
        buf[n] = 0;
    }
    return buf;
}

/* ---- loading -------------------------------------------------------------------------------- */

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* An optional bool: absent or null gives def; anything else but a bool is an error. */
static int get_bool(pk_tokenizer *t, const cJSON *obj, const char *where, const char *key, bool def,
                    bool *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return pk_tok_set_err(t, "%s.%s: expected true or false", where, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* An optional string: absent or null gives NULL. */
static int get_str(pk_tokenizer *t, const cJSON *obj, const char *where, const char *key,
                   const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) return pk_tok_set_err(t, "%s.%s: expected a string", where, key);
    *out = v->valuestring;
    return 0;
}

static const char *type_of(const cJSON *obj) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

static int load_vocab(pk_tokenizer *t, const cJSON *vocab) {
    if (!cJSON_IsObject(vocab)) return pk_tok_set_err(t, "model.vocab: missing or not an object");
    char ex[64];
    for (const cJSON *e = vocab->child; e; e = e->next) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || !(v >= 0) || v >= PK_TOK_MAX_ID || v != floor(v))
            return pk_tok_set_err(t, "model.vocab[\"%s\"]: id must be an integer in [0, %d)",
                                  excerpt(e->string, ex, sizeof ex), PK_TOK_MAX_ID);
        if (pk_tok_strmap_put(&t->vocab, e->string, strlen(e->string), (int32_t)v))
            return pk_tok_set_err(t, "out of memory");
    }
    t->vocab_count = (int32_t)t->vocab.n;
    return 0;
}

static int32_t vocab_id(const pk_tokenizer *t, const char *s, size_t n) {
    return pk_tok_strmap_get(&t->vocab, s, n);
}

static int add_merge(pk_tokenizer *t, size_t idx, const char *a, size_t an, const char *b,
                     size_t bn, int32_t rank, pk_tok_buf *scratch) {
    char ex[64];
    int32_t ia = vocab_id(t, a, an), ib = vocab_id(t, b, bn);
    if (ia < 0 || ib < 0) {
        char tok[128];
        snprintf(tok, sizeof tok, "%.*s", (int)(ia < 0 ? an : bn), ia < 0 ? a : b);
        return pk_tok_set_err(t, "model.merges[%zu]: token \"%s\" is not in model.vocab", idx,
                              excerpt(tok, ex, sizeof ex));
    }
    size_t skip = t->subword_prefix_len;
    if (bn < skip) skip = bn;
    scratch->len = 0;
    if (pk_tok_buf_append(scratch, a, an) || pk_tok_buf_append(scratch, b + skip, bn - skip))
        return pk_tok_set_err(t, "out of memory");
    int32_t im = vocab_id(t, scratch->p, scratch->len);
    if (im < 0)
        return pk_tok_set_err(t, "model.merges[%zu]: merged token \"%s\" is not in model.vocab",
                              idx, excerpt(scratch->p, ex, sizeof ex));
    if (pk_tok_pairmap_put(&t->merges, ia, ib, rank, im)) return pk_tok_set_err(t, "out of memory");
    return 0;
}

static int load_merges(pk_tokenizer *t, const cJSON *merges) {
    if (!cJSON_IsArray(merges)) return pk_tok_set_err(t, "model.merges: missing or not an array");
    pk_tok_buf scratch = {0};
    size_t idx = 0;
    int32_t rank = 0;
    int rc = 0;
    char ex[64];
    for (const cJSON *m = merges->child; m && rc == 0; m = m->next, idx++) {
        if (cJSON_IsString(m)) {
            const char *s = m->valuestring;
            if (strncmp(s, "#version", 8) == 0) continue; /* HF skips these (legacy files) */
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = pk_tok_set_err(t,
                                    "model.merges[%zu]: \"%s\" is not two tokens separated by "
                                    "one space",
                                    idx, excerpt(s, ex, sizeof ex));
                break;
            }
            rc = add_merge(t, idx, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), rank++, &scratch);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            const char *a = m->child->valuestring, *b = m->child->next->valuestring;
            rc = add_merge(t, idx, a, strlen(a), b, strlen(b), rank++, &scratch);
        } else {
            rc = pk_tok_set_err(t, "model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", idx);
        }
        if (rank >= INT32_MAX - 1) rc = pk_tok_set_err(t, "model.merges: too many merges");
    }
    pk_tok_buf_free(&scratch);
    return rc;
}

static int load_model(pk_tokenizer *t, const cJSON *model) {
    if (!model) return pk_tok_set_err(t, "missing key \"model\"");
    if (!cJSON_IsObject(model)) return pk_tok_set_err(t, "model: expected an object");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(model, "type");
    char ex[64];
    if (ty && !cJSON_IsNull(ty)) {
        if (!cJSON_IsString(ty)) return pk_tok_set_err(t, "model.type: expected a string");
        if (strcmp(ty->valuestring, "BPE") != 0)
            return pk_tok_set_err(t, "model.type \"%s\" is not supported (only BPE)",
                                  excerpt(ty->valuestring, ex, sizeof ex));
    } else if (!cJSON_GetObjectItemCaseSensitive(model, "merges")) {
        return pk_tok_set_err(t, "model.type: missing (and no model.merges: not a BPE model)");
    }
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout)) {
        if (!cJSON_IsNumber(dropout) || !(dropout->valuedouble >= 0 && dropout->valuedouble <= 1))
            return pk_tok_set_err(t, "model.dropout: expected a number in [0, 1]");
        if (dropout->valuedouble > 0)
            return pk_tok_set_err(t, "model.dropout %g is not supported (encoding would be random)",
                                  dropout->valuedouble);
    }
    const char *unk, *prefix, *suffix;
    if (get_str(t, model, "model", "unk_token", &unk) ||
        get_str(t, model, "model", "continuing_subword_prefix", &prefix) ||
        get_str(t, model, "model", "end_of_word_suffix", &suffix) ||
        get_bool(t, model, "model", "fuse_unk", false, &t->fuse_unk) ||
        get_bool(t, model, "model", "byte_fallback", false, &t->byte_fallback) ||
        get_bool(t, model, "model", "ignore_merges", false, &t->ignore_merges))
        return -1;
    if ((unk && !(t->unk_token = dup_str(unk))) ||
        (prefix && *prefix && !(t->subword_prefix = dup_str(prefix))) ||
        (suffix && *suffix && !(t->word_suffix = dup_str(suffix))))
        return pk_tok_set_err(t, "out of memory");
    t->subword_prefix_len = t->subword_prefix ? strlen(t->subword_prefix) : 0;
    t->word_suffix_len = t->word_suffix ? strlen(t->word_suffix) : 0;
    if (load_vocab(t, cJSON_GetObjectItemCaseSensitive(model, "vocab"))) return -1;
    return load_merges(t, cJSON_GetObjectItemCaseSensitive(model, "merges"));
}

static int load_normalizer(pk_tokenizer *t, const cJSON *n, const char *where, int depth) {
    char ex[64];
    if (!n || cJSON_IsNull(n)) return 0;
    const char *ty = type_of(n);
    if (!cJSON_IsObject(n) || !ty)
        return pk_tok_set_err(t, "%s: expected an object with a type", where);
    if (strcmp(ty, "NFC") == 0) {
        t->nfc = true;
        return 0;
    }
    if (strcmp(ty, "Sequence") == 0 && depth < 8) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        if (!cJSON_IsArray(list))
            return pk_tok_set_err(t, "%s.normalizers: expected an array", where);
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", where, i);
            if (load_normalizer(t, e, sub, depth + 1)) return -1;
        }
        return 0;
    }
    return pk_tok_set_err(t, "%s.type \"%s\" is not supported (only NFC)", where,
                          excerpt(ty, ex, sizeof ex));
}

static int add_step(pk_tokenizer *t, pk_tok_step st) {
    pk_tok_step *s = realloc(t->steps, (size_t)(t->n_steps + 1) * sizeof *s);
    if (!s) {
        if (st.re) pcre2_code_free(st.re);
        return pk_tok_set_err(t, "out of memory");
    }
    t->steps = s;
    t->steps[t->n_steps++] = st;
    return 0;
}

static const char GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pre_tokenizer(pk_tokenizer *t, const cJSON *p, const char *where, int depth) {
    char ex[64], msg[200];
    if (!p || cJSON_IsNull(p)) return 0;
    const char *ty = type_of(p);
    if (!cJSON_IsObject(p) || !ty)
        return pk_tok_set_err(t, "%s: expected an object with a type", where);
    if (strcmp(ty, "Sequence") == 0 && depth < 8) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        if (!cJSON_IsArray(list))
            return pk_tok_set_err(t, "%s.pretokenizers: expected an array", where);
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", where, i);
            if (load_pre_tokenizer(t, e, sub, depth + 1)) return -1;
        }
        return 0;
    }
    pk_tok_step st = {0};
    if (strcmp(ty, "ByteLevel") == 0) {
        bool use_regex;
        st.kind = PK_TOK_STEP_BYTE_LEVEL;
        if (get_bool(t, p, where, "add_prefix_space", true, &st.add_prefix_space) ||
            get_bool(t, p, where, "use_regex", true, &use_regex))
            return -1;
        if (use_regex) {
            st.re = pk_tok_regex_compile(GPT2_REGEX, sizeof GPT2_REGEX - 1, false, msg, sizeof msg);
            if (!st.re) return pk_tok_set_err(t, "%s: GPT-2 regex: %s", where, msg);
        }
        return add_step(t, st);
    }
    if (strcmp(ty, "Split") == 0) {
        st.kind = PK_TOK_STEP_SPLIT;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *pv = cJSON_IsString(re) ? re : str;
        if (!cJSON_IsObject(pat) || !cJSON_IsString(pv))
            return pk_tok_set_err(t, "%s.pattern: expected {\"Regex\": ...} or {\"String\": ...}",
                                  where);
        const char *beh = NULL;
        if (get_str(t, p, where, "behavior", &beh) ||
            get_bool(t, p, where, "invert", false, &st.invert))
            return -1;
        static const struct {
            const char *name;
            pk_tok_split_behavior b;
        } behaviors[] = {
            {"Removed", PK_TOK_SPLIT_REMOVED},
            {"Isolated", PK_TOK_SPLIT_ISOLATED},
            {"MergedWithPrevious", PK_TOK_SPLIT_MERGED_WITH_PREVIOUS},
            {"MergedWithNext", PK_TOK_SPLIT_MERGED_WITH_NEXT},
            {"Contiguous", PK_TOK_SPLIT_CONTIGUOUS},
        };
        int found = -1;
        for (int i = 0; beh && i < 5; i++)
            if (strcmp(beh, behaviors[i].name) == 0) found = i;
        if (found < 0)
            return pk_tok_set_err(t,
                                  "%s.behavior \"%s\" is not one of Removed, Isolated, "
                                  "MergedWithPrevious, MergedWithNext, Contiguous",
                                  where, beh ? excerpt(beh, ex, sizeof ex) : "(missing)");
        st.behavior = behaviors[found].b;
        st.re = pk_tok_regex_compile(pv->valuestring, strlen(pv->valuestring), pv == str, msg,
                                     sizeof msg);
        if (!st.re)
            return pk_tok_set_err(t, "%s.pattern \"%s\": %s", where,
                                  excerpt(pv->valuestring, ex, sizeof ex), msg);
        return add_step(t, st);
    }
    return pk_tok_set_err(t, "%s.type \"%s\" is not supported (only Split, ByteLevel, Sequence)",
                          where, excerpt(ty, ex, sizeof ex));
}

static int load_decoder(pk_tokenizer *t, const cJSON *d, bool *byte_level) {
    char ex[64];
    *byte_level = false;
    t->decoder_join_spaces = false;
    if (!d || cJSON_IsNull(d)) {
        t->decoder_join_spaces = true;
        return 0;
    }
    const char *ty = type_of(d);
    if (!cJSON_IsObject(d) || !ty)
        return pk_tok_set_err(t, "decoder: expected an object with a type");
    if (strcmp(ty, "ByteLevel") != 0)
        return pk_tok_set_err(t, "decoder.type \"%s\" is not supported (only ByteLevel)",
                              excerpt(ty, ex, sizeof ex));
    *byte_level = true;
    return 0;
}

static int load_added(pk_tokenizer *t, const cJSON *list) {
    if (!list || cJSON_IsNull(list)) return 0;
    if (!cJSON_IsArray(list)) return pk_tok_set_err(t, "added_tokens: expected an array");
    int n = cJSON_GetArraySize(list);
    t->added = calloc((size_t)n + 1, sizeof *t->added);
    if (!t->added) return pk_tok_set_err(t, "out of memory");
    int32_t next_id = t->vocab_count;
    pk_tok_strmap by_id = {0}; /* id (4 bytes) -> index into t->added */
    int i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        const char *content;
        pk_tok_added a = {0};
        if (!cJSON_IsObject(e)) {
            pk_tok_strmap_free(&by_id);
            return pk_tok_set_err(t, "%s: expected an object", where);
        }
        if (get_str(t, e, where, "content", &content) ||
            get_bool(t, e, where, "special", false, &a.special) ||
            get_bool(t, e, where, "normalized", true, &a.normalized) ||
            get_bool(t, e, where, "lstrip", false, &a.lstrip) ||
            get_bool(t, e, where, "rstrip", false, &a.rstrip) ||
            get_bool(t, e, where, "single_word", false, &a.single_word) ||
            (!content && pk_tok_set_err(t, "%s.content: missing", where))) {
            pk_tok_strmap_free(&by_id);
            return -1;
        }
        size_t clen = strlen(content);
        if (clen == 0) continue; /* HF ignores empty tokens */
        /* The id, as HF assigns it (the file's "id" is only a hint there too). */
        int32_t id = pk_tok_strmap_get(&t->added_ids, content, clen);
        if (id < 0) id = vocab_id(t, content, clen);
        if (id < 0) {
            if (next_id >= PK_TOK_MAX_ID) {
                pk_tok_strmap_free(&by_id);
                return pk_tok_set_err(t, "%s: too many tokens", where);
            }
            id = next_id++;
        }
        a.id = id;
        pk_tok_buf form = {0};
        int rc = a.normalized && t->nfc ? pk_nfc_append(content, clen, &form)
                                        : pk_tok_buf_append(&form, content, clen);
        a.text = form.p;
        a.len = form.len;
        char key[4];
        memcpy(key, &id, 4);
        /* A token id seen again keeps one entry, with the later properties (HF's map). */
        int32_t existing = pk_tok_strmap_get(&by_id, key, 4);
        if (rc || pk_tok_strmap_put(&t->added_ids, content, clen, id) ||
            (existing < 0 && pk_tok_strmap_put(&by_id, key, 4, t->n_added))) {
            free(a.text);
            pk_tok_strmap_free(&by_id);
            return pk_tok_set_err(t, "out of memory");
        }
        if (existing >= 0) {
            free(t->added[existing].text);
            t->added[existing] = a;
        } else {
            t->added[t->n_added++] = a;
        }
    }
    pk_tok_strmap_free(&by_id);
    if (pk_tok_trie_init(&t->trie_raw) || pk_tok_trie_init(&t->trie_norm))
        return pk_tok_set_err(t, "out of memory");
    for (int32_t k = 0; k < t->n_added; k++) {
        pk_tok_added *a = &t->added[k];
        if (a->len == 0) continue;
        if (a->normalized)
            t->has_norm = true;
        else
            t->has_raw = true;
        if (a->single_word) t->need_word_re = true;
        if (pk_tok_trie_add(a->normalized ? &t->trie_norm : &t->trie_raw, a->text, a->len, k))
            return pk_tok_set_err(t, "out of memory");
    }
    return 0;
}

/* The bytes an id decodes to: the ByteLevel inverse of its token, or the token's own text. */
static int build_decode_table(pk_tokenizer *t, bool byte_level) {
    int32_t max_id = -1;
    for (uint32_t i = 0; i < t->vocab.n; i++)
        if (t->vocab.entries[i].val > max_id) max_id = t->vocab.entries[i].val;
    for (int32_t k = 0; k < t->n_added; k++)
        if (t->added[k].id > max_id) max_id = t->added[k].id;
    t->n_ids = max_id + 1;
    size_t n = (size_t)t->n_ids;
    const char **src = calloc(n + 1, sizeof *src);
    size_t *src_len = calloc(n + 1, sizeof *src_len);
    t->dec_off = calloc(n + 1, sizeof *t->dec_off);
    t->dec_has = calloc(n + 1, 1);
    if (!src || !src_len || !t->dec_off || !t->dec_has) goto oom;
    for (uint32_t i = 0; i < t->vocab.n; i++) { /* a later key wins for a repeated id */
        const pk_tok_strmap_entry *e = &t->vocab.entries[i];
        src[e->val] = t->vocab.keys.p + e->off;
        src_len[e->val] = e->len;
        t->dec_has[e->val] = 1;
    }
    for (int32_t k = 0; k < t->n_added; k++) {
        src[t->added[k].id] = t->added[k].text;
        src_len[t->added[k].id] = t->added[k].len;
        t->dec_has[t->added[k].id] = 1;
    }
    pk_tok_buf dec = {0};
    if (pk_tok_buf_reserve(&dec, 1)) goto oom;
    for (size_t id = 0; id < n; id++) {
        t->dec_off[id] = dec.len;
        if (!t->dec_has[id]) continue;
        const uint8_t *s = (const uint8_t *)src[id];
        size_t len = src_len[id];
        if (len > t->max_token_bytes) t->max_token_bytes = len;
        size_t start = dec.len;
        bool raw = !byte_level;
        for (size_t i = 0; !raw && i < len;) {
            uint32_t cp;
            int cl = pk_utf8_char(s + i, len - i, &cp);
            int b = cl ? pk_tok_char_byte(cp) : -1;
            if (b < 0) {
                raw = true;
                break;
            }
            char c = (char)b;
            if (pk_tok_buf_append(&dec, &c, 1)) goto oom_dec;
            i += (size_t)cl;
        }
        if (raw) {
            dec.len = start;
            if (pk_tok_buf_append(&dec, s, len)) goto oom_dec;
        }
    }
    t->dec_off[n] = dec.len;
    t->dec = dec.p;
    free(src);
    free(src_len);
    return 0;
oom_dec:
    pk_tok_buf_free(&dec);
oom:
    free(src);
    free(src_len);
    return pk_tok_set_err(t, "out of memory");
}

static int setup_regex_runtime(pk_tokenizer *t) {
    t->md = pcre2_match_data_create(1, NULL);
    t->mctx = pcre2_match_context_create(NULL);
    t->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!t->md || !t->mctx) return pk_tok_set_err(t, "out of memory");
    if (t->jit_stack) pcre2_jit_stack_assign(t->mctx, NULL, t->jit_stack);
    if (t->need_word_re) {
        static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
        int code;
        PCRE2_SIZE off;
        t->word_re = pcre2_compile((PCRE2_SPTR)word, sizeof word - 1, PCRE2_UTF | PCRE2_UCP, &code,
                                   &off, NULL);
        if (!t->word_re) return pk_tok_set_err(t, "PCRE2 lacks Unicode properties (\\w)");
    }
    return 0;
}

static int load_json(pk_tokenizer *t, const char *data, size_t len) {
    size_t bad = pk_utf8_check((const uint8_t *)data, len);
    if (bad != len) return pk_tok_set_err(t, "not valid UTF-8 (byte %zu)", bad);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!root) {
        size_t at = end && end >= data ? (size_t)(end - data) : 0;
        return pk_tok_set_err(t, "not valid JSON (parse error near byte %zu)", at);
    }
    int rc = -1;
    bool byte_level = false;
    if (!cJSON_IsObject(root)) {
        pk_tok_set_err(t, "top level is not a JSON object");
        goto done;
    }
    if (load_model(t, cJSON_GetObjectItemCaseSensitive(root, "model")) ||
        load_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), "normalizer", 0) ||
        load_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens")) ||
        load_pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                           "pre_tokenizer", 0) ||
        load_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"), &byte_level) ||
        setup_regex_runtime(t) || build_decode_table(t, byte_level))
        goto done;
    if (t->n_ids <= 0) {
        pk_tok_set_err(t, "model.vocab: empty, and no added_tokens");
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

pk_tokenizer *pk_tokenizer_load(const char *path, char *err, size_t err_len) {
    char msg[PK_TOK_ERR_LEN];
    if (!path) {
        if (err && err_len) snprintf(err, err_len, "pk_tokenizer_load: path is NULL");
        return NULL;
    }
    char *data = NULL;
    size_t len = 0;
    if (pk_file_read_capped(path, PK_TOK_MAX_FILE_BYTES, "a tokenizer.json", &data, &len, msg, sizeof msg) != PK_OK) {
        if (err && err_len) snprintf(err, err_len, "%s", msg);
        return NULL;
    }
    pk_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        free(data);
        if (err && err_len) snprintf(err, err_len, "%s: out of memory", path);
        return NULL;
    }
    int rc = load_json(t, data, len);
    free(data);
    if (rc) {
        if (err && err_len) snprintf(err, err_len, "%s: %s", path, t->err);
        pk_tokenizer_free(t);
        return NULL;
    }
    t->err[0] = 0;
    if (err && err_len) err[0] = 0;
    return t;
}

void pk_tokenizer_free(pk_tokenizer *t) {
    if (!t) return;
    pk_tok_strmap_free(&t->vocab);
    pk_tok_pairmap_free(&t->merges);
    free(t->unk_token);
    free(t->subword_prefix);
    free(t->word_suffix);
    for (int32_t k = 0; k < t->n_added; k++) free(t->added[k].text);
    free(t->added);
    pk_tok_strmap_free(&t->added_ids);
    pk_tok_trie_free(&t->trie_raw);
    pk_tok_trie_free(&t->trie_norm);
    if (t->word_re) pcre2_code_free(t->word_re);
    for (int i = 0; i < t->n_steps; i++)
        if (t->steps[i].re) pcre2_code_free(t->steps[i].re);
    free(t->steps);
    if (t->md) pcre2_match_data_free(t->md);
    if (t->mctx) pcre2_match_context_free(t->mctx);
    if (t->jit_stack) pcre2_jit_stack_free(t->jit_stack);
    free(t->dec_off);
    free(t->dec_has);
    free(t->dec);
    pk_tok_segs_free(&t->segs_raw);
    pk_tok_segs_free(&t->segs_norm);
    pk_tok_buf_free(&t->norm);
    pk_tok_buf_free(&t->pre[0]);
    pk_tok_buf_free(&t->pre[1]);
    pk_tok_buf_free(&t->tmp);
    pk_tok_spans_free(&t->spans[0]);
    pk_tok_spans_free(&t->spans[1]);
    pk_tok_strmap_free(&t->cache);
    pk_tok_ids_free(&t->cache_ids);
    pk_tok_ids_free(&t->word_ids);
    free(t->match_scratch);
    pk_tok_bpe_free_scratch(t);
    free(t);
}

int pk_tokenizer_vocab_size(const pk_tokenizer *t) { return t ? t->n_ids : 0; }

int32_t pk_tokenizer_token_id(const pk_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    size_t n = strlen(token);
    int32_t id = pk_tok_strmap_get(&t->added_ids, token, n);
    return id >= 0 ? id : pk_tok_strmap_get(&t->vocab, token, n);
}

const char *pk_tokenizer_error(const pk_tokenizer *t) {
    return t ? t->err : "pk_tokenizer is NULL";
}

/* ---- encoding ------------------------------------------------------------------------------- */

static int encode_pieces(pk_tokenizer *t, const char *s, size_t len) {
    const pk_tok_buf *buf;
    const pk_tok_spans *spans;
    if (pk_tok_pretokenize(t, s, len, &buf, &spans)) return -1;
    for (size_t i = 0; i < spans->n; i++)
        if (pk_tok_bpe(t, buf->p + spans->v[i].off, spans->v[i].len, &t->word_ids)) return -1;
    return 0;
}

/* One stretch of text between non-normalized added tokens. */
static int encode_normalized(pk_tokenizer *t, const char *s, size_t len) {
    if (t->nfc && !pk_nfc_is_stable(s, len)) {
        t->norm.len = 0;
        if (pk_nfc_append(s, len, &t->norm)) return pk_tok_set_err(t, "out of memory");
        s = t->norm.p;
        len = t->norm.len;
    }
    if (!t->has_norm) return encode_pieces(t, s, len);
    if (pk_tok_split_added(t, &t->trie_norm, s, len, &t->segs_norm))
        return pk_tok_set_err(t, "out of memory");
    for (size_t i = 0; i < t->segs_norm.n; i++) {
        const pk_tok_seg *g = &t->segs_norm.v[i];
        int rc =
            g->id >= 0
                ? (pk_tok_ids_push(&t->word_ids, g->id) ? pk_tok_set_err(t, "out of memory") : 0)
                : encode_pieces(t, s + g->off, g->len);
        if (rc) return -1;
    }
    return 0;
}

int pk_tokenizer_encode(pk_tokenizer *t, const char *text, size_t len, int32_t *ids, int cap) {
    if (!t) return -1;
    t->err[0] = 0;
    if (!text && len > 0) return pk_tok_set_err(t, "pk_tokenizer_encode: text is NULL");
    if (cap < 0 || (!ids && cap > 0))
        return pk_tok_set_err(t, "pk_tokenizer_encode: bad output buffer (ids %s, cap %d)",
                              ids ? "set" : "NULL", cap);
    size_t bad = pk_utf8_check((const uint8_t *)text, len);
    if (bad != len)
        return pk_tok_set_err(t, "pk_tokenizer_encode: text is not valid UTF-8 (byte %zu of %zu)",
                              bad, len);
    t->word_ids.n = 0;
    if (len > 0) {
        if (!t->has_raw) {
            if (encode_normalized(t, text, len)) return -1;
        } else {
            if (pk_tok_split_added(t, &t->trie_raw, text, len, &t->segs_raw))
                return pk_tok_set_err(t, "out of memory");
            for (size_t i = 0; i < t->segs_raw.n; i++) {
                const pk_tok_seg *g = &t->segs_raw.v[i];
                if (g->id >= 0) {
                    if (pk_tok_ids_push(&t->word_ids, g->id))
                        return pk_tok_set_err(t, "out of memory");
                } else if (encode_normalized(t, text + g->off, g->len)) {
                    return -1;
                }
            }
        }
    }
    if (t->word_ids.n > (size_t)INT_MAX)
        return pk_tok_set_err(t, "pk_tokenizer_encode: %zu tokens is more than an int holds",
                              t->word_ids.n);
    size_t n = t->word_ids.n < (size_t)cap ? t->word_ids.n : (size_t)cap;
    if (n) memcpy(ids, t->word_ids.v, n * sizeof *ids);
    return (int)t->word_ids.n;
}

/* ---- chat template -------------------------------------------------------------------------- */

char *pk_tokenizer_chat_prompt(pk_tokenizer *t, const char *prompt) {
    if (!t) return NULL;
    t->err[0] = 0;
    if (!prompt) {
        pk_tok_set_err(t, "pk_tokenizer_chat_prompt: prompt is NULL");
        return NULL;
    }
    const char *pre, *post;
    if (pk_tokenizer_token_id(t, "<|im_start|>") >= 0 &&
        pk_tokenizer_token_id(t, "<|im_end|>") >= 0) {
        pre = "<|im_start|>user\n";
        post = "<|im_end|>\n<|im_start|>assistant\n";
    } else if (pk_tokenizer_token_id(t, "<|start_header_id|>") >= 0) {
        pre = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n";
        post = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
    } else {
        pk_tok_set_err(t, "no chat template known: the tokenizer has neither <|im_start|> and "
                          "<|im_end|> (ChatML) nor <|start_header_id|> (Llama 3)");
        return NULL;
    }
    size_t a = strlen(pre), b = strlen(prompt), c = strlen(post);
    char *s = malloc(a + b + c + 1);
    if (!s) {
        pk_tok_set_err(t, "out of memory");
        return NULL;
    }
    memcpy(s, pre, a);
    memcpy(s + a, prompt, b);
    memcpy(s + a + b, post, c + 1);
    return s;
}
