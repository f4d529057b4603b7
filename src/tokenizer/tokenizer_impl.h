// SPDX-License-Identifier: Apache-2.0
/* tokenizer_impl.h — internals of pk's Hugging Face tokenizer.json reader (byte-level BPE).
 *
 * Encoding follows tokenizers 0.23 step by step: added tokens are cut out of the raw text
 * (leftmost-longest, trie.c), the rest is NFC-normalized (unicode.c), cut again by the
 * normalized added tokens, split by the pre-tokenizer regexes and mapped to GPT-2's byte
 * alphabet (pretokenize.c), and each piece is merged by BPE rank (bpe.c). decoder.c turns ids
 * back into bytes. Every string here is bytes + length; ids are < PK_TOK_MAX_ID.
 */
#ifndef PK_TOKENIZER_IMPL_H
#define PK_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pk.h"

#define PK_TOK_MAX_ID (1 << 24) /* ids (and so table sizes) are bounded: 16M tokens */
#define PK_TOK_ERR_LEN 320
/* tokenizer.json files above this are refused: real ones are 2-35 MB (Qwen3 11 MB, Llama 3 9 MB,
 * Gemma 3 33 MB), and the parse holds the text, the JSON tree and the tables at once. */
#define PK_TOK_MAX_FILE_BYTES ((uint64_t)256 << 20)

/* ---- growable byte buffer and small vectors (map.c) ---------------------------------------- */

typedef struct pk_tok_buf {
    char *p;
    size_t len, cap;
} pk_tok_buf;
int pk_tok_buf_reserve(pk_tok_buf *b, size_t extra); /* 0, or -1 when out of memory */
int pk_tok_buf_append(pk_tok_buf *b, const void *src, size_t n);
void pk_tok_buf_free(pk_tok_buf *b);

typedef struct pk_tok_span {
    size_t off, len;
} pk_tok_span;
typedef struct pk_tok_spans {
    pk_tok_span *v;
    size_t n, cap;
} pk_tok_spans;
int pk_tok_spans_push(pk_tok_spans *s, size_t off, size_t len);
void pk_tok_spans_free(pk_tok_spans *s);

typedef struct pk_tok_ids {
    int32_t *v;
    size_t n, cap;
} pk_tok_ids;
int pk_tok_ids_push(pk_tok_ids *s, int32_t id);
void pk_tok_ids_free(pk_tok_ids *s);

/* ---- hash maps (map.c): open addressing, linear probing, load <= 1/2 ----------------------- */

typedef struct pk_tok_strmap_entry {
    size_t off; /* key bytes in keys */
    uint32_t len, hash;
    int32_t val;
} pk_tok_strmap_entry;

/* Byte string -> int32. Keys are copied; putting an existing key overwrites its value. */
typedef struct pk_tok_strmap {
    uint32_t *slots; /* entry index + 1; 0 = empty; mask + 1 of them */
    uint32_t mask;
    pk_tok_strmap_entry *entries; /* in insertion order */
    uint32_t n, cap;
    pk_tok_buf keys;
} pk_tok_strmap;
int pk_tok_strmap_put(pk_tok_strmap *m, const char *key, size_t len, int32_t val);
int32_t pk_tok_strmap_get(const pk_tok_strmap *m, const char *key, size_t len); /* -1: absent */
void pk_tok_strmap_clear(pk_tok_strmap *m);
void pk_tok_strmap_free(pk_tok_strmap *m);

