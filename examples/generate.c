// SPDX-License-Identifier: Apache-2.0
/* generate.c — greedy text from a Hugging Face model directory through the library, streamed
 * as it is produced: pk_model_load, the tokenizer, pk_compile, pk_run with a token callback.
 *   usage: generate [MODEL_DIR [PROMPT [MAX_NEW_TOKENS]]]   (default models/pk-tiny) */
#include <pk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints each token's text as soon as it completes a UTF-8 character. */
static void on_token(void *user, int request, int32_t token, int row) {
    (void)request, (void)row;
    char text[512];
    if (pk_decoder_push(user, token, text, sizeof text) > 0) fputs(text, stdout);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "models/pk-tiny";
    const char *prompt = argc > 2 ? argv[2] : "In the beginning";
    const int max_new = argc > 3 ? atoi(argv[3]) : 24;
    char err[512], path[4096];

    pk_model *m = pk_model_load(dir, NULL, err, sizeof err); /* config: pk's defaults */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    pk_tokenizer *tok = m ? pk_tokenizer_load(path, err, sizeof err) : NULL;
    pk_decoder *dec = tok ? pk_decoder_new(tok) : NULL;
    if (!dec) {
        fprintf(stderr, "generate: %s\n", err[0] ? err : "out of memory");
        pk_tokenizer_free(tok), pk_model_free(m);
        return 1;
    }
    int32_t ids[256], *out = malloc(sizeof *out * (size_t)(max_new > 0 ? max_new : 1));
    const int n = pk_tokenizer_encode(tok, prompt, strlen(prompt), ids, 256);
    pk_kernel *k = pk_model_kernel(m);
    pk_status s = n < 1 || n > 256 || max_new < 1 || !out ? PK_ERR_INVALID_ARGUMENT : pk_compile(k, NULL);
    pk_request r = {.prompt = ids, .prompt_len = n, .max_new_tokens = max_new, .output = out};
    if (s == PK_OK) {
        fputs(prompt, stdout);
        s = pk_run(k, &r, 1, on_token, dec);
        char rest[64];
        if (pk_decoder_flush(dec, rest, sizeof rest) > 0) fputs(rest, stdout);
        putchar('\n');
    }
    if (s != PK_OK) fprintf(stderr, "generate: %s\n", pk_kernel_error(k)[0] ? pk_kernel_error(k) : "bad prompt or token count");
    free(out);
    pk_decoder_free(dec), pk_tokenizer_free(tok), pk_model_free(m);
    return s == PK_OK ? 0 : 1;
}
