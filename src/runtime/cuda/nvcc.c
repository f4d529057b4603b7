// SPDX-License-Identifier: Apache-2.0
/* nvcc.c — kernel.cu → kernel.so through nvcc, and the kernel cache.
 *
 * nvcc is found as $PK_NVCC, else on $PATH, else /usr/local/cuda/bin/nvcc, and run with
 * posix_spawn and an argv array (never a shell); its output goes to nvcc.log. The cache lives in
 * cfg.cache_dir, else $PK_CACHE_DIR, else $XDG_CACHE_HOME/pk, else ~/.cache/pk; each object sits
 * in a subdirectory named by a 128-bit hash of kernel.cu, the embedded headers, the flags and
 * `nvcc --version`, beside the sources it was built from. Loading a .so runs its code, so a cache
 * directory that is not ours or that group or others may write is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cuda/cuda_internal.h"

extern char **environ;

#define PATH_CAP 1024

/* ---- arch names ---- */

int pk_cuda_arch_valid(const char *a) {
    if (!a || strncmp(a, "sm_", 3) != 0) return 0;
    const char *p = a + 3;
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (digits < 2 || digits > 3) return 0;
    if (*p == 'a' || *p == 'f') p++;
    return *p == '\0';
}

int pk_cuda_arch_name(int major, int minor, char *out, size_t len) {
    if (major < 1 || minor < 0 || minor > 9) return -1;
    /* sm_90a: Hopper's arch-specific features (wgmma, setmaxnreg) for 9.0 */
    snprintf(out, len, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
    return 0;
}

/* ---- hashing (two independent 64-bit FNV-1a lanes: a cache key, not a security boundary) ---- */

typedef struct key128 {
    uint64_t a, b;
} key128;

static void key_add(key128 *h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ s[i]) * 0x100000001b3ULL;
        h->b = (h->b ^ s[i]) * 0x100000001b3ULL;
        h->b ^= h->b >> 29;
    }
}

static void key_add_str(key128 *h, const char *s) { key_add(h, s, strlen(s) + 1); }

/* ---- files ---- */

