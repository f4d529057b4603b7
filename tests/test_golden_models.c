// SPDX-License-Identifier: Apache-2.0
/* test_golden_models.c — pk's CPU backend against Hugging Face transformers.
 *
 * tests/data/golden/<name>/ holds a tiny random model (config.json, model.safetensors) and
 * golden.json made by scripts/make_goldens.py on the GPU machine: prompts, transformers' greedy
 * continuations and the bf16 logits at each prompt's last position. tests/data/golden/pk-tiny.json
 * holds the same for the shipped model in models/pk-tiny. All prompts of a model run as
 * concurrent requests (chunked prefill, paged KV); tokens must be identical, logits within bf16
 * tolerance: |pk - hf| <= 0.02 · max|hf| + 0.02 · |hf|, checked per element.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/bf16.h"
#include "pk.h"

#define MAX_PROMPTS 8

typedef struct golden {
    int n, max_new, vocab;
    int32_t *prompt[MAX_PROMPTS];
    int prompt_len[MAX_PROMPTS];
    int32_t *greedy[MAX_PROMPTS];
    int greedy_len[MAX_PROMPTS];
    float *logits[MAX_PROMPTS]; /* [vocab] or NULL */
    int decisive[MAX_PROMPTS];  /* greedy steps before the first top-1/top-2 gap under GAP_MIN */
} golden;

/* A bf16 logit near 16-32 moves in steps of 0.125: a smaller gap than two steps is a coin toss
 * between implementations that round differently, so tokens after it may differ. */
#define GAP_MIN 0.25

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static int32_t *int_array(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int32_t *p = malloc((size_t)(*n ? *n : 1) * sizeof *p);
    for (int i = 0; i < *n; i++) p[i] = (int32_t)cJSON_GetArrayItem(a, i)->valuedouble;
    return p;
}

static int load_golden(const char *path, golden *g) {
    memset(g, 0, sizeof *g);
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) return 0;
    const cJSON *prompts = cJSON_GetObjectItem(root, "prompts"), *greedy = cJSON_GetObjectItem(root, "greedy");
    const cJSON *logits = cJSON_GetObjectItem(root, "prompt_last_logits");
    const cJSON *max_new = cJSON_GetObjectItem(root, "max_new_tokens");
    const cJSON *gaps = cJSON_GetObjectItem(root, "top2_gaps"); /* per prompt, per step (bf16) */
    g->n = cJSON_GetArraySize(prompts);
    if (g->n > MAX_PROMPTS) g->n = MAX_PROMPTS;
    g->max_new = max_new ? (int)max_new->valuedouble : 0;
    for (int i = 0; i < g->n; i++) {
        g->prompt[i] = int_array(cJSON_GetArrayItem(prompts, i), &g->prompt_len[i]);
        g->greedy[i] = int_array(cJSON_GetArrayItem(greedy, i), &g->greedy_len[i]);
        g->decisive[i] = g->greedy_len[i];
        const cJSON *gp = gaps ? cJSON_GetArrayItem(gaps, i) : NULL;
        for (int j = 0; gp && j < cJSON_GetArraySize(gp); j++)
            if (cJSON_GetArrayItem(gp, j)->valuedouble < GAP_MIN) {
                g->decisive[i] = j;
                break;
            }
        const cJSON *l = logits ? cJSON_GetArrayItem(logits, i) : NULL;
        if (l) {
            g->vocab = cJSON_GetArraySize(l);
            g->logits[i] = malloc((size_t)g->vocab * sizeof(float));
            for (int v = 0; v < g->vocab; v++) g->logits[i][v] = (float)cJSON_GetArrayItem(l, v)->valuedouble;
        }
    }
    cJSON_Delete(root);
    return g->n > 0;
}

static void free_golden(golden *g) {
    for (int i = 0; i < g->n; i++) {
        free(g->prompt[i]);
        free(g->greedy[i]);
        free(g->logits[i]);
    }
}

typedef struct capture {
    pk_kernel *k;
    pk_tensor *logits;
    int vocab, T;
    pk_bf16 *buf;     /* [T, vocab] */
    float *first[MAX_PROMPTS]; /* logits that produced each request's first token */
} capture;

/* Runs at the step boundary (all workers idle): the logits tensor holds this step's rows. */
static void on_token(void *user, int request, int32_t token, int row) {
    capture *c = user;
    (void)token;
    if (c->first[request]) return;
    if (pk_tensor_read(c->k, c->logits, c->buf, (size_t)c->T * c->vocab * sizeof(pk_bf16)) != PK_OK) return;
    c->first[request] = malloc((size_t)c->vocab * sizeof(float));
    for (int v = 0; v < c->vocab; v++) c->first[request][v] = pk_bf16_to_f32(c->buf[(size_t)row * c->vocab + v]);
}

