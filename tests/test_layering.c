// SPDX-License-Identifier: Apache-2.0
/* test_layering.c — the core does not call into the runtime: no object of src/graph or
 * src/taskgraph references a symbol that an object of src/runtime defines (`nm -u` against
 * `nm --defined-only`); the core reaches a backend only through its table (src/backend.h), and
 * every backend fills the table's required entries.
 *
 * The objects are those of $BUILD (else of the build this program sits in): the list is
 * $BUILD/libpk.objs, the archive's current members, so an object left behind by a deleted source
 * does not count. Run from the top of the source tree (tests/run.sh does).
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"

enum { MAX_OBJS = 512, MAX_SYMS = 8192, NAME_CAP = 256, CMD_MAX = 65536 };

typedef struct sym {
    char name[NAME_CAP];
    char obj[NAME_CAP]; /* the object that defines (or references) it */
} sym;

static char objs_graph[MAX_OBJS][NAME_CAP], objs_runtime[MAX_OBJS][NAME_CAP];
static int ngraph, nruntime;
static sym defined[MAX_SYMS];
static int ndefined;

/* The build directory: $BUILD (as tests/run.sh and make pass it), else the directory above this
 * program's (build/tests/test_layering → build), else build. */
static void build_dir(const char *argv0, char *out, size_t len) {
    const char *env = getenv("BUILD");
    const char *tail = "/tests/test_layering";
    size_t n = strlen(argv0), t = strlen(tail);
    if (env && env[0])
        snprintf(out, len, "%s", env);
    else if (n > t && strcmp(argv0 + n - t, tail) == 0)
        snprintf(out, len, "%.*s", (int)(n - t), argv0);
    else
        snprintf(out, len, "build");
}

/* Sorts the archive's objects into the checked side (graph, taskgraph) and the runtime. Their
 * paths are relative to the top of the source tree, where tests/run.sh runs the tests. */
static int read_objects(const char *build) {
    char path[512];
    snprintf(path, sizeof path, "%s/libpk.objs", build);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char word[NAME_CAP];
    while (fscanf(f, "%255s", word) == 1) {
        if ((strstr(word, "/src/graph/") || strstr(word, "/src/taskgraph/")) && ngraph < MAX_OBJS)
            snprintf(objs_graph[ngraph++], NAME_CAP, "%s", word);
        else if (strstr(word, "/src/runtime/") && nruntime < MAX_OBJS)
            snprintf(objs_runtime[nruntime++], NAME_CAP, "%s", word);
    }
    fclose(f);
    return 0;
}

/* "nm OPTS obj obj ..." into cmd. */
static void nm_command(char *cmd, size_t len, const char *opts, char objs[][NAME_CAP], int n) {
    size_t at = (size_t)snprintf(cmd, len, "nm %s", opts);
    for (int i = 0; i < n && at < len; i++) at += (size_t)snprintf(cmd + at, len - at, " '%s'", objs[i]);
}

/* Runs nm over objs and calls on_line(object, type, name) for every symbol line (nm prints
 * "obj.o:" before each object's symbols when given several). Returns nm's exit status, -1 if
 * it could not be started. */
static int run_nm(const char *opts, char objs[][NAME_CAP], int n,
                  void (*on_line)(const char *obj, char type, const char *name)) {
    static char cmd[CMD_MAX];
    nm_command(cmd, sizeof cmd, opts, objs, n);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[1024], obj[NAME_CAP] = "";
    if (n == 1) snprintf(obj, sizeof obj, "%s", objs[0]);
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        size_t len = strlen(line);
        if (len > 1 && line[len - 1] == ':' && !strchr(line, ' ')) {
            snprintf(obj, sizeof obj, "%.*s", (int)(len - 1), line);
            continue;
        }
        /* "addr T name" or "         U name" */
        char a[64], b[64], c[NAME_CAP];
        int k = sscanf(line, "%63s %63s %255s", a, b, c);
        if (k == 3 && strlen(b) == 1) on_line(obj, b[0], c);
        else if (k == 2 && strlen(a) == 1) on_line(obj, a[0], b);
    }
    return pclose(p);
}

static void collect_defined(const char *obj, char type, const char *name) {
    /* global definitions only: text, data, bss, read-only, common, weak */
    if (!strchr("TDBRCVWGS", type) || ndefined >= MAX_SYMS) return;
    snprintf(defined[ndefined].name, NAME_CAP, "%s", name);
    snprintf(defined[ndefined].obj, NAME_CAP, "%s", obj);
    ndefined++;
}

static int crossings, nundefined;
static void check_undefined(const char *obj, char type, const char *name) {
    if (type != 'U') return;
    nundefined++;
    for (int i = 0; i < ndefined; i++)
        if (strcmp(defined[i].name, name) == 0) {
            crossings++;
            fprintf(stderr,
                    "FAIL layering: %s references %s, which %s defines: src/graph and src/taskgraph must not "
                    "call into src/runtime (reach a backend through its table, src/backend.h)\n",
                    obj, name, defined[i].obj);
        }
}

static void check_objects(const char *argv0) {
    char build[256];
    build_dir(argv0, build, sizeof build);
    int rc = read_objects(build);
    CHECK(rc == 0, "cannot read %s/libpk.objs (the object list `make` writes): build first", build);
    if (rc != 0) return;
    CHECK(ngraph >= 2 && nruntime >= 2, "%s/libpk.objs names %d graph/taskgraph and %d runtime objects", build,
          ngraph, nruntime);
    if (ngraph < 1 || nruntime < 1) return;
    rc = run_nm("--defined-only", objs_runtime, nruntime, collect_defined);
    CHECK(rc == 0 && ndefined > 0, "nm --defined-only over the %d runtime objects: exit %d, %d symbols", nruntime,
          rc, ndefined);
    /* One object at a time, so that a crossing names the object that references the symbol. */
    for (int i = 0; i < ngraph; i++) {
        crossings = 0;
        rc = run_nm("-u", &objs_graph[i], 1, check_undefined);
        CHECK(rc == 0, "nm -u %s: exit %d", objs_graph[i], rc);
        CHECK(crossings == 0, "%s references %d symbols of src/runtime", objs_graph[i], crossings);
    }
    CHECK(nundefined > 0, "nm -u found no undefined symbol in %d objects (is nm working?)", ngraph);
}

/* Every backend fills the entries the core calls unconditionally. */
static void check_tables(void) {
    const pk_backend b[] = {PK_BACKEND_CPU, PK_BACKEND_CUDA};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        const pk_backend_i *t = pk_backend_find(b[i]);
        CHECK(t != NULL, "no table for backend %d", (int)b[i]);
        if (!t) continue;
        CHECK(t->name && t->default_workers && t->device_figures && t->attention_reach && t->compile && t->run &&
                  t->read_tensor && t->memory && t->copy_bandwidth && t->free,
              "backend %d (%s) leaves a required entry NULL", (int)b[i], t->name ? t->name : "?");
        CHECK(t->serves_sessions == 0 || t->serves_sessions == 1, "backend %s: serves_sessions %d", t->name,
              t->serves_sessions);
    }
    CHECK(pk_backend_find((pk_backend)99) == NULL, "an unknown backend has a table");
}

int main(int argc, char **argv) {
    (void)argc;
    check_objects(argv[0]);
    check_tables();
    return check_report("layering");
}
