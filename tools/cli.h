// SPDX-License-Identifier: Apache-2.0
/* cli.h — what the pk command's files share: the parsed options, the error exit, loading a model
 * and its tokenizer, and the chat template (chat.c) that `generate --chat` and `pk chat` both use.
 *
 * Every error ends the program through die(): one line "pk: <reason>" on stderr, exit status 1.
 */
#ifndef PK_CLI_H
#define PK_CLI_H

#include "pk.h"
#include "stop_text.h"

#define MAX_IDS 65536

typedef struct options {
    const char *model, *prompt, *prompt_file, *prompt_ids, *system, *trace, *task_graph, *out, *arch, *logits;
    const char *backend;
    int max_tokens, max_tokens_set, threads, chat, print_ids, step_tokens, kv_splits;
    int prompt_len, gen, context, max_seq, json; /* bench; max_seq also chat */
    long seed;
    int seed_set;             /* --seed given */
    pk_sampling sampling;     /* --temperature, --top-k, --top-p, --min-p */
    const char *stop[STOP_TEXT_MAX]; /* --stop */
    int nstop;
    int batch; /* pk bench: requests decoding together */
    const char *host, *api_key; /* pk serve */
    int port, max_requests;
    int spec_length, spec_ngram; /* prompt-lookup speculation (pk_config) */
    pk_model_options model_opts; /* --fused-mlp, --lm-argmax, --check-tensors */
    int nargs;
    char **args; /* positional arguments */
} options;

void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
double now_s(void);

/* Loads model_dir/tokenizer.json; without one: NULL, or (hint != NULL) an error ending in hint. */
pk_tokenizer *load_tokenizer(const char *model_dir, const char *hint);
int encode_or_die(pk_tokenizer *t, const char *text, int32_t *ids, int cap);
pk_model_info read_info(const char *dir);
pk_config make_config(const options *o, int prompt_len, const pk_model_info *info);
/* The requests' sampling: zero (greedy) at temperature 0; the seed --seed's, else a random one,
 * printed on stderr. */
pk_sampling sampling_of(const options *o);
pk_model *load_model(const options *o, const pk_config *c);
/* Writes n bytes to stdout and flushes; a write error is kept for the exit status (main). */
void out_write(const void *p, size_t n);

/* ---- chat.c ------------------------------------------------------------------------------ */

typedef struct chat_template chat_template;
typedef struct chat_turn {
    char *user, *assistant; /* malloc'd */
} chat_turn;

/* The tokenizer's chat template: the one pk_tokenizer_chat_prompt uses (ChatML or Llama 3),
 * extended to a system prompt and earlier turns. Dies when the tokenizer has none. */
const chat_template *chat_template_for(pk_tokenizer *t);
/* system (or NULL), turns[0, n) and the new user message, up to the assistant's header.
 * A malloc'd string. */
char *chat_format(const chat_template *ct, const char *system, const chat_turn *turns, int n, const char *user);
typedef enum chat_role { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT } chat_role;
typedef struct chat_message {
    chat_role role;
    const char *content;
} chat_message;
/* Any sequence of messages, then the assistant's header: what the model answers. no_think: the
 * empty thinking block Qwen3's template writes for enable_thinking=false (see chat_has_thinking).
 * A malloc'd string. */
char *chat_format_messages(const chat_template *ct, const chat_message *msgs, int n, int no_think);
/* Whether the template and tokenizer have Qwen3's <think> block (enable_thinking means something). */
int chat_has_thinking(const chat_template *ct, const pk_tokenizer *t);
/* The token that ends an assistant turn (<|im_end|>, <|eot_id|>), or -1. */
int32_t chat_end_token(const chat_template *ct, const pk_tokenizer *t);

int cmd_chat(options *o);

/* ---- serve/serve.c: pk serve ------------------------------------------------------------ */

int cmd_serve(options *o);

#endif /* PK_CLI_H */
