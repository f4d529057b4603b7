// SPDX-License-Identifier: Apache-2.0
/* generate.c — POST /v1/completions and /v1/chat/completions: the parsed request becomes token
 * ids (the chat template for messages), is checked against the context, and runs as an engine
 * job. Its tokens are decoded to text on the engine's thread, into the request's buffer:
 *   stream:     each piece as an SSE chunk, sent by libmicrohttpd's content reader as it comes,
 *               then the finish chunk, the usage chunk (stream_options.include_usage), [DONE];
 *   non-stream: the text, answered in one JSON object when the job is done.
 * While it waits, the request's thread polls its socket: a client that closed it cancels the job,
 * and the request ends only after the engine's on_done (the job lives in the request).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server.h"

#define DEC_BUF 4096 /* > 64 bytes + the longest token (pk_decoder_push) */

static int out_add(conn *c, const char *s, size_t n) {
    if (c->out_len + n + 1 > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 1024;
        while (cap < c->out_len + n + 1) cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) return -1;
        c->out = p, c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
    c->out[c->out_len] = '\0';
    return 0;
}

/* The object every answer and chunk starts with. */
static cJSON *head_json(const conn *c, int chunk) {
    cJSON *r = cJSON_CreateObject();
    int chat = c->req.kind == SERVE_CHAT;
    cJSON_AddStringToObject(r, "id", c->id);
    cJSON_AddStringToObject(r, "object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(r, "created", (double)time(NULL));
    cJSON_AddStringToObject(r, "model", c->s->model_id);
    return r;
}

static const char *finish_name(serve_finish f) { return f == SERVE_FINISH_STOP ? "stop" : "length"; }

static void add_usage(cJSON *r, const conn *c) {
    cJSON *u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", c->job.prompt_len);
    cJSON_AddNumberToObject(u, "completion_tokens", c->job.num_generated);
    cJSON_AddNumberToObject(u, "total_tokens", c->job.prompt_len + c->job.num_generated);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", c->job.num_cached);
}

/* One choice: the text (NULL: a chunk without text), finish_reason (NULL: null). role: the chat
 * chunk that opens the stream. */
static cJSON *choice_json(const conn *c, int chunk, const char *text, const char *finish, int role) {
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", 0);
    if (c->req.kind == SERVE_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(ch, chunk ? "delta" : "message");
        if (role || !chunk) cJSON_AddStringToObject(m, "role", "assistant");
        if (text) cJSON_AddStringToObject(m, "content", text);
    } else {
        cJSON_AddStringToObject(ch, "text", text ? text : "");
    }
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    return ch;
}

/* Appends "data: <json>\n\n" and frees r. Under c->mu. */
static void sse_add(conn *c, cJSON *r) {
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    if (!s) return;
    out_add(c, "data: ", 6);
    out_add(c, s, strlen(s));
    out_add(c, "\n\n", 2);
    free(s);
}

static void sse_text(conn *c, const char *text, const char *finish, int role) {
    cJSON *r = head_json(c, 1);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "choices"), choice_json(c, 1, text, finish, role));
    sse_add(c, r);
}

/* n bytes of decoded text for the answer (not NUL-terminated). Under c->mu. */
static void add_text(conn *c, const char *text, size_t n) {
    if (!n) return;
    if (!c->req.stream) {
        out_add(c, text, n);
        return;
    }
    char *piece = malloc(n + 1); /* the chunk's JSON string */
    if (!piece) return;
    memcpy(piece, text, n);
    piece[n] = '\0';
    sse_text(c, piece, NULL, 0);
    free(piece);
}

static void emit_text(void *user, const char *text, size_t n) { add_text(user, text, n); }

/* The token's text goes out through the stop strings; 1 when one came (the job ends). */
static int job_token(serve_job *j, int32_t token) {
    conn *c = j->user;
    char buf[DEC_BUF];
    pthread_mutex_lock(&c->mu);
    int n = pk_decoder_push(c->dec, token, buf, sizeof buf), stop = 0;
    if (n > 0) stop = stop_text_push(&c->stops, buf, (size_t)n, emit_text, c) != 0; /* -1 (out of memory) ends it too */
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return stop;
}

