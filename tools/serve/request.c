// SPDX-License-Identifier: Apache-2.0
/* request.c — serve_request_parse: an OpenAI completions / chat completions body → a
 * serve_request, or a 400 naming the field and what is wrong with it.
 *
 * Every field the OpenAI API defines that pk cannot honour is taken only at its neutral value
 * (no penalty, n 1, no stop, no logprobs, ...); any other value is an error that says pk does not
 * support it yet, and a field the API does not define is an error too, so a client never gets
 * other text than it believes it asked for. Sampling (temperature, top_p, top_k, min_p, seed) is
 * pk_sampling's.
 */
#include "request.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void serve_error_set(serve_error *err, int status, const char *type, const char *param, const char *code,
                     const char *fmt, ...) {
    err->status = status;
    snprintf(err->type, sizeof err->type, "%s", type);
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    snprintf(err->code, sizeof err->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

#define BAD(param, ...) (serve_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__), -1)

static int is_null_or_absent(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* An integer-valued JSON number in [lo, hi] into *out; 0, or -1 with err. */
static int get_int(const cJSON *v, const char *name, long lo, long hi, long *out, serve_error *err) {
    if (!cJSON_IsNumber(v)) return BAD(name, "'%s' must be an integer", name);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return BAD(name, "'%s' must be an integer, not %g", name, d);
    if (d < (double)lo || d > (double)hi)
        return BAD(name, "'%s' is %.0f; it must be in [%ld, %ld]", name, d, lo, hi);
    *out = (long)d;
    return 0;
}

static int get_bool(const cJSON *v, const char *name, int *out, serve_error *err) {
    if (is_null_or_absent(v)) return 0;
    if (!cJSON_IsBool(v)) return BAD(name, "'%s' must be true or false", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A number field that pk takes only at its neutral value (or null). */
static int neutral_number(const cJSON *v, const char *name, double neutral, const char *why, serve_error *err) {
    if (is_null_or_absent(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return BAD(name, "'%s' must be a number", name);
    if (v->valuedouble != neutral) return BAD(name, "'%s' %g is not supported: %s", name, v->valuedouble, why);
    return 0;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* A number field in [lo, hi] (or null / absent: *out keeps its default). */
static int get_number(const cJSON *v, const char *name, double lo, double hi, double *out, serve_error *err) {
    if (is_null_or_absent(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return BAD(name, "'%s' must be a number in [%g, %g]", name, lo, hi);
    *out = v->valuedouble;
    return 0;
}

/* The sampling fields (pk_sampling) and the penalties, which pk takes only at their neutral value. */
static int parse_sampling(const cJSON *root, serve_request *out, serve_error *err) {
    static const char no_penalty[] = "pk has no penalties yet; leave it out or use the neutral value";
    out->temperature = 0, out->top_p = 1, out->min_p = 0, out->top_k = 0;
    if (get_number(cJSON_GetObjectItemCaseSensitive(root, "temperature"), "temperature", 0, 100, &out->temperature, err) ||
        get_number(cJSON_GetObjectItemCaseSensitive(root, "top_p"), "top_p", 0, 1, &out->top_p, err) ||
        get_number(cJSON_GetObjectItemCaseSensitive(root, "min_p"), "min_p", 0, 0.999999, &out->min_p, err))
        return -1;
    if (out->top_p == 0) return BAD("top_p", "'top_p' 0 keeps no token: it must be in (0, 1]");
    if (neutral_number(cJSON_GetObjectItemCaseSensitive(root, "presence_penalty"), "presence_penalty", 0, no_penalty, err) ||
        neutral_number(cJSON_GetObjectItemCaseSensitive(root, "frequency_penalty"), "frequency_penalty", 0, no_penalty, err) ||
        neutral_number(cJSON_GetObjectItemCaseSensitive(root, "repetition_penalty"), "repetition_penalty", 1, no_penalty, err))
        return -1;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "top_k");
    if (!is_null_or_absent(k)) {
        long v;
        if (get_int(k, "top_k", -1, 1L << 30, &v, err)) return -1;
        out->top_k = v < 0 ? 0 : (int)v; /* -1 and 0: off */
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "n");
    if (!is_null_or_absent(n)) {
        long v;
        if (get_int(n, "n", 1, 1L << 30, &v, err)) return -1;
        if (v != 1) return BAD("n", "'n' %ld is not supported: pk returns one choice per request", v);
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "best_of");
    if (!is_null_or_absent(b)) {
        long v;
        if (get_int(b, "best_of", 1, 1L << 30, &v, err)) return -1;
        if (v != 1) return BAD("best_of", "'best_of' %ld is not supported: pk returns one choice per request", v);
    }
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(root, "seed");
    if (!is_null_or_absent(seed)) {
        if (!cJSON_IsNumber(seed) || !isfinite(seed->valuedouble) || seed->valuedouble != floor(seed->valuedouble) ||
            fabs(seed->valuedouble) > 9.2e18)
            return BAD("seed", "'seed' must be a 64-bit integer");
        out->has_seed = 1;
        out->seed = (uint64_t)(int64_t)seed->valuedouble;
    }
    return 0;
}

/* Fields pk does not support at any value but the empty one. */
static int parse_unsupported(const cJSON *root, serve_error *err) {
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (!is_null_or_absent(lb)) {
        if (!cJSON_IsObject(lb)) return BAD("logit_bias", "'logit_bias' must be an object");
        if (lb->child) return BAD("logit_bias", "'logit_bias' is not supported yet");
    }
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    if (!is_null_or_absent(lp) && !cJSON_IsFalse(lp) && !(cJSON_IsNumber(lp) && lp->valuedouble == 0))
        return BAD("logprobs", "'logprobs' is not supported yet");
    const cJSON *tlp = cJSON_GetObjectItemCaseSensitive(root, "top_logprobs");
    if (!is_null_or_absent(tlp) && !(cJSON_IsNumber(tlp) && tlp->valuedouble == 0))
        return BAD("top_logprobs", "'top_logprobs' is not supported yet");
    const cJSON *echo = cJSON_GetObjectItemCaseSensitive(root, "echo");
    if (!is_null_or_absent(echo) && !cJSON_IsFalse(echo)) return BAD("echo", "'echo' is not supported yet");
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (!is_null_or_absent(suffix) && !(cJSON_IsString(suffix) && !suffix->valuestring[0]))
        return BAD("suffix", "'suffix' is not supported");
    static const char *const none[] = {"tools", "tool_choice", "functions", "function_call", "response_format"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, none[i]);
        if (!is_null_or_absent(v) && !(cJSON_IsArray(v) && !v->child))
            return BAD(none[i], "'%s' is not supported yet", none[i]);
    }
    return 0;
}

/* The keys a body may hold; anything else is an error. */
static int check_keys(const cJSON *root, serve_kind kind, serve_error *err) {
    static const char *const common[] = {
        "model", "max_tokens", "stream", "stream_options", "temperature", "top_p", "top_k", "min_p", "n",
        "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "user", "stop", "logit_bias",
        "logprobs", "best_of", "tools", "tool_choice", "functions", "function_call", "response_format"};
    static const char *const completions[] = {"prompt", "echo", "suffix"};
    static const char *const chat[] = {"messages", "max_completion_tokens", "chat_template_kwargs", "top_logprobs",
                                       "parallel_tool_calls", "store", "metadata"};
    for (const cJSON *it = root->child; it; it = it->next) {
        int known = 0;
        for (size_t i = 0; !known && i < sizeof common / sizeof common[0]; i++) known = !strcmp(it->string, common[i]);
        if (kind == SERVE_COMPLETIONS)
            for (size_t i = 0; !known && i < sizeof completions / sizeof completions[0]; i++)
                known = !strcmp(it->string, completions[i]);
        else
            for (size_t i = 0; !known && i < sizeof chat / sizeof chat[0]; i++) known = !strcmp(it->string, chat[i]);
        if (!known) return BAD(it->string, "Unrecognized request argument supplied: %.100s", it->string);
    }
    return 0;
}

static int parse_prompt(const cJSON *p, serve_request *out, serve_error *err) {
    if (!p) return BAD("prompt", "'prompt' is required");
    if (cJSON_IsString(p)) return (out->prompt = dup_string(p->valuestring)) ? 0 : BAD("prompt", "out of memory");
    if (!cJSON_IsArray(p)) return BAD("prompt", "'prompt' must be a string, an array of one string or an array of token ids");
    if (!p->child) return BAD("prompt", "'prompt' is an empty array");
    if (cJSON_IsString(p->child) || cJSON_IsArray(p->child)) { /* a batch of prompts: only one */
        if (p->child->next) return BAD("prompt", "'prompt' holds several prompts; pk takes one per request");
        if (cJSON_IsString(p->child)) return parse_prompt(p->child, out, err);
        p = p->child;
        if (!p->child) return BAD("prompt", "'prompt' holds an empty array of token ids");
    }
    int n = cJSON_GetArraySize(p);
    if (n > SERVE_MAX_PROMPT_IDS) return BAD("prompt", "'prompt' has %d token ids; pk takes at most %d", n, SERVE_MAX_PROMPT_IDS);
    out->prompt_ids = malloc((size_t)n * sizeof *out->prompt_ids);
    if (!out->prompt_ids) return BAD("prompt", "out of memory");
    int i = 0;
    for (const cJSON *it = p->child; it; it = it->next, i++) {
        long id;
        if (get_int(it, "prompt", 0, INT32_MAX, &id, err)) return BAD("prompt", "'prompt' token id %d is not an integer in [0, 2147483647]", i);
        out->prompt_ids[i] = (int32_t)id;
    }
    out->num_prompt_ids = n;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts joined. */
static int parse_content(const cJSON *c, int i, serve_role role, char **out, serve_error *err) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (is_null_or_absent(c)) {
        if (role != SERVE_ROLE_ASSISTANT) return BAD(param, "'%s' is required", param);
        return (*out = dup_string("")) ? 0 : BAD(param, "out of memory");
    }
    if (cJSON_IsString(c)) return (*out = dup_string(c->valuestring)) ? 0 : BAD(param, "out of memory");
    if (!cJSON_IsArray(c)) return BAD(param, "'%s' must be a string or an array of text parts", param);
    size_t len = 0;
    for (const cJSON *part = c->child; part; part = part->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type)) return BAD(param, "'%s' parts must be objects with a 'type'", param);
        if (strcmp(type->valuestring, "text"))
            return BAD(param, "'%s': part type '%.40s' is not supported (text only)", param, type->valuestring);
        if (!cJSON_IsString(text)) return BAD(param, "'%s': a text part needs a string 'text'", param);
        len += strlen(text->valuestring);
    }
    char *s = malloc(len + 1);
    if (!s) return BAD(param, "out of memory");
    size_t at = 0;
    for (const cJSON *part = c->child; part; part = part->next) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(s + at, t, n);
        at += n;
    }
    s[at] = '\0';
    *out = s;
    return 0;
}

static int parse_messages(const cJSON *m, serve_request *out, serve_error *err) {
    if (!m) return BAD("messages", "'messages' is required");
    if (!cJSON_IsArray(m)) return BAD("messages", "'messages' must be an array");
    int n = cJSON_GetArraySize(m);
    if (n == 0) return BAD("messages", "'messages' is empty");
    if (n > SERVE_MAX_MESSAGES) return BAD("messages", "'messages' has %d entries; pk takes at most %d", n, SERVE_MAX_MESSAGES);
    out->messages = calloc((size_t)n, sizeof *out->messages);
    if (!out->messages) return BAD("messages", "out of memory");
    int i = 0;
    for (const cJSON *it = m->child; it; it = it->next, i++) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(it)) return BAD(param, "'%s' must be an object", param);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        if (!cJSON_IsString(role)) return BAD(param, "'%s.role' must be a string", param);
        serve_role r;
        if (!strcmp(role->valuestring, "system") || !strcmp(role->valuestring, "developer")) r = SERVE_ROLE_SYSTEM;
        else if (!strcmp(role->valuestring, "user")) r = SERVE_ROLE_USER;
        else if (!strcmp(role->valuestring, "assistant")) r = SERVE_ROLE_ASSISTANT;
        else return BAD(param, "'%s.role' '%.40s' is not supported (system, developer, user, assistant)", param, role->valuestring);
        for (const cJSON *k = it->child; k; k = k->next) {
            if (!strcmp(k->string, "role") || !strcmp(k->string, "content")) continue;
            if (!strcmp(k->string, "name") && cJSON_IsString(k)) continue; /* the template has no place for it */
            if ((!strcmp(k->string, "tool_calls") || !strcmp(k->string, "refusal")) &&
                (cJSON_IsNull(k) || (cJSON_IsArray(k) && !k->child)))
                continue;
            return BAD(param, "'%s.%.40s' is not supported", param, k->string);
        }
        out->messages[i].role = r;
        out->num_messages = i + 1; /* what serve_request_free must free */
        if (parse_content(cJSON_GetObjectItemCaseSensitive(it, "content"), i, r, &out->messages[i].content, err)) return -1;
    }
    return 0;
}

/* "stop": a string or an array of up to STOP_TEXT_MAX strings (empty ones mean nothing). */
static int parse_stop(const cJSON *root, serve_request *out, serve_error *err) {
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (is_null_or_absent(stop)) return 0;
    if (!cJSON_IsString(stop) && !cJSON_IsArray(stop)) return BAD("stop", "'stop' must be a string or an array of strings");
    if (cJSON_IsArray(stop) && cJSON_GetArraySize(stop) > STOP_TEXT_MAX)
        return BAD("stop", "'stop' has %d strings; at most %d", cJSON_GetArraySize(stop), STOP_TEXT_MAX);
    for (const cJSON *s = cJSON_IsString(stop) ? stop : stop->child; s; s = cJSON_IsString(stop) ? NULL : s->next) {
        if (!cJSON_IsString(s)) return BAD("stop", "'stop' must be a string or an array of strings");
        const size_t n = strlen(s->valuestring);
        if (n > STOP_TEXT_MAX_LEN) return BAD("stop", "a stop string of %zu bytes; at most %d", n, STOP_TEXT_MAX_LEN);
        if (n == 0) continue;
        if (!(out->stop[out->num_stop] = dup_string(s->valuestring))) return BAD("stop", "out of memory");
        out->num_stop++;
    }
    return 0;
}

static int parse_body(const cJSON *root, serve_kind kind, serve_request *out, serve_error *err) {
    if (!cJSON_IsObject(root)) return BAD(NULL, "the request body must be a JSON object");
    if (check_keys(root, kind, err) || parse_sampling(root, out, err) || parse_stop(root, out, err) ||
        parse_unsupported(root, err))
        return -1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!model) return BAD("model", "'model' is required");
    if (!cJSON_IsString(model)) return BAD("model", "'model' must be a string");
    if (!(out->model = dup_string(model->valuestring))) return BAD("model", "out of memory");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (!is_null_or_absent(user) && !cJSON_IsString(user)) return BAD("user", "'user' must be a string");

    const char *names[] = {"max_tokens", "max_completion_tokens"};
    for (int i = 0; i < (kind == SERVE_CHAT ? 2 : 1); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        if (is_null_or_absent(v)) continue;
        long n;
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
            return BAD(names[i], "'%s' must be an integer", names[i]);
        if (v->valuedouble < 1) return BAD(names[i], "'%s' is %.0f; it must be at least 1", names[i], v->valuedouble);
        if (get_int(v, names[i], 1, SERVE_MAX_TOKENS_CAP, &n, err)) return -1;
        if (out->max_tokens && out->max_tokens != n)
            return BAD(names[i], "'max_tokens' and 'max_completion_tokens' differ (%d, %ld): give one", out->max_tokens, n);
        out->max_tokens = (int)n;
    }
    if (get_bool(cJSON_GetObjectItemCaseSensitive(root, "stream"), "stream", &out->stream, err)) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!is_null_or_absent(so)) {
        if (!cJSON_IsObject(so)) return BAD("stream_options", "'stream_options' must be an object");
        if (!out->stream) return BAD("stream_options", "'stream_options' is only allowed when 'stream' is true");
        for (const cJSON *k = so->child; k; k = k->next)
            if (strcmp(k->string, "include_usage") && strcmp(k->string, "continuous_usage_stats"))
                return BAD("stream_options", "'stream_options.%.40s' is not supported", k->string);
        if (get_bool(cJSON_GetObjectItemCaseSensitive(so, "include_usage"), "stream_options.include_usage",
                     &out->include_usage, err))
            return -1;
        const cJSON *cu = cJSON_GetObjectItemCaseSensitive(so, "continuous_usage_stats");
        if (!is_null_or_absent(cu) && !cJSON_IsFalse(cu))
            return BAD("stream_options", "'stream_options.continuous_usage_stats' is not supported");
    }
    out->enable_thinking = -1;
    if (kind == SERVE_COMPLETIONS) return parse_prompt(cJSON_GetObjectItemCaseSensitive(root, "prompt"), out, err);

    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (!is_null_or_absent(kw)) {
        if (!cJSON_IsObject(kw)) return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
        for (const cJSON *k = kw->child; k; k = k->next)
            if (strcmp(k->string, "enable_thinking"))
                return BAD("chat_template_kwargs", "'chat_template_kwargs.%.40s' is not supported (enable_thinking only)", k->string);
        const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
        if (!is_null_or_absent(et)) {
            if (!cJSON_IsBool(et)) return BAD("chat_template_kwargs", "'chat_template_kwargs.enable_thinking' must be true or false");
            out->enable_thinking = cJSON_IsTrue(et);
        }
    }
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (!is_null_or_absent(ptc) && !cJSON_IsBool(ptc)) return BAD("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    const cJSON *store = cJSON_GetObjectItemCaseSensitive(root, "store");
    if (!is_null_or_absent(store) && !cJSON_IsFalse(store)) return BAD("store", "'store' is not supported");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!is_null_or_absent(meta) && !cJSON_IsObject(meta)) return BAD("metadata", "'metadata' must be an object");
    return parse_messages(cJSON_GetObjectItemCaseSensitive(root, "messages"), out, err);
}

int serve_request_parse(serve_kind kind, const char *body, size_t len, serve_request *out, serve_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->kind = kind;
    if (len == 0) return BAD(NULL, "the request body is empty: send a JSON object");
    /* cJSON's parser writes a global error position: one parse at a time across threads */
    static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;
    const char *end = NULL;
    pthread_mutex_lock(&parse_lock);
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    pthread_mutex_unlock(&parse_lock);
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        return BAD(NULL, "the request body is not valid JSON (error near byte %zu)", at);
    }
    for (size_t at = (size_t)(end - body); at < len; at++)
        if (!strchr(" \t\r\n", body[at]) || !body[at]) {
            cJSON_Delete(root);
            return BAD(NULL, "the request body has bytes after its JSON value (at byte %zu)", at);
        }
    int rc = parse_body(root, kind, out, err);
    cJSON_Delete(root);
    if (rc) {
        serve_request_free(out);
        out->kind = kind;
    }
    return rc;
}

void serve_request_free(serve_request *r) {
    free(r->model);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->num_messages; i++) free(r->messages[i].content);
    free(r->messages);
    for (int i = 0; i < r->num_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}