static int write_file(const char *path, const char *text, size_t n) {
    char tmp[2 * PATH_CAP + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    int ok = fwrite(text, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return -1;
    char tmp[2 * PATH_CAP + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", to, (long)getpid());
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        fclose(in);
        return -1;
    }
    char buf[65536];
    size_t n;
    int ok = 1;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) ok = ok && fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    fclose(in);
    ok = fclose(out) == 0 && ok;
    if (!ok || chmod(tmp, 0755) != 0 || rename(tmp, to) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* mkdir -p with `mode` for the directories it creates. */
static int mkdir_p(const char *path, mode_t mode) {
    char p[PATH_CAP];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(p, mode) != 0 && errno != EEXIST) return -1;
    return 0;
}

/* Writes kernel.cu and the embedded headers under dir. */
static pk_status write_sources(pk_kernel *k, const char *dir, const pk_strbuf *cu) {
    char path[PATH_CAP];
    for (int i = 0; i < pk_cuda_embedded_count; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, pk_cuda_embedded[i].path);
        char *slash = strrchr(path, '/');
        *slash = '\0';
        if (mkdir_p(path, 0755) != 0) return pk_fail(k, PK_ERR_IO, "pk_compile: cannot create directory '%s'", path);
        *slash = '/';
        if (write_file(path, pk_cuda_embedded[i].text, strlen(pk_cuda_embedded[i].text)) != 0)
            return pk_fail(k, PK_ERR_IO, "pk_compile: cannot write '%s'", path);
    }
    snprintf(path, sizeof path, "%s/kernel.cu", dir);
    if (write_file(path, cu->p, cu->n) != 0) return pk_fail(k, PK_ERR_IO, "pk_compile: cannot write '%s'", path);
    return PK_OK;
}

/* A directory whose .so files we may load: ours, and not writable by group or others. */
static pk_status check_private_dir(pk_kernel *k, const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) return pk_fail(k, PK_ERR_BACKEND, "pk_compile: kernel cache '%s' cannot be read: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return pk_fail(k, PK_ERR_BACKEND, "pk_compile: kernel cache '%s' is not a directory", dir);
    if (st.st_uid != geteuid())
        return pk_fail(k, PK_ERR_BACKEND,
                       "pk_compile: kernel cache '%s' belongs to uid %u, not to this user (%u); loading a kernel "
                       "from it would run someone else's code (set cfg.cache_dir or PK_CACHE_DIR)",
                       dir, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return pk_fail(k, PK_ERR_BACKEND,
                       "pk_compile: kernel cache '%s' is writable by %s (mode %03o); loading a kernel from it "
                       "could run someone else's code: chmod go-w it or use another cache_dir",
                       dir, (st.st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st.st_mode & 0777));
    return PK_OK;
}

static pk_status cache_root(pk_kernel *k, char *out, size_t len) {
    const char *env;
    if (k->cfg.cache_dir && k->cfg.cache_dir[0])
        snprintf(out, len, "%s", k->cfg.cache_dir);
    else if ((env = getenv("PK_CACHE_DIR")) && env[0])
        snprintf(out, len, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && env[0])
        snprintf(out, len, "%s/pk", env);
    else if ((env = getenv("HOME")) && env[0])
        snprintf(out, len, "%s/.cache/pk", env);
    else
        return pk_fail(k, PK_ERR_BACKEND, "pk_compile: no kernel cache directory: set cfg.cache_dir, PK_CACHE_DIR or HOME");
    if (mkdir_p(out, 0700) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "pk_compile: cannot create kernel cache '%s': %s", out, strerror(errno));
    return check_private_dir(k, out);
}

/* ---- nvcc ---- */

static int executable(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static pk_status find_nvcc(pk_kernel *k, char *out, size_t len) {
    const char *env = getenv("PK_NVCC");
    if (env && env[0]) {
        if (executable(env)) {
            snprintf(out, len, "%s", env);
            return PK_OK;
        }
        return pk_fail(k, PK_ERR_BACKEND,
                       "pk_compile: nvcc not found (set PK_NVCC or add CUDA's bin to PATH): PK_NVCC='%s' is not an "
                       "executable file",
                       env);
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        if (n > 0 && n < len - 8) {
            snprintf(out, len, "%.*s/nvcc", (int)n, path);
            if (executable(out)) return PK_OK;
        }
        path = end ? end + 1 : NULL;
    }
    snprintf(out, len, "/usr/local/cuda/bin/nvcc");
    if (executable(out)) return PK_OK;
    return pk_fail(k, PK_ERR_BACKEND, "pk_compile: nvcc not found (set PK_NVCC or add CUDA's bin to PATH)");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs argv with stdout and stderr into out_fd; returns the exit status (-1: could not start,
 * 128 + n: killed by signal n). progress: a label to show on stderr while it runs, or NULL. */
static int run_program(char *const argv[], int out_fd, const char *progress) {
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) return -1;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int tty = progress && isatty(2);
    double t0 = now_s();
    long shown = -1;
    if (progress && !tty) fprintf(stderr, "pk: %s…\n", progress);
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return -1;
        long secs = (long)(now_s() - t0);
        if (tty && secs != shown) {
            fprintf(stderr, "\rpk: %s… %ld s", progress, secs);
            shown = secs;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (progress) fprintf(stderr, "%spk: %s: done in %.1f s\n", tty ? "\r" : "", progress, now_s() - t0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

/* `nvcc --version` into buf (NUL-terminated); 0 on success. */
static int nvcc_version(const char *nvcc, char *buf, size_t len) {
    char tmpl[] = "/tmp/pk-nvcc-version-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) return -1;
    unlink(tmpl);
    char *argv[] = {(char *)nvcc, "--version", NULL};
    int rc = run_program(argv, fd, NULL);
    ssize_t n = rc == 0 ? pread(fd, buf, len - 1, 0) : -1;
    close(fd);
    if (n < 0) return -1;
    buf[n] = '\0';
    return 0;
}

/* The log's first lines that say "error" (else its first lines), for an error message. */
static void log_head(const char *path, char *out, size_t len) {
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    size_t n = 0;
    int pass, found = 0;
    for (pass = 0; pass < 2 && !found; pass++) {
        rewind(f);
        int lines = 0;
        while (lines < 4 && fgets(line, sizeof line, f)) {
            if (pass == 0 && !strstr(line, "error")) continue;
            size_t m = strlen(line);
            if (n + m >= len) m = len - n - 1;
            memcpy(out + n, line, m);
            n += m;
            out[n] = '\0';
            lines++;
            found = 1;
        }
    }
    fclose(f);
    if (n && out[n - 1] == '\n') out[n - 1] = '\0';
}

pk_status pk_cuda_build(pk_kernel *k, const pk_strbuf *cu, const char *arch, const char *output_dir, char *so_path,
                        size_t so_len) {
    char nvcc[PATH_CAP], root[PATH_CAP], dir[PATH_CAP + 64], path[PATH_CAP + 96], log[PATH_CAP + 96];
    pk_status st = find_nvcc(k, nvcc, sizeof nvcc);
    if (st != PK_OK) return st;
    st = cache_root(k, root, sizeof root);
    if (st != PK_OK) return st;

    /* flags: the hashed part (everything but paths) */
    char gencode[96];
    const char *num = arch + 3; /* "90a" */
    snprintf(gencode, sizeof gencode, "-gencode=arch=compute_%s,code=%s", num, arch);
    const char *flags[24];
    int nf = 0;
    flags[nf++] = "-shared";
    flags[nf++] = "-Xcompiler";
    flags[nf++] = "-fPIC";
    flags[nf++] = "-O3";
    flags[nf++] = "-lineinfo";
    flags[nf++] = "-std=c++17";
    flags[nf++] = gencode;
    /* the debug build (PK_CUDA_DEBUG) and every per-shape choice are in kernel.cu itself
     * (codegen.c's pk_gen_tuning), so the key below covers them */

    char version[2048];
    if (nvcc_version(nvcc, version, sizeof version) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "pk_compile: '%s --version' failed: is it a working nvcc?", nvcc);
    key128 h = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
    key_add(&h, cu->p, cu->n + 1);
    for (int i = 0; i < pk_cuda_embedded_count; i++) {
        key_add_str(&h, pk_cuda_embedded[i].path);
        key_add_str(&h, pk_cuda_embedded[i].text);
    }
    for (int i = 0; i < nf; i++) key_add_str(&h, flags[i]);
    key_add_str(&h, version);
    snprintf(dir, sizeof dir, "%s/%016" PRIx64 "%016" PRIx64, root, h.a, h.b);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return pk_fail(k, PK_ERR_BACKEND, "pk_compile: cannot create '%s': %s", dir, strerror(errno));
    st = check_private_dir(k, dir);
    if (st != PK_OK) return st;
    snprintf(so_path, so_len, "%s/kernel.so", dir);

    struct stat sst;
    if (lstat(so_path, &sst) != 0 || !S_ISREG(sst.st_mode)) {
        st = write_sources(k, dir, cu);
        if (st != PK_OK) return st;
        snprintf(log, sizeof log, "%s/nvcc.log", dir);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) return pk_fail(k, PK_ERR_IO, "pk_compile: cannot write '%s'", log);
        char inc[PATH_CAP + 80], out[PATH_CAP + 96], src[PATH_CAP + 80];
        snprintf(inc, sizeof inc, "-I%s", dir);
        snprintf(out, sizeof out, "%s/kernel.so.tmp.%ld", dir, (long)getpid());
        snprintf(src, sizeof src, "%s/kernel.cu", dir);
        char *argv[32];
        int na = 0;
        argv[na++] = nvcc;
        for (int i = 0; i < nf; i++) argv[na++] = (char *)flags[i];
        argv[na++] = inc;
        argv[na++] = "-o";
        argv[na++] = out;
        argv[na++] = src;
        argv[na] = NULL;
        /* the command line, for a person rerunning it */
        snprintf(path, sizeof path, "%s/nvcc.cmd", dir);
        FILE *cmd = fopen(path, "w");
        if (cmd) {
            for (int i = 0; i < na; i++) fprintf(cmd, "%s%s", argv[i], i + 1 < na ? " " : "\n");
            fclose(cmd);
        }
        char label[256];
        snprintf(label, sizeof label, "compiling kernel.cu with nvcc (%d layers, %d tasks, %s)", k->graph.nlayers,
                 k->graph.ntasks, arch);
        int rc = run_program(argv, fd, label);
        close(fd);
        if (rc != 0) {
            unlink(out);
            char head[360];
            log_head(log, head, sizeof head);
            if (rc < 0) return pk_fail(k, PK_ERR_BACKEND, "pk_compile: could not run nvcc '%s': %s", nvcc, strerror(errno));
            return pk_fail(k, PK_ERR_BACKEND, "pk_compile: nvcc failed (exit %d) on %s; log %s:\n%s", rc, src, log, head);
        }
        if (rename(out, so_path) != 0) {
            unlink(out);
            return pk_fail(k, PK_ERR_IO, "pk_compile: cannot move the compiled kernel to '%s'", so_path);
        }
    }
    if (output_dir) {
        if (mkdir_p(output_dir, 0755) != 0)
            return pk_fail(k, PK_ERR_IO, "pk_compile: cannot create output directory '%s'", output_dir);
        st = write_sources(k, output_dir, cu);
        if (st != PK_OK) return st;
        snprintf(path, sizeof path, "%s/kernel.so", output_dir);
        if (copy_file(so_path, path) != 0) return pk_fail(k, PK_ERR_IO, "pk_compile: cannot write '%s'", path);
    }
    return PK_OK;
}
