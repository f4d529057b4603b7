// SPDX-License-Identifier: Apache-2.0
/* test_serve.c — pk serve as a client sees it: starts $BUILD/pk serve on the shipped model (CPU,
 * a free port, an API key, --max-requests 1) and talks HTTP to it over plain sockets.
 *   - the routes: /health, /v1/models, /metrics; completions and chat, streamed and not, whose
 *     text at temperature 0 equals `pk generate` (and `pk generate --chat`) for the same prompt;
 *   - sampling: a seed repeats its text, another seed gives another, top_k 1 the greedy text;
 *   - a prompt sent again takes its pages from the prefix cache (usage's cached_tokens);
 *   - stop strings end the text before them, streamed or not, with finish_reason stop;
 *   - every error in OpenAI's JSON with its status: 401, 404, 405, 400 (malformed JSON, wrong
 *     types, unknown fields, max_tokens negative or huge, sampling out of range, penalties, a
 *     prompt over the context),
 *     413 (2 MB and 10 MB bodies);
 *   - a full queue answers 503; a client that disconnects mid-stream cancels its job (far fewer
 *     tokens than asked are made) and frees the slot; a client stalled mid-request and bytes that
 *     are not HTTP leave the server answering;
 *   - SIGTERM stops it with exit status 0 (under ASan: without leaks).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "serve_client.h"

static char pk_bin[512];
static const char *KEY = "Authorization: Bearer sk-test\r\n";

static reply post(const char *path, const char *json) { return http("POST", path, KEY, json, strlen(json)); }

/* stdout of a pk command line. */
static void pk_out(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", pk_bin, args);
    FILE *f = popen(cmd, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f) pclose(f);
}

static void expect(const char *what, reply r, int status, const char *needle) {
    CHECK(r.status == status && r.body && strstr(r.body, needle) && (status == 200 || strstr(r.body, "\"error\"")),
          "%s: status %d (want %d), body %.300s", what, r.status, status, r.body ? r.body : "(none)");
    free(r.body);
}

/* The text of a completion of body (status 200), into text. */
static int completion_text(const char *body, char *text, size_t cap) {
    reply r = post("/v1/completions", body);
    text[0] = '\0';
    json_str(r.body ? r.body : "", "text", text, cap);
    int ok = r.status == 200;
    CHECK(ok, "%s: status %d, %.300s", body, r.status, r.body ? r.body : "");
    free(r.body);
    return ok;
}

/* Sampling: a seed gives its text again, another seed another text; top_k 1 is greedy. */
static void check_sampling(void) {
    char a[4096], b[4096], c[4096], greedy[4096], k1[4096];
    static const char fmt[] = "{\"model\":\"pk-tiny\",\"prompt\":\"In the beginning\",\"max_tokens\":24,%s}";
    char body[512];
    snprintf(body, sizeof body, fmt, "\"temperature\":1.0,\"top_p\":0.95,\"seed\":5");
    completion_text(body, a, sizeof a);
    completion_text(body, b, sizeof b);
    snprintf(body, sizeof body, fmt, "\"temperature\":1.0,\"top_p\":0.95,\"seed\":6");
    completion_text(body, c, sizeof c);
    snprintf(body, sizeof body, fmt, "\"temperature\":0");
    completion_text(body, greedy, sizeof greedy);
    snprintf(body, sizeof body, fmt, "\"temperature\":1.0,\"top_k\":1,\"seed\":77");
    completion_text(body, k1, sizeof k1);
    CHECK(a[0] && !strcmp(a, b), "seed 5 twice: '%s' then '%s'", a, b);
    CHECK(strcmp(a, c) != 0, "seeds 5 and 6 gave the same text '%s'", a);
    CHECK(strcmp(a, greedy) != 0, "temperature 1 gave the greedy text '%s'", a);
    CHECK(!strcmp(k1, greedy), "top_k 1 '%s' is not the greedy text '%s'", k1, greedy);
}

