// SPDX-License-Identifier: Apache-2.0
/* test_serve_load.c — pk serve under load: starts $BUILD/pk serve on the shipped model (CPU, two
 * threads, --max-requests 64) and runs the load tests of issue 61 that one-at-a-time serving
 * must already pass:
 *   - 32 concurrent streams, each with its own prompt, get exactly the text each gets alone;
 *   - a soak: PK_SOAK_REQUESTS requests (default 1000; 200 in sanitizer builds) from 8 client
 *     threads — completions streamed and not, streamed chat, and one in 8 closed by its client
 *     after its first event (a cancel, of a running job or of a waiting one). Every completion
 *     has its prompt's text, the server's count of ended jobs grows by exactly the number sent
 *     (none lost), nothing is left running or waiting, /health answers, no 503 or 500 was sent,
 *     and the server's VmRSS after every request is within 20 MB of that after the first 100
 *     (not in sanitizer builds, whose allocators keep freed memory on purpose; ASan's leak check
 *     at the server's exit covers them).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "serve_client.h"


enum { NPROMPT = 32, ALONE_TOKENS = 16, CLIENTS = 8, FIRST = 100, TEXT_CAP = 4096 };

static char prompts[NPROMPT][96];
static char alone[NPROMPT][TEXT_CAP]; /* each prompt's streamed text, run alone */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 32 different prompts: 8 openings times 4 continuations. */
static void make_prompts(void) {
    static const char *open[] = {"In the beginning", "The king said", "And the people", "Then Moses went",
                                 "The Lord spoke", "In those days", "And it came to pass", "The water was"};
    static const char *more[] = {"", " and", " that", " unto the"};
    for (int i = 0; i < NPROMPT; i++) snprintf(prompts[i], sizeof prompts[i], "%s%s", open[i % 8], more[i / 8]);
}

/* The body of a completion of prompt p. */
static void completion_body(char *out, size_t cap, int p, int max_tokens, int stream) {
    snprintf(out, cap, "{\"model\":\"pk-tiny\",\"prompt\":\"%s\",\"max_tokens\":%d,\"stream\":%s}", prompts[p], max_tokens,
             stream ? "true" : "false");
}

/* A streamed completion's text, or "" (and *ok 0) when its answer is not a whole stream. */
static void streamed_text(reply r, char *text, size_t cap, int *ok) {
    *ok = r.status == 200 && r.body && strstr(r.body, "\"finish_reason\":\"") && strstr(r.body, "data: [DONE]\n\n");
    sse_text(r.body ? r.body : "", "text", text, cap);
}

/* ---- 32 concurrent streams ---- */

typedef struct stream_run {
    int p, ok;
    double sent, done;
    char text[TEXT_CAP];
    pthread_barrier_t *start;
} stream_run;

static void *stream_thread(void *arg) {
    stream_run *s = arg;
    char body[256];
    completion_body(body, sizeof body, s->p, ALONE_TOKENS, 1);
    pthread_barrier_wait(s->start);
    int fd = dial();
    if (fd < 0) return NULL;
    send_request(fd, "POST", "/v1/completions", NULL, body, strlen(body));
    s->sent = now_s();
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap + 1);
    ssize_t k;
    while ((k = recv(fd, buf + got, cap - got, 0)) > 0)
        if ((got += (size_t)k) == cap) buf = realloc(buf, (cap *= 2) + 1);
    s->done = now_s();
    close(fd);
    buf[got] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    reply r = {.status = !strncmp(buf, "HTTP/1.", 7) && sep ? atoi(buf + 9) : -1, .body = sep ? sep + 4 : NULL};
    streamed_text(r, s->text, sizeof s->text, &s->ok);
    free(buf);
    return NULL;
}

/* The most jobs /metrics showed decoding at once, sampled until *stop. */
typedef struct running_peak {
    atomic_int stop;
    long peak;
} running_peak;

static void *watch_running(void *arg) {
    running_peak *w = arg;
    while (!atomic_load(&w->stop)) {
        long r = metric("pk_requests_running");
        if (r > w->peak) w->peak = r;
        usleep(2000);
    }
    return NULL;
}

