// SPDX-License-Identifier: Apache-2.0
/* test_product_sources.c — the product, not the laboratory, in what pk ships:
 *   1. no device file that codegen embeds into kernel.cu (pk_cuda_embedded: the texts themselves)
 *      tests a PK_* macro in a preprocessor conditional, other than its own include guard and
 *      the generated graph facts (PK_GEN_*): per-shape choices reach the device code as the one
 *      generated constexpr struct pk_gen_tuning (gen_api.h), never as macros a build could set;
 *   2. no comment under src/ retells measurement history: numbered sessions or calls, dates,
 *      before -> after figures, pointers into PERF.md's log. History lives in git;
 *   3. docs/PERF.md is a summary of the present (at most 200 lines), not a diary.
 * Each finding is printed as file:line with the offending text. Runs from the repository root
 * (tests/run.sh does), and checks that it found the files it expects, so it cannot pass by
 * reading nothing.
 */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <ftw.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/cuda/cuda_internal.h"

/* ---- 1. preprocessor conditionals of the embedded device files ---- */

/* The identifiers a conditional may test: the file's include guard, PK_GEN_*, and what the
 * compilers define. */
static int allowed_macro(const char *id, size_t n, const char *guard) {
    if (n >= 7 && strncmp(id, "PK_GEN_", 7) == 0) return 1;
    if (guard[0] && strlen(guard) == n && strncmp(id, guard, n) == 0) return 1;
    return strncmp(id, "PK_", 3) != 0; /* __CUDA_ARCH__, __CUDACC__, __cplusplus, defined, ... */
}

/* Checks every #if / #ifdef / #ifndef / #elif line of text (one CHECK for the file, each finding
 * printed); returns the conditionals seen. */
static int check_conditionals(const char *path, const char *text) {
    char guard[128] = "";
    int seen = 0, line = 1, bad = 0;
    for (const char *p = text; *p; line++) {
        const char *end = strchr(p, '\n');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *q = p;
        while (q < p + len && (*q == ' ' || *q == '\t')) q++;
        if (q < p + len && *q == '#') {
            q++;
            while (q < p + len && (*q == ' ' || *q == '\t')) q++;
            const int is_if = strncmp(q, "if", 2) == 0 || strncmp(q, "elif", 4) == 0;
            if (is_if) {
                seen++;
                /* the first #ifndef of the file is its include guard */
                if (!guard[0] && strncmp(q, "ifndef", 6) == 0) {
                    const char *g = q + 6;
                    while (*g == ' ' || *g == '\t') g++;
                    size_t gn = 0;
                    while (g[gn] && (isalnum((unsigned char)g[gn]) || g[gn] == '_') && gn + 1 < sizeof guard) gn++;
                    memcpy(guard, g, gn);
                    guard[gn] = '\0';
                }
                const char *stop = p + len, *c = strstr(q, "/*");
                if (c && c < stop) stop = c;
                for (const char *t = q; t < stop;) {
                    if (isalpha((unsigned char)*t) || *t == '_') {
                        const char *s = t;
                        while (t < stop && (isalnum((unsigned char)*t) || *t == '_')) t++;
                        const size_t n = (size_t)(t - s);
                        if (!allowed_macro(s, n, guard)) {
                            bad++;
                            fprintf(stderr, "%s:%d tests the macro %.*s: %.*s\n", path, line, (int)n, s, (int)len, p);
                        }
                    } else {
                        t++;
                    }
                }
            }
        }
        p = end ? end + 1 : p + len;
    }
    CHECK(bad == 0, "%s: %d conditional(s) test a PK_* macro besides its guard and PK_GEN_* (printed above)", path, bad);
    return seen;
}

/* ---- 2. comments under src/ ---- */

static regex_t g_history[5];
static const char *const g_history_what[5] = {
    "a numbered session or call", "a date", "a before -> after figure", "a pointer into PERF.md", "a session range"};
static int g_files;