/* (left id, right id) -> (rank, merged id): the BPE merges. */
typedef struct pk_tok_pair_slot {
    uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
    int32_t rank, id;
} pk_tok_pair_slot;
typedef struct pk_tok_pairmap {
    pk_tok_pair_slot *slots;
    uint32_t mask, n;
} pk_tok_pairmap;
int pk_tok_pairmap_put(pk_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
const pk_tok_pair_slot *pk_tok_pairmap_get(const pk_tok_pairmap *m, int32_t a, int32_t b);
void pk_tok_pairmap_free(pk_tok_pairmap *m);

/* ---- UTF-8 and NFC (unicode.c) -------------------------------------------------------------- */

/* Length (1-4) of the well-formed character at s, or 0 if the bytes there are not one. */
int pk_utf8_char(const uint8_t *s, size_t len, uint32_t *cp);
/* Offset of the first ill-formed byte, or len when all of s is well-formed UTF-8. */
size_t pk_utf8_check(const uint8_t *s, size_t len);
int pk_utf8_put(uint32_t cp, char *out); /* writes 1-4 bytes, returns how many */
bool pk_uni_is_white_space(uint32_t cp); /* Unicode White_Space */
/* True when NFC can't change s (no character that decomposes, combines or reorders). */
bool pk_nfc_is_stable(const char *s, size_t len);
/* Appends the NFC form of the well-formed UTF-8 s to out. 0, or -1 when out of memory. */
int pk_nfc_append(const char *s, size_t len, pk_tok_buf *out);

/* ---- added tokens (trie.c) ------------------------------------------------------------------ */

typedef struct pk_tok_added {
    char *text; /* what is matched: the content, or its NFC form when normalized */
    size_t len;
    int32_t id;
    bool special, normalized, lstrip, rstrip, single_word;
} pk_tok_added;

typedef struct pk_tok_trie_node {
    int32_t child, sibling; /* first child, next sibling; -1 = none */
    int32_t added;          /* index into pk_tokenizer.added ending here, or -1 */
    uint8_t byte;
} pk_tok_trie_node;
typedef struct pk_tok_trie {
    pk_tok_trie_node *nodes; /* nodes[0] is the root */
    int32_t n, cap;
    int32_t root[256]; /* child of the root per first byte, -1 = none */
} pk_tok_trie;
int pk_tok_trie_init(pk_tok_trie *tr);
int pk_tok_trie_add(pk_tok_trie *tr, const char *s, size_t len, int32_t added);
void pk_tok_trie_free(pk_tok_trie *tr);

/* A segment of text: either an added token (id >= 0) or plain text (id == -1). */
typedef struct pk_tok_seg {
    size_t off, len;
    int32_t id;
} pk_tok_seg;
typedef struct pk_tok_segs {
    pk_tok_seg *v;
    size_t n, cap;
} pk_tok_segs;
void pk_tok_segs_free(pk_tok_segs *s);

/* ---- pre-tokenizer (pretokenize.c) ---------------------------------------------------------- */

typedef enum pk_tok_split_behavior {
    PK_TOK_SPLIT_REMOVED,
    PK_TOK_SPLIT_ISOLATED,
    PK_TOK_SPLIT_MERGED_WITH_PREVIOUS,
    PK_TOK_SPLIT_MERGED_WITH_NEXT,
    PK_TOK_SPLIT_CONTIGUOUS,
} pk_tok_split_behavior;

typedef enum pk_tok_step_kind {
    PK_TOK_STEP_SPLIT,
    PK_TOK_STEP_BYTE_LEVEL,
} pk_tok_step_kind;

typedef struct pk_tok_step {
    pk_tok_step_kind kind;
    pcre2_code *re; /* Split's pattern; ByteLevel's GPT-2 regex when use_regex */
    pk_tok_split_behavior behavior;
    bool invert;
    bool add_prefix_space; /* ByteLevel */
} pk_tok_step;

/* Compiles a tokenizer.json regex for PCRE2 (rewritten so \s, \S and caseless s/k mean what
 * they mean in Oniguruma, which Hugging Face uses). literal: match the pattern as a string.
 * NULL with a message naming the offset on error. */
pcre2_code *pk_tok_regex_compile(const char *pattern, size_t len, bool literal, char *err,
                                 size_t err_len);

/* ---- the tokenizer -------------------------------------------------------------------------- */

struct pk_tokenizer {
    char err[PK_TOK_ERR_LEN];

    /* model: BPE */
    pk_tok_strmap vocab; /* token string (model alphabet) -> id */
    int32_t vocab_count; /* entries in vocab (HF's model vocab size) */
    pk_tok_pairmap merges;
    char *unk_token; /* NULL: unknown characters are dropped, as in HF */
    bool fuse_unk, byte_fallback, ignore_merges;
    char *subword_prefix, *word_suffix; /* NULL or non-empty */
    size_t subword_prefix_len, word_suffix_len;

    /* added tokens */
    pk_tok_added *added;
    int32_t n_added;
    pk_tok_strmap added_ids;         /* content -> id */
    pk_tok_trie trie_raw, trie_norm; /* normalized = false / true tokens */
    bool has_raw, has_norm, need_word_re;
    pcre2_code *word_re; /* Rust regex's \w, for single_word */

    bool nfc;           /* normalizer: NFC */
    pk_tok_step *steps; /* pre-tokenizer, in order */
    int n_steps;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;

    /* decoding: id -> bytes */
    int32_t n_ids;    /* vocab_size */
    size_t *dec_off;  /* [n_ids + 1] offsets into dec */
    uint8_t *dec_has; /* [n_ids]: 1 when the id names a token */
    char *dec;
    bool decoder_join_spaces; /* no decoder: HF joins token strings with " " */
    size_t max_token_bytes;

    /* encode scratch, reused across calls (so a pk_tokenizer is not thread-safe) */
    pk_tok_segs segs_raw, segs_norm;
    pk_tok_buf norm, pre[2], tmp;
    pk_tok_spans spans[2];
    pk_tok_strmap cache; /* word -> offset into cache_ids: [count, ids...] */
    pk_tok_ids cache_ids;
    pk_tok_ids word_ids;
    void *match_scratch; /* pretokenize.c's scratch */
    size_t match_cap;
    void *bpe_syms, *bpe_heap; /* bpe.c's scratch */
    size_t bpe_syms_cap, bpe_heap_cap;
};

/* GPT-2's byte <-> printable character map. */
extern const uint16_t pk_tok_byte_char[256];
int pk_tok_char_byte(uint32_t cp); /* the byte a character stands for, or -1 */

/* Sets t->err; returns -1. */
int pk_tok_set_err(pk_tokenizer *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Cuts s into segments on the trie's tokens (HF AddedVocabulary::find_matches). */
int pk_tok_split_added(pk_tokenizer *t, const pk_tok_trie *tr, const char *s, size_t len,
                       pk_tok_segs *out);
/* Runs the pre-tokenizer over s; the pieces end up as spans into *buf_out. */
int pk_tok_pretokenize(pk_tokenizer *t, const char *s, size_t len, const pk_tok_buf **buf_out,
                       const pk_tok_spans **spans_out);
/* BPE-encodes one pre-token (in the model's alphabet); appends ids to out. */
int pk_tok_bpe(pk_tokenizer *t, const char *w, size_t len, pk_tok_ids *out);
void pk_tok_bpe_free_scratch(pk_tokenizer *t);

#endif /* PK_TOKENIZER_IMPL_H */
