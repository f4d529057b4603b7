// SPDX-License-Identifier: Apache-2.0
/* request.h — the OpenAI request bodies pk serve takes, parsed from bytes by a pure function
 * (no model, no I/O, no globals), so it can be fuzzed alone (fuzz/fuzz_serve_request.c).
 *
 * The parser checks the JSON, the types and the ranges that need no model; the server checks the
 * rest against the model (its name, the context length, the vocabulary). A field pk cannot honour
 * yet (penalties, logprobs, tools, n > 1) is an error naming it, never ignored: the only values
 * taken are the ones that mean no penalty, a single choice.
 */
#ifndef PK_SERVE_REQUEST_H
#define PK_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "../stop_text.h"

#define SERVE_MAX_TOKENS_CAP (1 << 20) /* the largest max_tokens the parser takes */
#define SERVE_MAX_PROMPT_IDS (1 << 18) /* token ids in a completions prompt */
#define SERVE_MAX_MESSAGES 4096

typedef enum serve_kind { SERVE_COMPLETIONS = 0, SERVE_CHAT = 1 } serve_kind;
typedef enum serve_role { SERVE_ROLE_SYSTEM = 0, SERVE_ROLE_USER = 1, SERVE_ROLE_ASSISTANT = 2 } serve_role;

typedef struct serve_message {
    serve_role role;
    char *content; /* malloc'd; text parts of a content array joined */
} serve_message;

typedef struct serve_request {
    serve_kind kind;
    char *model;                /* malloc'd, the "model" field */
    char *prompt;               /* completions: the prompt text (malloc'd), NULL when given as ids */
    int32_t *prompt_ids;        /* completions: the prompt as token ids (malloc'd) */
    int num_prompt_ids;         /* entries of prompt_ids (>= 1 when prompt_ids is set) */
    serve_message *messages;    /* chat: [num_messages] (>= 1) */
    int num_messages;
    int max_tokens;             /* 1 .. SERVE_MAX_TOKENS_CAP; 0: not given */
    int stream, include_usage;  /* include_usage: stream_options.include_usage */
    int enable_thinking;        /* chat_template_kwargs.enable_thinking: -1 not given, 0, 1 */
    /* sampling (pk.h's pk_sampling); left out: greedy, unlike OpenAI's default of 1 */
    double temperature;         /* 0 (greedy) .. 100; below 1e-4 decodes greedily */
    double top_p, min_p;        /* 1: off; 0: off */
    int top_k;                  /* 0: off (-1 is taken as 0) */
    int has_seed;
    uint64_t seed;              /* has_seed: the "seed" field, as 64 bits */
    char *stop[STOP_TEXT_MAX];  /* "stop": malloc'd, non-empty, at most STOP_TEXT_MAX_LEN bytes */
    int num_stop;
} serve_request;

/* An OpenAI error: {"error": {"message", "type", "param", "code"}} with an HTTP status. */
typedef struct serve_error {
    int status;       /* 400, 401, 404, 413, 503, 500 */
    char type[48];    /* "invalid_request_error", ... */
    char param[64];   /* the offending field, "" when none */
    char code[48];    /* "model_not_found", ..., "" when none */
    char message[512];
} serve_error;

/* Parses a request body of len bytes (not NUL-terminated) into out. 0 on success (free out with
 * serve_request_free); -1 with err filled (status 400) and out zeroed. Never keeps body. */
int serve_request_parse(serve_kind kind, const char *body, size_t len, serve_request *out, serve_error *err);
/* Frees what serve_request_parse allocated and zeroes r. Accepts a zeroed r. */
void serve_request_free(serve_request *r);

/* Fills err; printf-style message. */
void serve_error_set(serve_error *err, int status, const char *type, const char *param, const char *code,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif /* PK_SERVE_REQUEST_H */
