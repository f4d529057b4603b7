// SPDX-License-Identifier: Apache-2.0
/* standalone_main.c — runs a libFuzzer target without libFuzzer: each file named on the
 * command line (or every file in a named directory) is passed once to LLVMFuzzerTestOneInput.
 * Lets any C compiler (gcc -fsanitize=address,undefined) replay the seed corpus and crash
 * reproducers:  gcc ... fuzz/fuzz_config.c fuzz/standalone_main.c ... && ./a.out corpus/. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (!bigger) { free(buf); buf = NULL; break; }
        buf = bigger;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "out of memory reading %s\n", path);
        return 1;
    }
    /* an exact-size copy, so ASan catches reads one past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return 1; }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv) {
    int inputs = 0, failures = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *de;
            while (d && (de = readdir(d)) != NULL) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
                if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
                failures += run_file(path);
                inputs++;
            }
            if (d) closedir(d);
        } else {
            failures += run_file(argv[i]);
            inputs++;
        }
    }
    printf("%s: ran %d inputs, %d unreadable\n", argv[0], inputs, failures);
    return failures ? 1 : 0;
}