/* Stop strings: the text ends before the first one, which is not sent, with finish_reason stop;
 * streamed, the same. */
static void check_stop_strings(void) {
    char full[4096], cut[4096], body[1024], streamed[4096];
    static const char head[] = "{\"model\":\"pk-tiny\",\"prompt\":\"In the beginning\",\"max_tokens\":24";
    snprintf(body, sizeof body, "%s}", head);
    if (!completion_text(body, full, sizeof full)) return;
    /* a stop string from the middle of the text: 3 bytes at a third of it */
    const size_t len = strlen(full), at = len / 3;
    char stop[4] = {full[at], full[at + 1], full[at + 2], 0};
    CHECK(len > 12 && !strchr(stop, '"') && !strchr(stop, '\\') && !strchr(stop, '\n'), "text '%s': no plain stop string",
          full);
    const size_t want = (size_t)(strstr(full, stop) - full);
    snprintf(body, sizeof body, "%s,\"stop\":[\"zzzz\",\"%s\"]}", head, stop);
    reply r = post("/v1/completions", body);
    cut[0] = '\0';
    json_str(r.body ? r.body : "", "text", cut, sizeof cut);
    CHECK(r.status == 200 && strlen(cut) == want && !strncmp(cut, full, want) && strstr(r.body, "\"finish_reason\":\"stop\""),
          "stop '%s' in '%s': '%s' (%s)", stop, full, cut, r.body ? r.body : "");
    free(r.body);
    snprintf(body, sizeof body, "%s,\"stream\":true,\"stop\":\"%s\"}", head, stop);
    r = post("/v1/completions", body);
    sse_text(r.body ? r.body : "", "text", streamed, sizeof streamed);
    CHECK(r.status == 200 && !strcmp(streamed, cut) && strstr(r.body, "\"finish_reason\":\"stop\""),
          "streamed with stop '%s': '%s' vs '%s'", stop, streamed, cut);
    free(r.body);
}

/* The prefix cache: a long prompt sent again takes its whole pages from the cache (usage's
 * prompt_tokens_details.cached_tokens) and gives the same text. */
static void check_prefix_cache(void) {
    static const char body[] = "{\"model\":\"pk-tiny\",\"prompt\":\"In the beginning God created the heaven and the earth. "
                               "And the earth was without form, and void; and darkness was upon the face of the deep. "
                               "And the Spirit of God moved upon the face of the waters.\",\"max_tokens\":8}";
    reply a = post("/v1/completions", body), b = post("/v1/completions", body);
    char ta[1024] = "", tb[1024] = "";
    json_str(a.body ? a.body : "", "text", ta, sizeof ta);
    json_str(b.body ? b.body : "", "text", tb, sizeof tb);
    const char *ca = a.body ? strstr(a.body, "\"cached_tokens\":") : NULL, *cb = b.body ? strstr(b.body, "\"cached_tokens\":") : NULL;
    CHECK(a.status == 200 && b.status == 200 && ta[0] && !strcmp(ta, tb), "the same prompt twice: '%s' then '%s'", ta, tb);
    CHECK(ca && cb && atoi(ca + 16) == 0 && atoi(cb + 16) >= 16, "cached tokens: first %s, second %s", ca ? ca : "none",
          cb ? cb : "none");
    free(a.body);
    free(b.body);
}