static void compile_patterns(void) {
    static const char *const pat[5] = {
        "\\b(session|call)s? [0-9]+", "\\b20[0-9][0-9]-[01][0-9]-[0-3][0-9]\\b",
        "[0-9][0-9.]*( ?(ms|us|µs|%|GB/s|ms/token|KB|MB))? ?(->|→) ?[-+]?[0-9]", "PERF\\.md", "sessions [0-9]+"};
    for (int i = 0; i < 5; i++)
        CHECK(regcomp(&g_history[i], pat[i], REG_EXTENDED | REG_ICASE | REG_NOSUB) == 0, "regcomp %s", pat[i]);
}

/* Line number of offset off in text. */
static int line_of(const char *text, const char *at) {
    int n = 1;
    for (const char *p = text; p < at; p++) n += *p == '\n';
    return n;
}

/* The comments of a C, CUDA or header file (block and line comments; strings skipped): one CHECK
 * for the file, each finding printed. */
static void check_comments(const char *path, const char *text) {
    int bad = 0;
    for (const char *p = text; *p;) {
        if (*p == '"' || *p == '\'') { /* a string or character literal */
            const char quote = *p++;
            while (*p && *p != quote && *p != '\n') p += (*p == '\\' && p[1]) ? 2 : 1;
            if (*p) p++;
            continue;
        }
        const char *start = NULL, *end = NULL;
        if (p[0] == '/' && p[1] == '*') {
            start = p + 2;
            end = strstr(start, "*/");
            if (!end) end = start + strlen(start);
        } else if (p[0] == '/' && p[1] == '/') {
            start = p + 2;
            end = strchr(start, '\n');
            if (!end) end = start + strlen(start);
        }
        if (!start) {
            p++;
            continue;
        }
        /* each line of the comment on its own, so the finding names its line */
        for (const char *l = start; l < end;) {
            const char *le = memchr(l, '\n', (size_t)(end - l));
            if (!le) le = end;
            char buf[512];
            const size_t n = (size_t)(le - l) < sizeof buf - 1 ? (size_t)(le - l) : sizeof buf - 1;
            memcpy(buf, l, n);
            buf[n] = '\0';
            for (int i = 0; i < 5; i++)
                if (regexec(&g_history[i], buf, 0, NULL, 0) == 0) {
                    bad++;
                    fprintf(stderr, "%s:%d: a comment retells history (%s): %s\n", path, line_of(text, l),
                            g_history_what[i], buf);
                }
            l = le + (le < end);
        }
        p = end + (*end ? (p[1] == '*' ? 2 : 1) : 0);
    }
    CHECK(bad == 0, "%s: %d comment line(s) retell measurement history (printed above)", path, bad);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n) {
        s[n] = '\0';
    } else {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    if (flag != FTW_F) return 0;
    const char *dot = strrchr(path, '.');
    if (!dot || (strcmp(dot, ".c") && strcmp(dot, ".h") && strcmp(dot, ".cuh") && strcmp(dot, ".cu"))) return 0;
    if (strstr(path, "unicode_tables.h")) return 0; /* generated data */
    char *text = read_file(path);
    CHECK(text != NULL, "read %s", path);
    if (!text) return 0;
    g_files++;
    check_comments(path, text);
    free(text);
    return 0;
}

int main(void) {
    /* 1. */
    int conditionals = 0, device_files = 0;
    for (int i = 0; i < pk_cuda_embedded_count; i++) {
        const char *path = pk_cuda_embedded[i].path;
        device_files++;
        conditionals += check_conditionals(path, pk_cuda_embedded[i].text);
    }
    CHECK(device_files >= 15 && conditionals >= 15, "the embedded device files: %d files, %d conditionals",
          device_files, conditionals);

    /* 2. */
    compile_patterns();
    CHECK(nftw("src", visit, 16, FTW_PHYS) == 0, "walk src/ (run from the repository root)");
    CHECK(g_files >= 50, "src/ holds %d source files", g_files);
    for (int i = 0; i < 5; i++) regfree(&g_history[i]);

    /* 3. */
    char *perf = read_file("docs/PERF.md");
    int lines = 0;
    for (const char *c = perf; c && *c; c++) lines += *c == '\n';
    CHECK(perf && lines > 20 && lines <= 200, "docs/PERF.md: %d lines (at most 200)", lines);
    free(perf);
    return check_report("product_sources");
}
