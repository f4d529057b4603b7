// SPDX-License-Identifier: Apache-2.0
/* check.h — the tiny assertion layer of pk's tests.
 * CHECK(cond, fmt, ...) counts a pass or prints the failure with file:line; a test program
 * ends with `return check_report("name");`, which prints "<name>: N passed, N failed" and
 * returns non-zero when anything failed. tests/run.sh sums the lines into the final total. */
#ifndef PK_TEST_CHECK_H
#define PK_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* SANITIZED: 1 in AddressSanitizer / ThreadSanitizer builds, whose tests run many times slower
 * (a test may then do less of what it repeats). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int check_passed_, check_failed_;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (cond) {                                                              \
            check_passed_++;                                                     \
        } else {                                                                 \
            check_failed_++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

static inline int check_report(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

/* The pk binary under $BUILD (default build) into path; counts a failure and returns 0 when it is
 * not built (the caller then ends with check_report). */
static inline int check_pk_bin(char *path, size_t n) {
    const char *build = getenv("BUILD");
    snprintf(path, n, "%s/pk", build && *build ? build : "build");
    if (access(path, X_OK) == 0) return 1;
    CHECK(0, "%s is not built", path);
    return 0;
}

/* Deterministic random numbers for tests (xorshift64*). */
static inline uint64_t check_rand_u64(uint64_t *s) {
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
/* Uniform in [-1, 1). */
static inline float check_rand_f32(uint64_t *s) {
    return (float)((check_rand_u64(s) >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

#endif
