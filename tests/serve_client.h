// SPDX-License-Identifier: Apache-2.0
/* serve_client.h — the HTTP client side of pk serve's tests (test_serve.c, test_serve_load.c):
 * plain sockets to 127.0.0.1:serve_port, HTTP/1.0 (the server answers without chunking and
 * closes), the few JSON and SSE readings the tests make, /metrics values, and starting
 * `$BUILD/pk serve --port 0` with its stderr in a file (never a pipe that could fill).
 * Static functions in a header: each test is one program, compiled alone.
 */
#ifndef PK_TEST_SERVE_CLIENT_H
#define PK_TEST_SERVE_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int serve_port;

/* A connected socket to the server, reads timing out after 60 s; -1 when it cannot connect. */
static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)serve_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* Sends one HTTP/1.0 request on fd. */
static int send_request(int fd, const char *method, const char *path, const char *headers, const char *body, size_t len) {
    char head[1024];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.0\r\nHost: localhost\r\n%sContent-Length: %zu\r\n\r\n", method,
                     path, headers ? headers : "", body ? len : 0);
    if (send_all(fd, head, (size_t)n)) return -1;
    return body ? send_all(fd, body, len) : 0;
}

typedef struct reply {
    int status;
    char *body; /* malloc'd, NUL-terminated */
} reply;

/* One HTTP/1.0 exchange: the status and the body (status -1 and no body when it failed). */
static reply http(const char *method, const char *path, const char *headers, const char *body, size_t len) {
    reply r = {0};
    int fd = dial();
    if (fd < 0) return r;
    send_request(fd, method, path, headers, body, len); /* a 413 may close early */
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap + 1);
    ssize_t k;
    while ((k = recv(fd, buf + got, cap - got, 0)) > 0) {
        got += (size_t)k;
        if (got == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    close(fd);
    buf[got] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &r.status) != 1 || !sep) r.status = -1;
    r.body = strdup(sep ? sep + 4 : "");
    free(buf);
    return r;
}

/* The JSON string value after "key": (escapes \n, \", \\ and \uXXXX < 0x80 undone) appended to out. */
static const char *json_str(const char *p, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *s = strstr(p, pat);
    if (!s) return NULL;
    s += strlen(pat);
    size_t n = strlen(out);
    while (*s && *s != '"' && n + 1 < cap) {
        if (*s == '\\') {
            s++;
            if (*s == 'n') out[n++] = '\n';
            else if (*s == 'u') out[n++] = (char)strtol((char[]){s[1], s[2], s[3], s[4], 0}, NULL, 16), s += 4;
            else out[n++] = *s;
            s++;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
    return s;
}

/* The streamed text: every "content" (chat) or "text" (completions) of the SSE chunks joined. */
static void sse_text(const char *body, const char *key, char *out, size_t cap) {
    out[0] = '\0';
    for (const char *p = strstr(body, "data: {"); p; p = strstr(p + 1, "data: {")) {
        const char *end = strstr(p, "\n\n");
        char one[4096] = "";
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[8192];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        if (json_str(line, key, one, sizeof one)) snprintf(out + strlen(out), cap - strlen(out), "%s", one);
    }
}

/* The file's first cap - 1 bytes, NUL-terminated ("" if it cannot be read). */
static void slurp(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
}

/* A counter or gauge of /metrics; -1 when it is missing. */
static long metric(const char *name) {
    reply r = http("GET", "/metrics", NULL, NULL, 0);
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = r.body ? strstr(r.body, pat) : NULL;
    long v = p ? atol(p + strlen(pat)) : -1;
    free(r.body);
    return v;
}

/* Starts `pk serve --port 0 ARGS...` (argv: pk_bin, "serve", ..., NULL) with its stderr in
 * errpath, and waits up to 60 s (a sanitizer build loads slowly) for its "serving" line:
 * serve_port is set from it. Returns the child's pid; serve_port stays 0 when it did not start
 * (line holds what it printed). */
static pid_t serve_start(char *const argv[], const char *errpath, char *line, size_t cap) {
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(errpath, "w", stderr)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    line[0] = '\0';
    for (int i = 0; i < 600 && !strstr(line, "serving"); i++) {
        usleep(100000);
        slurp(errpath, line, cap);
        if (waitpid(pid, NULL, WNOHANG) == pid) break;
    }
    const char *url = strstr(line, "http://127.0.0.1:");
    serve_port = url ? atoi(url + 17) : 0;
    return pid;
}

#endif /* PK_TEST_SERVE_CLIENT_H */