static void check_generation(void) {
    /* completions: the text equals what pk generate adds to the prompt */
    char gen[4096], text[4096] = "";
    pk_out("generate --prompt 'In the beginning' --max-tokens 12", gen, sizeof gen);
    reply r = post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"In the beginning\",\"max_tokens\":12,\"temperature\":0}");
    json_str(r.body ? r.body : "", "text", text, sizeof text);
    CHECK(r.status == 200 && !strncmp(gen, "In the beginning", 16) && strlen(gen) > 17 &&
              !strncmp(gen + 16, text, strlen(gen) - 17) && strlen(text) == strlen(gen) - 17,
          "completion '%s' vs pk generate '%s' (status %d)", text, gen, r.status);
    CHECK(r.body && strstr(r.body, "\"finish_reason\":\"length\"") && strstr(r.body, "\"completion_tokens\":12") &&
              strstr(r.body, "\"object\":\"text_completion\""),
          "completion body %s", r.body);
    free(r.body);

    /* streamed, the same text; usage last, then [DONE] */
    r = post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"In the beginning\",\"max_tokens\":12,\"stream\":true,"
                                "\"stream_options\":{\"include_usage\":true}}");
    char streamed[4096];
    sse_text(r.body ? r.body : "", "text", streamed, sizeof streamed);
    CHECK(r.status == 200 && !strcmp(streamed, text), "streamed completion '%s' vs '%s'", streamed, text);
    const char *usage = r.body ? strstr(r.body, "\"usage\"") : NULL, *done = r.body ? strstr(r.body, "data: [DONE]\n\n") : NULL;
    CHECK(usage && done && usage < done && done[14] == '\0' && strstr(r.body, "\"finish_reason\":\"length\""),
          "stream's end: %s", r.body);
    free(r.body);

    /* chat: the answer equals pk generate --chat */
    text[0] = '\0';
    pk_out("generate --chat --prompt 'Tell me about Moses' --max-tokens 10", gen, sizeof gen);
    r = post("/v1/chat/completions", "{\"model\":\"pk-tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about "
                                     "Moses\"}],\"max_tokens\":10,\"chat_template_kwargs\":{\"enable_thinking\":true}}");
    json_str(r.body ? r.body : "", "content", text, sizeof text);
    size_t gl = strlen(gen);
    CHECK(r.status == 200 && gl > 1 && strlen(text) == gl - 1 && !strncmp(gen, text, gl - 1),
          "chat '%s' vs pk generate --chat '%s' (status %d)", text, gen, r.status);
    CHECK(r.body && strstr(r.body, "\"object\":\"chat.completion\"") && strstr(r.body, "\"role\":\"assistant\""),
          "chat body %s", r.body);
    free(r.body);
    r = post("/v1/chat/completions", "{\"model\":\"pk-tiny\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                                     "\"text\":\"Tell me about Moses\"}]}],\"max_tokens\":10,\"stream\":true}");
    sse_text(r.body ? r.body : "", "content", streamed, sizeof streamed);
    CHECK(r.status == 200 && !strcmp(streamed, text) && strstr(r.body, "\"delta\":{\"role\":\"assistant\"") &&
              !strstr(r.body, "\"usage\"") && strstr(r.body, "data: [DONE]"),
          "streamed chat '%s' vs '%s': %.400s", streamed, text, r.body);
    free(r.body);
    /* a system prompt and earlier turns change the prompt: more prompt tokens */
    r = post("/v1/chat/completions", "{\"model\":\"pk-tiny\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                                     "{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"},"
                                     "{\"role\":\"user\",\"content\":\"Tell me about Moses\"}],\"max_tokens\":2}");
    expect("chat with history", r, 200, "\"prompt_tokens\":");
}

