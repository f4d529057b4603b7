// SPDX-License-Identifier: Apache-2.0
/* serve.c — pk serve: loads the model, starts the engine and libmicrohttpd, routes requests,
 * answers the routes that need no model run (/health, /v1/models, /metrics) and every error in
 * the OpenAI error JSON; generate.c answers the completions routes.
 *
 * A request's body is read up to SERVE_BODY_CAP and dropped beyond it (413 at its end; at once
 * when Content-Length says so). Headers and bodies that stall are cut by libmicrohttpd's idle
 * timeout; generation turns that timeout off for its own connection (it is silent while it waits).
 * SIGINT and SIGTERM: no new connections, every job cancelled (its client gets a 503 or the end of
 * its stream), the connections joined, the engine freed.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

enum { R_UNKNOWN, R_HEALTH, R_METRICS, R_MODELS, R_MODEL, R_COMPLETIONS, R_CHAT };

static const int CODE_OF[NCODES] = {200, 400, 401, 404, 405, 413, 500, 503};

enum MHD_Result serve_send(conn *c, int status, const char *content_type, const char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", content_type);
    enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)status, r);
    MHD_destroy_response(r);
    for (int i = 0; i < NCODES; i++)
        if (CODE_OF[i] == status) atomic_fetch_add(&c->s->responses[i], 1);
    return ok;
}

enum MHD_Result serve_send_json(conn *c, int status, cJSON *root) {
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!s) return MHD_NO;
    enum MHD_Result ok = serve_send(c, status, "application/json", s, strlen(s));
    free(s);
    return ok;
}

enum MHD_Result serve_send_error(conn *c, const serve_error *e) {
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type);
    if (e->param[0]) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    if (e->code[0]) cJSON_AddStringToObject(err, "code", e->code);
    else cJSON_AddNullToObject(err, "code");
    return serve_send_json(c, e->status, root);
}

static enum MHD_Result send_err(conn *c, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_err(conn *c, int status, const char *code, const char *fmt, ...) {
    serve_error e;
    serve_error_set(&e, status, "invalid_request_error", NULL, code, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return serve_send_error(c, &e);
}

static int route_of(const char *url) {
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/metrics")) return R_METRICS;
    if (!strcmp(url, "/v1/models")) return R_MODELS;
    if (!strncmp(url, "/v1/models/", 11)) return R_MODEL;
    if (!strcmp(url, "/v1/completions")) return R_COMPLETIONS;
    if (!strcmp(url, "/v1/chat/completions")) return R_CHAT;
    return R_UNKNOWN;
}

/* "Authorization: Bearer KEY", compared in time independent of where it differs. */
static int authorized(const server *s, struct MHD_Connection *mc) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t n = strlen(s->api_key), m = strlen(h);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)s->api_key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static cJSON *model_json(const server *s) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created);
    cJSON_AddStringToObject(m, "owned_by", "pk");
    cJSON_AddNumberToObject(m, "max_model_len", s->max_seq);
    return m;
}

static enum MHD_Result send_metrics(conn *c) {
    server *s = c->s;
    serve_engine_stats st;
    serve_engine_get_stats(s->engine, &st);
    char buf[4096];
    size_t n = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n,
                          "# HELP pk_http_responses_total HTTP answers sent, by status code.\n"
                          "# TYPE pk_http_responses_total counter\n");
    for (int i = 0; i < NCODES; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "pk_http_responses_total{code=\"%d\"} %ld\n", CODE_OF[i],
                              atomic_load(&s->responses[i]));
    n += (size_t)snprintf(buf + n, sizeof buf - n,
                          "# HELP pk_requests_finished_total Generation requests the engine ended (done or cancelled).\n"
                          "# TYPE pk_requests_finished_total counter\npk_requests_finished_total %lld\n"
                          "# HELP pk_requests_running Generation requests decoding now.\n"
                          "# TYPE pk_requests_running gauge\npk_requests_running %d\n"
                          "# HELP pk_queue_depth Generation requests waiting for the engine.\n"
                          "# TYPE pk_queue_depth gauge\npk_queue_depth %d\n"
                          "# HELP pk_generation_tokens_total Tokens generated.\n"
                          "# TYPE pk_generation_tokens_total counter\npk_generation_tokens_total %lld\n"
                          "# HELP pk_time_to_first_token_seconds From admission to the first token.\n"
                          "# TYPE pk_time_to_first_token_seconds summary\n"
                          "pk_time_to_first_token_seconds_sum %.6f\npk_time_to_first_token_seconds_count %lld\n",
                          (long long)st.jobs_done, st.running, st.queued, (long long)st.tokens_generated,
                          st.ttft_sum_s, (long long)st.ttft_count);
    return serve_send(c, 200, "text/plain; version=0.0.4", buf, n < sizeof buf ? n : sizeof buf - 1);
}