static void check_model(const char *name, const char *model_dir, const char *golden_path, int workers,
                        pk_sched_mode mode) {
    golden g;
    if (!load_golden(golden_path, &g)) {
        CHECK(0, "%s: cannot read %s", name, golden_path);
        return;
    }
    int longest = 0;
    for (int i = 0; i < g.n; i++)
        if (g.prompt_len[i] + g.greedy_len[i] > longest) longest = g.prompt_len[i] + g.greedy_len[i];
    pk_config cfg = pk_config_default();
    cfg.max_seq_length = longest + 1;
    cfg.max_requests = 2; /* fewer slots than prompts: admission is exercised */
    cfg.max_tokens_per_step = 16;
    cfg.page_size = 8;
    cfg.num_workers = workers;
    cfg.sched_mode = mode;
    cfg.eos_token_id = -1; /* goldens were made without EOS stopping */
    char err[512];
    pk_model *m = pk_model_load(model_dir, &cfg, err, sizeof err);
    CHECK(m != NULL, "%s: %s", name, err);
    if (!m) {
        free_golden(&g);
        return;
    }
    pk_kernel *k = pk_model_kernel(m);
    CHECK(pk_compile(k, NULL) == PK_OK, "%s: %s", name, pk_kernel_error(k));
    const pk_model_info *info = pk_model_get_info(m);
    capture cap = {.k = k, .logits = pk_model_logits(m), .vocab = info->vocab_size, .T = cfg.max_tokens_per_step};
    cap.buf = malloc((size_t)cap.T * cap.vocab * sizeof(pk_bf16));
    pk_request req[MAX_PROMPTS];
    int32_t *out[MAX_PROMPTS];
    for (int i = 0; i < g.n; i++) {
        out[i] = calloc((size_t)g.greedy_len[i] + 1, sizeof(int32_t));
        req[i] = (pk_request){.prompt = g.prompt[i], .prompt_len = g.prompt_len[i],
                              .max_new_tokens = g.greedy_len[i], .output = out[i]};
    }
    pk_status s = pk_run(k, req, g.n, on_token, &cap);
    CHECK(s == PK_OK, "%s: %s", name, pk_kernel_error(k));
    for (int i = 0; i < g.n && s == PK_OK; i++) {
        /* Tokens must agree up to the first step whose gap is not decisive (there either choice
         * is right, and after it the sequences may legitimately part). */
        int same = req[i].num_output == g.greedy_len[i] &&
                   memcmp(out[i], g.greedy[i], (size_t)g.decisive[i] * sizeof(int32_t)) == 0;
        CHECK(same, "%s (%d workers, mode %d) prompt %d: greedy tokens differ from transformers within the %d "
              "decisive steps", name, workers, (int)mode, i, g.decisive[i]);
        if (!same) {
            fprintf(stderr, "  pk:");
            for (int j = 0; j < req[i].num_output; j++) fprintf(stderr, " %d", out[i][j]);
            fprintf(stderr, "\n  hf:");
            for (int j = 0; j < g.greedy_len[i]; j++) fprintf(stderr, " %d", g.greedy[i][j]);
            fputc('\n', stderr);
        }
        if (workers == 1 && g.decisive[i] < g.greedy_len[i]) {
            int agree = 0;
            while (agree < g.greedy_len[i] && out[i][agree] == g.greedy[i][agree]) agree++;
            printf("  %s prompt %d: %d of %d tokens equal; step %d has a top-2 gap under %.2f\n", name, i, agree,
                   g.greedy_len[i], g.decisive[i], GAP_MIN);
        }
        if (!g.logits[i]) continue;
        CHECK(cap.first[i] != NULL, "%s prompt %d: the logits of its first token were not captured", name, i);
        if (!cap.first[i]) continue;
        CHECK(g.vocab == cap.vocab, "%s: golden logits have %d entries, vocab is %d", name, g.vocab, cap.vocab);
        if (g.vocab != cap.vocab) continue;
        float scale = 0, max_err = 0;
        for (int v = 0; v < g.vocab; v++) scale = fmaxf(scale, fabsf(g.logits[i][v]));
        int bad = 0;
        for (int v = 0; v < g.vocab; v++) {
            float e = fabsf(cap.first[i][v] - g.logits[i][v]);
            max_err = fmaxf(max_err, e);
            bad += !(e <= 0.02f * scale + 0.02f * fabsf(g.logits[i][v]));
        }
        CHECK(bad == 0, "%s prompt %d: %d logits outside bf16 tolerance (max err %.4f, max |logit| %.2f)", name, i, bad,
              max_err, scale);
        if (workers == 1) printf("  %s prompt %d: logits max |pk - hf| = %.4f (max |logit| %.2f)\n", name, i, max_err, scale);
    }
    for (int i = 0; i < g.n; i++) {
        free(out[i]);
        free(cap.first[i]);
    }
    free(cap.buf);
    pk_model_free(m);
    free_golden(&g);
}

