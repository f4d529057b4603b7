// SPDX-License-Identifier: Apache-2.0
/* server.h — what pk serve's files share: the server (model, tokenizer, engine, counters) and
 * one HTTP request's state, from its first header to the last byte of its answer.
 *
 * libmicrohttpd runs a thread per connection, so a request may block its own thread while it
 * waits for its tokens; it polls its socket every WAIT_MS meanwhile, so a client that goes away
 * cancels its job within that time plus a decode step.
 */
#ifndef PK_SERVE_SERVER_H
#define PK_SERVE_SERVER_H

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "../cli.h"
#include "engine.h"
#include "request.h"

#define SERVE_BODY_CAP ((size_t)1 << 20) /* request bodies above 1 MiB: 413 */
#define SERVE_WAIT_MS 100
#define SERVE_IDLE_S 30u /* a connection silent this long (stalled headers or body, idle keep-alive) is closed */

enum { CODE_200, CODE_400, CODE_401, CODE_404, CODE_405, CODE_413, CODE_500, CODE_503, NCODES };

typedef struct server {
    serve_engine *engine;
    pk_tokenizer *tok;           /* encode under tok_mu (it caches); decoders only read it */
    pthread_mutex_t tok_mu;
    const chat_template *ct;     /* NULL: the tokenizer has no chat template (chat answers 400) */
    int thinking;                /* chat_has_thinking */
    char model_id[256];          /* the name clients give as "model": the model directory's name */
    const char *api_key;         /* NULL: no key needed */
    int max_seq, vocab, capacity; /* capacity: --max-requests */
    int32_t eos, chat_end, bos;  /* -1 when none; bos: prepended to Llama-3 completions prompts */
    long created;
    atomic_long responses[NCODES];
    atomic_long next_id;
    atomic_int in_flight;        /* generation requests submitted and not yet ended */
} server;

/* One request: its body as it arrives, then (for generation) its job and the text made. */
typedef struct conn {
    server *s;
    struct MHD_Connection *mc;
    int kind;                    /* a route below, chosen from the URL at the first call */
    char *body;
    size_t len, cap;
    int too_large;
    /* generation */
    serve_request req;
    serve_job job;
    int submitted;
    int32_t *ids;
    pk_decoder *dec;
    stop_text stops;             /* the request's stop strings over its text (under mu) */
    pthread_mutex_t mu;          /* guards what follows: the engine's thread writes, the connection's reads */
    pthread_cond_t cv;
    int done, gone;              /* on_done came; the client went away */
    char *out;                   /* stream: SSE bytes not yet sent; else the whole text */
    size_t out_len, out_cap, out_sent;
    int tail_written;            /* stream: the last events are in out */
    char id[48];
} conn;

/* Queues an OpenAI error JSON answer; MHD_YES/MHD_NO as MHD_queue_response. */
enum MHD_Result serve_send_error(conn *c, const serve_error *e);
/* Queues a JSON (or text) answer with this status; the body is copied. */
enum MHD_Result serve_send(conn *c, int status, const char *content_type, const char *body, size_t len);
/* Queues root as a JSON answer with this status and deletes root (NULL: MHD_NO, nothing sent). */
enum MHD_Result serve_send_json(conn *c, int status, cJSON *root);
/* POST /v1/completions and /v1/chat/completions, once the body is in. */
enum MHD_Result serve_generate(conn *c, serve_kind kind);
/* Ends the request's job if it runs (cancel, then wait for on_done) and frees what it holds. */
void serve_conn_free(conn *c);

#endif /* PK_SERVE_SERVER_H */