static void check_concurrent_streams(void) {
    double t_alone = now_s();
    for (int p = 0; p < NPROMPT; p++) { /* alone: one after the other */
        char body[256];
        int ok;
        completion_body(body, sizeof body, p, ALONE_TOKENS, 1);
        reply r = http("POST", "/v1/completions", NULL, body, strlen(body));
        streamed_text(r, alone[p], sizeof alone[p], &ok);
        CHECK(ok && alone[p][0], "prompt %d alone: status %d, %.300s", p, r.status, r.body ? r.body : "");
        free(r.body);
    }
    int distinct = 0;
    for (int p = 0; p < NPROMPT; p++) {
        int seen = 0;
        for (int q = 0; q < p; q++) seen |= !strcmp(alone[p], alone[q]);
        distinct += !seen;
    }
    t_alone = now_s() - t_alone;
    printf("32 prompts alone: %d distinct texts, %.2f s one after another\n", distinct, t_alone);
    CHECK(distinct >= NPROMPT / 2, "only %d distinct texts of 32 prompts: a mix-up could not show", distinct);

    static stream_run runs[NPROMPT];
    pthread_t th[NPROMPT];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NPROMPT);
    running_peak watch = {.peak = 0};
    atomic_init(&watch.stop, 0);
    pthread_t watcher;
    pthread_create(&watcher, NULL, watch_running, &watch);
    double t_together = now_s();
    for (int i = 0; i < NPROMPT; i++) {
        runs[i] = (stream_run){.p = NPROMPT - 1 - i, .start = &start}; /* not the order they ran alone */
        pthread_create(&th[i], NULL, stream_thread, &runs[i]);
    }
    for (int i = 0; i < NPROMPT; i++) pthread_join(th[i], NULL);
    t_together = now_s() - t_together;
    atomic_store(&watch.stop, 1);
    pthread_join(watcher, NULL);
    pthread_barrier_destroy(&start);
    double first_done = 1e300;
    for (int i = 0; i < NPROMPT; i++)
        if (runs[i].done > 0 && runs[i].done < first_done) first_done = runs[i].done;
    int same = 0, overlapped = 0;
    for (int i = 0; i < NPROMPT; i++) {
        stream_run *s = &runs[i];
        int eq = s->ok && !strcmp(s->text, alone[s->p]);
        same += eq;
        overlapped += s->sent > 0 && s->sent < first_done;
        CHECK(eq, "stream of prompt %d: '%s', alone '%s' (ok %d)", s->p, s->text, alone[s->p], s->ok);
    }
    printf("32 concurrent streams: %d the same as alone; %d sent before the first one ended; up to %ld decoding at "
           "once; %.2f s in all\n", same, overlapped, watch.peak, t_together);
    /* the streams must really have been in the server at once, or the test shows nothing */
    CHECK(overlapped >= 8, "only %d of 32 streams were sent before the first ended", overlapped);
    /* and decoded together (the resident session), not one after another */
    CHECK(watch.peak >= 8, "at most %ld jobs were decoding at once", watch.peak);
}

/* ---- the soak ---- */

enum { OUT_DONE, OUT_CANCELLED, OUT_BAD };

typedef struct soak {
    atomic_int next;
    int end;
    atomic_int outcome[3];
} soak;

/* Request i of the soak, its kind and prompt from a generator seeded by i. */
static int soak_one(int i) {
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
    int p = (int)(check_rand_u64(&rng) % NPROMPT), kind = (int)(check_rand_u64(&rng) % 16);
    char body[256];
    const char *path = "/v1/completions";
    if (kind == 0 || kind >= 12) { /* chat: 0 cancels a long answer after its first event (the role) */
        path = "/v1/chat/completions";
        snprintf(body, sizeof body,
                 "{\"model\":\"pk-tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d,"
                 "\"stream\":true}", prompts[p], kind == 0 ? 300 : 4);
    } else if (kind == 1) { /* cancels a long completion after its first token */
        completion_body(body, sizeof body, p, 300, 1);
    } else {
        completion_body(body, sizeof body, p, ALONE_TOKENS, kind < 8);
    }
    int fd = dial();
    if (fd < 0 || send_request(fd, "POST", path, NULL, body, strlen(body))) {
        if (fd >= 0) close(fd);
        return OUT_BAD;
    }
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap + 1);
    ssize_t k;
    int outcome = OUT_BAD;
    while ((k = recv(fd, buf + got, cap - got, 0)) > 0) {
        if ((got += (size_t)k) == cap) buf = realloc(buf, (cap *= 2) + 1);
        buf[got] = '\0';
        const char *ev = kind <= 1 ? strstr(buf, "\r\n\r\ndata: ") : NULL;
        if (ev && strstr(ev + 4, "\n\n") && !strncmp(buf + 8, " 200 ", 5)) {
            outcome = OUT_CANCELLED; /* its first event is in: the job was admitted */
            break;
        }
    }
    close(fd);
    buf[got] = '\0';
    if (outcome != OUT_CANCELLED) {
        char *sep = strstr(buf, "\r\n\r\n");
        reply r = {.status = sep && !strncmp(buf, "HTTP/1.", 7) ? atoi(buf + 9) : -1, .body = sep ? sep + 4 : ""};
        char text[TEXT_CAP] = "";
        int ok = 0;
        if (kind >= 12) {
            ok = r.status == 200 && strstr(r.body, "\"finish_reason\":\"") && strstr(r.body, "data: [DONE]\n\n");
        } else if (kind >= 2) {
            if (kind < 8) streamed_text(r, text, sizeof text, &ok);
            else ok = r.status == 200 && json_str(r.body, "text", text, sizeof text) && strstr(r.body, "\"finish_reason\":\"");
            ok = ok && !strcmp(text, alone[p]);
        }
        outcome = ok ? OUT_DONE : OUT_BAD;
        if (!ok) fprintf(stderr, "soak request %d (kind %d, prompt %d): '%s' vs '%s': %.300s\n", i, kind, p, text, alone[p], buf);
    }
    free(buf);
    return outcome;
}