int main(void) {
    const char *root = "tests/data/golden";
    DIR *d = opendir(root);
    CHECK(d != NULL, "cannot open %s (run from the repository root)", root);
    int models = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[1024], golden_path[1100];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        snprintf(golden_path, sizeof golden_path, "%s/golden.json", dir);
        FILE *f = fopen(golden_path, "r");
        if (!f) continue;
        fclose(f);
        models++;
        check_model(e->d_name, dir, golden_path, 1, PK_SCHED_STATIC);
        check_model(e->d_name, dir, golden_path, 3, PK_SCHED_DYNAMIC);
    }
    if (d) closedir(d);
    CHECK(models >= 4, "found %d golden models in %s, expected 4", models, root);
    FILE *f = fopen("tests/data/golden/pk-tiny.json", "r");
    CHECK(f != NULL, "tests/data/golden/pk-tiny.json is missing");
    if (f) {
        fclose(f);
        check_model("pk-tiny", "models/pk-tiny", "tests/data/golden/pk-tiny.json", 1, PK_SCHED_STATIC);
        check_model("pk-tiny", "models/pk-tiny", "tests/data/golden/pk-tiny.json", 2, PK_SCHED_DYNAMIC);
    }
    /* num_workers 0 ("auto") must size the grids from the resolved worker count: a builder that
     * read the unresolved 0 gave every layer a single task (one SM doing a whole layer). */
    pk_config c0 = pk_config_default();
    c0.num_workers = 0;
    c0.max_seq_length = 64;
    char err[512];
    pk_model *m = pk_model_load("models/pk-tiny", &c0, err, sizeof err);
    CHECK(m != NULL, "pk-tiny with num_workers 0: %s", err);
    if (m) {
        pk_model_info ri;
        CHECK(pk_model_read_info("models/pk-tiny", &ri, err, sizeof err) == PK_OK, "read_info: %s", err);
        const pk_model_info *li_ = pk_model_get_info(m);
        CHECK(ri.weight_bytes == -1 && ri.vocab_size == li_->vocab_size && ri.num_layers == li_->num_layers &&
                  ri.max_position_embeddings == li_->max_position_embeddings && ri.eos_token_id == li_->eos_token_id,
              "pk_model_read_info disagrees with pk_model_load");
        CHECK(pk_model_read_info("/nonexistent", &ri, err, sizeof err) != PK_OK && strstr(err, "/nonexistent"),
              "read_info of a missing directory: '%s'", err);
        pk_layer_info li;
        pk_kernel_layer(pk_model_kernel(m), 1, &li);
        CHECK(pk_kernel_config(pk_model_kernel(m))->num_workers >= 1 && li.grid >= 2,
              "auto workers: %d workers, layer %s has grid %d", pk_kernel_config(pk_model_kernel(m))->num_workers,
              li.name, li.grid);
        pk_model_free(m);
    }
    /* The attention's split over the KV length that pk picks (the graph is built without a GPU):
     * pk-tiny's D 64, G 2 fits 652 staged positions (540 with the weight ring), so even its longest context (512) stays
     * unsplit on the GPU; the config's own split and the CPU's default are kept. And the last layer: the LM head
     * and the argmax as one layer on the CPU, and on the GPU where the MLP's tiles stage whole (pk-tiny's do)
     * and the attention is unsplit (model.c's lm_argmax_auto); else the LM head then argmax_partial. */
    const struct { pk_backend be; int max_seq, splits, want; const char *last; } sp[] = {
        {PK_BACKEND_CUDA, 512, 0, 1, "rmsnorm_linear_argmax"},
        {PK_BACKEND_CUDA, 512, 3, 3, "argmax_partial"},
        {PK_BACKEND_CPU, 512, 0, 1, "rmsnorm_linear_argmax"},
        {PK_BACKEND_CPU, 512, 3, 3, "rmsnorm_linear_argmax"},
    };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        pk_config c = pk_config_default();
        c.backend = sp[i].be;
        c.num_workers = 132;
        c.max_seq_length = sp[i].max_seq;
        c.attention_kv_splits = sp[i].splits;
        m = pk_model_load("models/pk-tiny", &c, err, sizeof err);
        CHECK(m != NULL, "pk-tiny, backend %d: %s", (int)sp[i].be, err);
        if (!m) continue;
        CHECK(pk_model_get_info(m)->attention_kv_splits == sp[i].want, "backend %d, max_seq %d, kv_splits %d: split %d, want %d",
              (int)sp[i].be, sp[i].max_seq, sp[i].splits, pk_model_get_info(m)->attention_kv_splits, sp[i].want);
        pk_graph_stats st;
        pk_layer_info last = {0};
        CHECK(pk_kernel_stats(pk_model_kernel(m), &st) == PK_OK &&
                  pk_kernel_layer(pk_model_kernel(m), st.num_layers - 1, &last) == PK_OK && last.kind &&
                  strcmp(last.kind, sp[i].last) == 0,
              "backend %d, kv_splits %d: last layer %s, want %s", (int)sp[i].be, sp[i].splits,
              last.kind ? last.kind : "(none)", sp[i].last);
        pk_model_free(m);
    }
    return check_report("golden_models");
}