/* Answers a request whose body is in (or a GET). */
static enum MHD_Result dispatch(conn *c, const char *url, const char *method) {
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    switch (c->kind) {
    case R_HEALTH:
        if (!get) break;
        return serve_send(c, 200, "application/json", "{\"status\":\"ok\"}", 15);
    case R_METRICS:
        if (!get) break;
        return send_metrics(c);
    case R_MODELS: {
        if (!get) break;
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "object", "list");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), model_json(c->s));
        return serve_send_json(c, 200, root);
    }
    case R_MODEL:
        if (!get) break;
        if (strcmp(url + 11, c->s->model_id))
            return send_err(c, 404, "model_not_found", "The model '%.200s' does not exist", url + 11);
        return serve_send_json(c, 200, model_json(c->s));
    case R_COMPLETIONS:
    case R_CHAT:
        if (!post) break;
        if (c->too_large) {
            serve_error e;
            serve_error_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                            "the request body is larger than %zu bytes", SERVE_BODY_CAP);
            return serve_send_error(c, &e);
        }
        return serve_generate(c, c->kind == R_CHAT ? SERVE_CHAT : SERVE_COMPLETIONS);
    default:
        return send_err(c, 404, "not_found", "no route %.200s", url);
    }
    return send_err(c, 405, "method_not_allowed", "%s is not allowed on this route", method);
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    server *s = cls;
    conn *c = *state;
    (void)version;
    if (!c) { /* the headers are in: refuse early what needs no body */
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        c->s = s, c->mc = mc, c->kind = route_of(url);
        pthread_mutex_init(&c->mu, NULL);
        pthread_cond_init(&c->cv, NULL);
        *state = c;
        if (c->kind == R_UNKNOWN) return send_err(c, 404, "not_found", "no route %.200s", url);
        if (c->kind != R_HEALTH && c->kind != R_METRICS && !authorized(s, mc))
            return send_err(c, 401, "invalid_api_key", "Incorrect API key provided: give 'Authorization: Bearer KEY'");
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > SERVE_BODY_CAP) {
            serve_error e;
            serve_error_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                            "the request body is larger than %zu bytes", SERVE_BODY_CAP);
            return serve_send_error(c, &e);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (c->too_large) return MHD_YES;
        if (c->len + n > SERVE_BODY_CAP) {
            c->too_large = 1;
            free(c->body);
            c->body = NULL, c->len = c->cap = 0;
            return MHD_YES;
        }
        if (c->len + n > c->cap) { /* doubling, up to the cap */
            size_t cap = c->cap ? c->cap : 4096;
            while (cap < c->len + n) cap *= 2;
            if (cap > SERVE_BODY_CAP) cap = SERVE_BODY_CAP;
            char *p = realloc(c->body, cap);
            if (!p) return MHD_NO;
            c->body = p, c->cap = cap;
        }
        memcpy(c->body + c->len, upload, n);
        c->len += n;
        return MHD_YES;
    }
    return dispatch(c, url, method);
}

static void completed(void *cls, struct MHD_Connection *mc, void **state, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)why;
    conn *c = *state;
    if (!c) return;
    *state = NULL;
    /* a kept-alive connection idles under the timeout again (generation turned it off) */
    if (c->submitted) MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, SERVE_IDLE_S);
    serve_conn_free(c);
}

/* libmicrohttpd's messages: kept for the error line until the daemon runs, then one
 * "pk: http: ..." line each on stderr. */
static char start_msg[512];
static atomic_int running;

static void http_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    if (!atomic_load(&running)) snprintf(start_msg, sizeof start_msg, "%s", msg);
    else fprintf(stderr, "pk: http: %s\n", msg);
}