static void check_errors(void) {
    expect("health", http("GET", "/health", NULL, NULL, 0), 200, "ok");
    expect("models", http("GET", "/v1/models", KEY, NULL, 0), 200, "\"id\":\"pk-tiny\"");
    expect("one model", http("GET", "/v1/models/pk-tiny", KEY, NULL, 0), 200, "\"id\":\"pk-tiny\"");
    expect("no key", http("GET", "/v1/models", NULL, NULL, 0), 401, "invalid_api_key");
    expect("wrong key", http("GET", "/v1/models", "Authorization: Bearer sk-wrong\r\n", NULL, 0), 401, "invalid_api_key");
    expect("unknown route", http("GET", "/v2/nothing", KEY, NULL, 0), 404, "no route");
    expect("unknown model id", http("GET", "/v1/models/gpt-4", KEY, NULL, 0), 404, "model_not_found");
    expect("GET on a POST route", http("GET", "/v1/completions", KEY, NULL, 0), 405, "not allowed");
    expect("unknown model", post("/v1/completions", "{\"model\":\"gpt-4\",\"prompt\":\"x\"}"), 404, "model_not_found");
    expect("malformed JSON", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":"), 400, "not valid JSON");
    expect("empty body", post("/v1/completions", ""), 400, "empty");
    expect("not an object", post("/v1/chat/completions", "[1,2]"), 400, "JSON object");
    expect("trailing bytes", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\"} x"), 400, "after its JSON");
    expect("wrong type", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":\"5\"}"), 400,
           "\"param\":\"max_tokens\"");
    expect("stream not bool", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"stream\":1}"), 400, "stream");
    expect("prompt type", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":{}}"), 400, "\"param\":\"prompt\"");
    expect("messages type", post("/v1/chat/completions", "{\"model\":\"pk-tiny\",\"messages\":\"hi\"}"), 400, "messages");
    expect("bad role", post("/v1/chat/completions", "{\"model\":\"pk-tiny\",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}"),
           400, "role");
    expect("unknown field", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"frobnicate\":1}"), 400,
           "Unrecognized request argument supplied: frobnicate");
    expect("max_tokens negative", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":-1}"), 400,
           "at least 1");
    expect("max_tokens huge", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":1e300}"), 400,
           "max_tokens");
    expect("max_tokens over the context", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":600}"),
           400, "maximum context length is 512 tokens");
    expect("temperature over 100", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"temperature\":200}"),
           400, "temperature");
    expect("top_p over 1", post("/v1/chat/completions", "{\"model\":\"pk-tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                                        "\"top_p\":1.5}"), 400, "top_p");
    expect("a penalty", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"frequency_penalty\":1}"), 400,
           "no penalties");
    expect("five stop strings", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}"),
           400, "at most 4");
    expect("n > 1", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"n\":2}"), 400, "one choice");
    expect("token id out of range", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":[1,2,99999]}"), 400, "vocabulary");
    /* a prompt longer than the context */
    size_t big = 700 * 6 + 64;
    char *long_prompt = malloc(big);
    int at = snprintf(long_prompt, big, "{\"model\":\"pk-tiny\",\"prompt\":\"");
    for (int i = 0; i < 700; i++) at += snprintf(long_prompt + at, big - (size_t)at, "Moses ");
    snprintf(long_prompt + at, big - (size_t)at, "\"}");
    expect("prompt over the context", post("/v1/completions", long_prompt), 400, "context_length_exceeded");
    free(long_prompt);
    /* bodies over the cap: 2 MB and 10 MB */
    for (size_t mb = 2; mb <= 10; mb += 8) {
        size_t n = mb << 20;
        char *body = malloc(n);
        memset(body, ' ', n);
        memcpy(body, "{\"prompt\":\"", 11);
        expect("body over 1 MiB", http("POST", "/v1/completions", KEY, body, n), 413, "request_too_large");
        free(body);
    }
}

/* --max-requests 1: a second request while one streams gets 503; closing the streaming client
 * cancels its job and the next request runs. */