static void *soak_thread(void *arg) {
    soak *s = arg;
    for (int i; (i = atomic_fetch_add(&s->next, 1)) < s->end;) atomic_fetch_add(&s->outcome[soak_one(i)], 1);
    return NULL;
}

/* Requests [from, to) of the soak from CLIENTS threads. */
static void soak_run(soak *s, int from, int to) {
    atomic_store(&s->next, from);
    s->end = to;
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) pthread_create(&th[i], NULL, soak_thread, s);
    for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);
}

/* The server's resident memory in kB (-1 if unread). */
static long vm_rss_kb(pid_t pid) {
    char path[64], st[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    slurp(path, st, sizeof st);
    const char *p = strstr(st, "VmRSS:");
    return p ? atol(p + 6) : -1;
}

/* Waits up to 30 s for the engine to have ended `want` more jobs than `base` and to hold none. */
static long settle(long base, long want) {
    long ended = 0;
    for (int i = 0; i < 300; i++) {
        ended = metric("pk_requests_finished_total") - base;
        if (ended >= want && metric("pk_requests_running") == 0 && metric("pk_queue_depth") == 0) break;
        usleep(100000);
    }
    return ended;
}

static void check_soak(pid_t pid) {
    const char *env = getenv("PK_SOAK_REQUESTS");
    int n = env && atoi(env) > FIRST ? atoi(env) : SANITIZED ? 200 : 1000;
    long base = metric("pk_requests_finished_total"), tokens = metric("pk_generation_tokens_total"), busy = metric("pk_http_responses_total{code=\"503\"}"),
         failed = metric("pk_http_responses_total{code=\"500\"}");
    static soak s;
    double t0 = now_s();
    soak_run(&s, 0, FIRST);
    long ended_first = settle(base, FIRST), rss_first = vm_rss_kb(pid);
    soak_run(&s, FIRST, n);
    long ended = settle(base, n), rss_last = vm_rss_kb(pid);
    int done = atomic_load(&s.outcome[OUT_DONE]), cancelled = atomic_load(&s.outcome[OUT_CANCELLED]),
        bad = atomic_load(&s.outcome[OUT_BAD]);
    printf("soak: %d requests in %.1f s from %d clients: %d completed, %d cancelled, %d bad; the server ended %ld jobs; "
           "%ld tokens; VmRSS %ld kB after %d, %ld kB after %d\n",
           n, now_s() - t0, CLIENTS, done, cancelled, bad, ended, metric("pk_generation_tokens_total") - tokens, rss_first,
           FIRST, rss_last, n);
    CHECK(bad == 0 && done + cancelled == n, "%d of %d requests had a wrong or broken answer", bad, n);
    CHECK(cancelled >= n / 16, "only %d cancels in %d requests", cancelled, n);
    CHECK(ended_first == FIRST && ended == n, "the server ended %ld jobs of the first %d, %ld of all %d", ended_first, FIRST,
          ended, n);
    CHECK(metric("pk_requests_running") == 0 && metric("pk_queue_depth") == 0, "jobs left running or waiting");
    CHECK(metric("pk_http_responses_total{code=\"503\"}") == busy && metric("pk_http_responses_total{code=\"500\"}") == failed,
          "the soak was answered 503 or 500");
    reply h = http("GET", "/health", NULL, NULL, 0);
    CHECK(h.status == 200 && h.body && strstr(h.body, "ok"), "health after the soak: %d", h.status);
    free(h.body);
    if (!SANITIZED)
        CHECK(rss_first > 0 && rss_last - rss_first <= 20 * 1024, "VmRSS grew from %ld kB to %ld kB", rss_first, rss_last);
}

int main(void) {
    char pk_bin[512];
    if (!check_pk_bin(pk_bin, sizeof pk_bin)) return check_report("serve_load");
    signal(SIGPIPE, SIG_IGN);
    make_prompts();
    char errpath[64], line[8192];
    snprintf(errpath, sizeof errpath, "/tmp/pk_test_serve_load.%d.err", (int)getpid());
    char *argv[] = {pk_bin, "serve", "--port", "0", "--max-requests", "64", "--threads", "2", NULL};
    pid_t pid = serve_start(argv, errpath, line, sizeof line);
    CHECK(serve_port > 0, "pk serve did not start: %s", line);
    if (serve_port > 0) {
        check_concurrent_streams();
        check_soak(pid);
    }
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    slurp(errpath, line, sizeof line);
    unlink(errpath);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pk serve after SIGTERM: %s %d; stderr %s", WIFEXITED(st) ? "exit" : "signal",
          WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), line);
    return check_report("serve_load");
}