/* The model's name for clients: the last component of its directory. */
static void model_name(const char *dir, char *out, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(out, cap, "%.*s", (int)(n - start), dir + start);
}

int cmd_serve(options *o) {
    if (!o->api_key) {
        const char *env = getenv("PK_API_KEY");
        if (env && *env) o->api_key = env;
    }
    /* the address first: a bad --host fails before the model loads */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai != 0) die("--host '%s': %s", o->host, gai_strerror(gai));

    static server s; /* lives until exit: connection threads are joined before it is left */
    pthread_mutex_init(&s.tok_mu, NULL);
    s.tok = load_tokenizer(o->model, "pk serve needs the model's tokenizer");
    pk_model_info info = read_info(o->model);
    s.max_seq = o->max_seq ? o->max_seq : info.max_position_embeddings < 4096 ? info.max_position_embeddings : 4096;
    if (s.max_seq > info.max_position_embeddings)
        die("--max-seq %d exceeds the model's max_position_embeddings %d", s.max_seq, info.max_position_embeddings);
    char *probe = pk_tokenizer_chat_prompt(s.tok, "x");
    if (probe) {
        free(probe);
        s.ct = chat_template_for(s.tok);
        s.thinking = chat_has_thinking(s.ct, s.tok);
        s.chat_end = chat_end_token(s.ct, s.tok);
    } else {
        s.chat_end = -1;
    }
    s.eos = (int32_t)info.eos_token_id;
    s.bos = !strcmp(info.architecture, "LlamaForCausalLM") ? (int32_t)info.bos_token_id : -1;
    s.vocab = info.vocab_size;
    s.api_key = o->api_key;
    s.capacity = o->max_requests;
    s.created = (long)time(NULL);
    model_name(o->model, s.model_id, sizeof s.model_id);

    pk_config c = make_config(o, 1, &info);
    c.max_seq_length = s.max_seq;
    /* The CPU backend keeps a resident session (engine.h): every admitted request decodes in the
     * same steps, so the kernel holds them all; the CUDA backend runs one at a time so far. */
    if (c.backend == PK_BACKEND_CPU) {
        c.max_requests = o->max_requests;
        if (c.max_tokens_per_step && c.max_tokens_per_step < c.max_requests) c.max_tokens_per_step = c.max_requests;
    }
    pk_model *m = load_model(o, &c);
    pk_kernel *k = pk_model_kernel(m);
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));

    /* signals go to this thread only: blocked before any other thread starts */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    s.engine = serve_engine_new(k, o->max_requests);
    if (!s.engine) die("cannot start the engine's thread");
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* connections: every admitted request, plus room for the ones answered 503 or at once */
    unsigned limit = (unsigned)o->max_requests + 64;
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, answer, &s, MHD_OPTION_SOCK_ADDR,
                                            ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, completed, &s,
                                            MHD_OPTION_CONNECTION_TIMEOUT, SERVE_IDLE_S, MHD_OPTION_CONNECTION_LIMIT, limit,
                                            MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL, MHD_OPTION_END);
    if (!d)
        die("cannot listen on %s port %d: %s", o->host, o->port,
            start_msg[0] ? start_msg : "in use, or not an address of this machine");
    atomic_store(&running, 1);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char host[INET6_ADDRSTRLEN + 2];
    snprintf(host, sizeof host, ai->ai_family == AF_INET6 ? "[%s]" : "%s", o->host);
    freeaddrinfo(ai);
    fprintf(stderr, "pk: serving %s on http://%s:%u (%s backend, %d workers, context %d, up to %d requests)\n",
            s.model_id, host, di ? (unsigned)di->port : (unsigned)o->port, o->backend,
            pk_kernel_config(k)->num_workers, s.max_seq, o->max_requests);

    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    fprintf(stderr, "pk: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* every job ends first (its request answers 503 or ends its stream), so the connections'
     * threads end and MHD_stop_daemon can join them */
    MHD_quiesce_daemon(d);
    serve_engine_stop(s.engine);
    for (int i = 0; i < 500 && atomic_load(&s.in_flight) > 0; i++) usleep(10000); /* their last bytes: 5 s at most */
    MHD_stop_daemon(d);
    serve_engine_free(s.engine);
    pk_model_free(m);
    pk_tokenizer_free(s.tok);
    pthread_mutex_destroy(&s.tok_mu);
    return 0;
}