static void check_queue_and_cancel(void) {
    long before = metric("pk_generation_tokens_total"), finished = metric("pk_requests_finished_total");
    int fd = dial();
    static const char body[] = "{\"model\":\"pk-tiny\",\"prompt\":\"In the beginning\",\"max_tokens\":400,\"stream\":true}";
    char head[512];
    int n = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n%s", KEY,
                     sizeof body - 1, body);
    CHECK(fd >= 0 && send_all(fd, head, (size_t)n) == 0, "the streaming request was not sent");
    char buf[2048];
    ssize_t got = recv(fd, buf, sizeof buf - 1, 0); /* its headers and first chunk: it is running */
    CHECK(got > 0 && !strncmp(buf, "HTTP/1.1 200", 12), "the streaming request: %zd bytes", got);
    expect("queue full", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":2}"), 503, "server_busy");
    close(fd);
    /* its job ends (cancelled) and frees the slot: 30 s at most, for slow sanitizer builds */
    long ended = 0;
    for (int i = 0; i < 300 && (ended = metric("pk_requests_finished_total") - finished) < 1; i++) usleep(100000);
    CHECK(ended == 1, "the disconnected client's job has not ended 30 s later");
    long made = metric("pk_generation_tokens_total") - before;
    printf("the cancelled job made %ld of its 400 tokens\n", made);
    CHECK(made >= 0 && made < 400, "the cancelled job made %ld tokens (of 400)", made);
    expect("after the cancel", post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":2}"), 200,
           "\"finish_reason\"");

    /* a client stalled in its headers, and one that sends no HTTP: the server goes on answering */
    static const char stall[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le";
    static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n"; /* a TLS hello's start */
    int stalled = dial(), junk = dial();
    CHECK(stalled >= 0 && send_all(stalled, stall, sizeof stall - 1) == 0, "stall");
    CHECK(junk >= 0 && send_all(junk, tls, sizeof tls - 1) == 0, "junk");
    expect("health beside a stalled client", http("GET", "/health", NULL, NULL, 0), 200, "ok");
    expect("completion beside a stalled client",
           post("/v1/completions", "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":2}"), 200, "\"finish_reason\"");
    close(stalled);
    close(junk);
    CHECK(metric("pk_time_to_first_token_seconds_count") >= 1 && metric("pk_queue_depth") == 0, "metrics");
}

int main(void) {
    if (!check_pk_bin(pk_bin, sizeof pk_bin)) return check_report("serve");
    signal(SIGPIPE, SIG_IGN);
    /* the server's stderr goes to a file, never a pipe that could fill (sanitizer reports) */
    char errpath[64], line[8192];
    snprintf(errpath, sizeof errpath, "/tmp/pk_test_serve.%d.err", (int)getpid());
    char *argv[] = {pk_bin, "serve", "--port", "0", "--api-key", "sk-test", "--max-requests", "1", "--threads", "2", NULL};
    pid_t pid = serve_start(argv, errpath, line, sizeof line);
    int port = serve_port;
    CHECK(port > 0, "pk serve did not start: %s", line);
    if (port > 0) {
        check_errors();
        check_generation();
    check_sampling();
    check_prefix_cache();
    check_stop_strings();
        check_queue_and_cancel();
    }
    /* SIGTERM with a stream running: it ends with an error event and [DONE], then the server exits */
    int fd = port > 0 ? dial() : -1;
    static const char body[] = "{\"model\":\"pk-tiny\",\"prompt\":\"x\",\"max_tokens\":400,\"stream\":true}";
    char head[512], got[1 << 16];
    int n = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.0\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n%s", KEY,
                     sizeof body - 1, body);
    ssize_t k = fd >= 0 && send_all(fd, head, (size_t)n) == 0 ? recv(fd, got, sizeof got - 1, 0) : -1;
    kill(pid, SIGTERM);
    size_t total = k > 0 ? (size_t)k : 0;
    while (fd >= 0 && total < sizeof got - 1 && (k = recv(fd, got + total, sizeof got - 1 - total, 0)) > 0) total += (size_t)k;
    got[total] = '\0';
    if (fd >= 0) close(fd);
    const char *stopping = strstr(got, "The server is stopping");
    CHECK(stopping && strstr(stopping, "data: [DONE]"), "a stream at SIGTERM: %zu bytes, ending %.200s", total,
          total > 200 ? got + total - 200 : got);
    int st = 0;
    waitpid(pid, &st, 0);
    char rest[8192];
    slurp(errpath, rest, sizeof rest);
    unlink(errpath);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(rest, "stopping"), "pk serve after SIGTERM: %s %d; stderr %s",
          WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), rest);
    return check_report("serve");
}