static void job_done(serve_job *j) {
    conn *c = j->user;
    char buf[DEC_BUF];
    pthread_mutex_lock(&c->mu);
    int n = pk_decoder_flush(c->dec, buf, sizeof buf);
    if (j->finish != SERVE_FINISH_CANCELLED && j->finish != SERVE_FINISH_ERROR) {
        if (n > 0) stop_text_push(&c->stops, buf, (size_t)n, emit_text, c);
        stop_text_flush(&c->stops, emit_text, c);
        if (c->stops.hit) j->finish = SERVE_FINISH_STOP; /* a stop string ended the text */
    }
    c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Whether the client closed its end (or the connection broke). */
static int client_gone(conn *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return 1;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Waits (under c->mu) up to SERVE_WAIT_MS for the engine; cancels the job when the client went. */
static void wait_a_while(conn *c) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += SERVE_WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    if (!c->done && !c->gone && client_gone(c)) {
        c->gone = 1;
        pthread_mutex_unlock(&c->mu);
        serve_engine_cancel(c->s->engine, &c->job);
        pthread_mutex_lock(&c->mu);
    }
}

/* The stream's last events, once the job is done. Under c->mu. */
static void stream_tail(conn *c) {
    if (c->job.finish == SERVE_FINISH_ERROR || c->job.finish == SERVE_FINISH_CANCELLED) {
        cJSON *r = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(r, "error");
        cJSON_AddStringToObject(e, "message", c->job.finish == SERVE_FINISH_ERROR ? c->job.error : "The server is stopping");
        cJSON_AddStringToObject(e, "type", "server_error");
        sse_add(c, r);
    } else {
        sse_text(c, c->req.kind == SERVE_CHAT ? NULL : "", finish_name(c->job.finish), 0);
        if (c->req.include_usage) {
            cJSON *r = head_json(c, 1);
            cJSON_AddArrayToObject(r, "choices");
            add_usage(r, c);
            sse_add(c, r);
        }
    }
    out_add(c, "data: [DONE]\n\n", 14);
    c->tail_written = 1;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    conn *c = cls;
    (void)pos;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->out_sent < c->out_len) {
            size_t n = c->out_len - c->out_sent;
            if (n > max) n = max;
            memcpy(buf, c->out + c->out_sent, n);
            c->out_sent += n;
            if (c->out_sent == c->out_len) c->out_sent = c->out_len = 0;
            pthread_mutex_unlock(&c->mu);
            return (ssize_t)n;
        }
        if (c->done && c->gone) break;
        if (c->done && !c->tail_written) {
            stream_tail(c);
            continue;
        }
        if (c->done) {
            pthread_mutex_unlock(&c->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        wait_a_while(c);
    }
    pthread_mutex_unlock(&c->mu);
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Answers an error and returns from serve_generate. */
#define FAIL(status, param, code, ...)                                                                       \
    do {                                                                                                     \
        serve_error e_;                                                                                      \
        serve_error_set(&e_, status, (status) >= 500 ? "server_error" : "invalid_request_error", param, code, \
                        __VA_ARGS__);                                                                        \
        return serve_send_error(c, &e_);                                                                     \
    } while (0)

/* The request's token ids: c->ids + *start, *n_out of them; 0, or -1 with err filled. */
/* A seed for a request that sampling without one: splitmix64 of the clock and a counter, so that
 * two requests in the same nanosecond still differ. */
static uint64_t serve_random_seed(server *s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                 ((uint64_t)atomic_fetch_add(&s->next_id, 1) << 40);
    z += 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static int prompt_ids(conn *c, int *start, int *n_out, serve_error *err) {
    server *s = c->s;
    serve_request *r = &c->req;
    if (r->prompt_ids) {
        for (int i = 0; i < r->num_prompt_ids; i++)
            if (r->prompt_ids[i] >= s->vocab) {
                serve_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                                "'prompt' token id %d at %d is out of the vocabulary (%d ids)", (int)r->prompt_ids[i], i, s->vocab);
                return -1;
            }
        c->ids = r->prompt_ids, r->prompt_ids = NULL; /* the job keeps them */
        *start = 0;
        *n_out = r->num_prompt_ids;
        return 0;
    }
    char *text = r->prompt;
    if (r->kind == SERVE_CHAT) {
        if (!s->ct) {
            serve_error_set(err, 400, "invalid_request_error", "messages", NULL,
                            "this model's tokenizer has no chat template: use /v1/completions");
            return -1;
        }
        chat_message *m = malloc((size_t)r->num_messages * sizeof *m);
        if (!m) goto oom;
        for (int i = 0; i < r->num_messages; i++)
            m[i] = (chat_message){r->messages[i].role == SERVE_ROLE_SYSTEM ? CHAT_SYSTEM
                                  : r->messages[i].role == SERVE_ROLE_USER ? CHAT_USER : CHAT_ASSISTANT,
                                  r->messages[i].content};
        text = chat_format_messages(s->ct, m, r->num_messages, s->thinking && r->enable_thinking == 0);
        free(m);
    }
    /* the context bounds the useful length; one more id tells "too long". ids[0] is kept for
     * Llama 3's <|begin_of_text|>, which a completions prompt gets when it lacks it. */
    int cap = s->max_seq + 1;
    c->ids = malloc((size_t)(cap + 1) * sizeof *c->ids);
    if (!c->ids) goto oom;
    pthread_mutex_lock(&s->tok_mu);
    int n = pk_tokenizer_encode(s->tok, text, strlen(text), c->ids + 1, cap);
    if (n < 0) serve_error_set(err, 400, "invalid_request_error", NULL, NULL, "the prompt cannot be tokenized: %s", pk_tokenizer_error(s->tok));
    pthread_mutex_unlock(&s->tok_mu);
    if (text != r->prompt) free(text);
    if (n < 0) return -1;
    *start = 1;
    if (s->bos >= 0 && r->kind == SERVE_COMPLETIONS && !(n > 0 && c->ids[1] == s->bos)) {
        c->ids[0] = s->bos;
        *start = 0, n++;
    }
    *n_out = n;
    return 0;
oom:
    if (text != r->prompt) free(text);
    serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

enum MHD_Result serve_generate(conn *c, serve_kind kind) {
    server *s = c->s;
    serve_error err;
    if (serve_request_parse(kind, c->body ? c->body : "", c->len, &c->req, &err)) return serve_send_error(c, &err);
    if (strcmp(c->req.model, s->model_id)) {
        serve_error_set(&err, 404, "invalid_request_error", "model", "model_not_found",
                        "The model '%.200s' does not exist (this server has '%s')", c->req.model, s->model_id);
        return serve_send_error(c, &err);
    }
    int n, start;
    if (prompt_ids(c, &start, &n, &err)) return serve_send_error(c, &err);
    const char *pname = kind == SERVE_CHAT ? "messages" : "prompt";
    if (n == 0) FAIL(400, pname, NULL, "the prompt has no tokens");
    if (n >= s->max_seq)
        FAIL(400, pname, "context_length_exceeded",
             "This model's maximum context length is %d tokens. However, your prompt has %d tokens, which leaves no "
             "room for a completion.", s->max_seq, n);
    int max_tokens = c->req.max_tokens;
    if (!max_tokens) max_tokens = kind == SERVE_COMPLETIONS && s->max_seq - n > 16 ? 16 : s->max_seq - n;
    if ((long)n + max_tokens > s->max_seq)
        FAIL(400, "max_tokens", "context_length_exceeded",
             "This model's maximum context length is %d tokens. However, you requested %ld tokens (%d in the prompt, "
             "%d in max_tokens). Please reduce the prompt or max_tokens.", s->max_seq, (long)n + max_tokens, n, max_tokens);

    c->dec = pk_decoder_new(s->tok);
    if (!c->dec) FAIL(500, NULL, NULL, "out of memory");
    snprintf(c->id, sizeof c->id, "%s-%lx%06lx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl", s->created,
             atomic_fetch_add(&s->next_id, 1));
    serve_job *j = &c->job;
    j->prompt = c->ids + start, j->prompt_len = n, j->max_tokens = max_tokens;
    if (c->req.temperature >= 1e-4) { /* below: greedy, as OpenAI's 0 */
        j->sampling = (pk_sampling){.temperature = (float)c->req.temperature, .top_k = c->req.top_k,
                                    .top_p = (float)c->req.top_p, .min_p = (float)c->req.min_p,
                                    .seed = c->req.has_seed ? c->req.seed : serve_random_seed(s)};
    }
    if (s->eos >= 0) j->stop_ids[j->num_stop_ids++] = s->eos;
    if (kind == SERVE_CHAT && s->chat_end >= 0 && s->chat_end != s->eos) j->stop_ids[j->num_stop_ids++] = s->chat_end;
    j->on_token = job_token, j->on_done = job_done, j->user = c;
    c->stops.nstops = c->req.num_stop;
    for (int i = 0; i < c->req.num_stop; i++) c->stops.stops[i] = c->req.stop[i];
    if (kind == SERVE_CHAT && c->req.stream) sse_text(c, "", NULL, 1); /* the role first, as OpenAI does */
    int queued = serve_engine_submit(s->engine, j);
    if (queued == -2) FAIL(503, NULL, "server_stopping", "The server is stopping");
    if (queued)
        FAIL(503, NULL, "server_busy",
             "The server is busy: %d requests are running or waiting (--max-requests %d); try again later",
             s->capacity, s->capacity);
    c->submitted = 1;
    atomic_fetch_add(&s->in_flight, 1);
    /* silent while it waits for the engine: no idle timeout from here on (the socket is polled) */
    MHD_set_connection_option(c->mc, MHD_CONNECTION_OPTION_TIMEOUT, 0u);

    if (c->req.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, c, NULL);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(c->mc, 200, r);
        MHD_destroy_response(r);
        atomic_fetch_add(&s->responses[CODE_200], 1);
        return ok;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->done) wait_a_while(c);
    pthread_mutex_unlock(&c->mu);
    if (c->gone) return MHD_NO;
    if (j->finish == SERVE_FINISH_ERROR) FAIL(500, NULL, NULL, "the run failed: %s", j->error);
    if (j->finish == SERVE_FINISH_CANCELLED) FAIL(503, NULL, "server_stopping", "The server is stopping");
    cJSON *root = head_json(c, 0);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"),
                         choice_json(c, 0, c->out ? c->out : "", finish_name(j->finish), 0));
    add_usage(root, c);
    return serve_send_json(c, 200, root);
}

void serve_conn_free(conn *c) {
    if (c->submitted) {
        serve_engine_cancel(c->s->engine, &c->job); /* nothing when it is done already */
        pthread_mutex_lock(&c->mu);
        while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
        pthread_mutex_unlock(&c->mu);
        atomic_fetch_sub(&c->s->in_flight, 1);
    }
    stop_text_free(&c->stops);
    serve_request_free(&c->req);
    pk_decoder_free(c->dec);
    free(c->ids);
    free(c->out);
    free(c->body);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
