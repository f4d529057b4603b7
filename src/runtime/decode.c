// SPDX-License-Identifier: Apache-2.0
/* decode.c — prepare_next_step on the host: validates requests, owns the decode state's memory,
 * and hands generated tokens to the caller. The step logic itself (admission with page
 * reservations, chunked prefill, EOS / length) is decode_step.h, shared with the CUDA kernel.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "runtime/runtime.h"

static int32_t *tensor_i32(pk_kernel *k, int id) { return (int32_t *)k->tensors[id]->data; }

_Static_assert(PK_STEP_FINISH_EOS == (int)PK_FINISH_EOS && PK_STEP_FINISH_LENGTH == (int)PK_FINISH_LENGTH &&
                   PK_STEP_FINISH_NONE == (int)PK_FINISH_NONE && PK_STEP_FINISH_CANCELLED == (int)PK_FINISH_CANCELLED,
               "decode_step.h finish reasons are pk.h's");

pk_status pk_decode_check_request(pk_kernel *k, const pk_request *r, const char *who) {
    const pk_config *c = &k->cfg;
    if (!r->prompt || !r->output) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has a NULL prompt or output", who);
    if (r->prompt_len < 1)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has an empty prompt (%d tokens)", who, r->prompt_len);
    if (r->prompt_len >= c->max_seq_length)
        return pk_fail(k, PK_ERR_LIMIT,
                       "%s has a prompt of %d tokens; max_seq_length %d leaves room for at most %d", who,
                       r->prompt_len, c->max_seq_length, c->max_seq_length - 1);
    if (r->max_new_tokens < 1)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has max_new_tokens %d", who, r->max_new_tokens);
    for (int j = 0; j < r->prompt_len; j++)
        if (r->prompt[j] < 0 || r->prompt[j] >= k->vocab_size)
            return pk_fail(k, PK_ERR_LIMIT, "%s, prompt token %d is id %d, outside the vocabulary [0, %d)", who, j,
                           (int)r->prompt[j], k->vocab_size);
    const pk_sampling *sp = &r->sampling;
    if (!(sp->temperature == 0 || (sp->temperature >= 1e-4f && sp->temperature <= 100)))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has temperature %g: 0 (greedy) or in [1e-4, 100]", who,
                       (double)sp->temperature);
    if (sp->top_k < 0) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has top_k %d: 0 (off) or more", who, sp->top_k);
    if (!(sp->top_p >= 0 && sp->top_p <= 1))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has top_p %g: in (0, 1], or 0 (off)", who, (double)sp->top_p);
    if (!(sp->min_p >= 0 && sp->min_p < 1))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s has min_p %g: in [0, 1)", who, (double)sp->min_p);
    if (sp->temperature > 0 && !k->backend->samples)
        return pk_fail(k, PK_ERR_UNSUPPORTED,
                       "%s has temperature %g: the %s backend does not sample yet (temperature 0 decodes greedily)",
                       who, (double)sp->temperature, k->backend->name);
    int64_t life = (int64_t)r->prompt_len + r->max_new_tokens;
    if (life > c->max_seq_length) life = c->max_seq_length;
    if (pk_step_pages_for((int)life, c->page_size) > c->num_pages)
        return pk_fail(k, PK_ERR_LIMIT, "%s needs %d KV pages of %d tokens; the cache has %d", who,
                       pk_step_pages_for((int)life, c->page_size), c->page_size, c->num_pages);
    return PK_OK;
}

void pk_decode_sample_words(const pk_sampling *sp, int32_t w[PK_SAMPLE_PARAMS]) {
    for (int j = 0; j < PK_SAMPLE_PARAMS; j++) w[j] = 0;
    if (sp->temperature <= 0) return; /* greedy */
    w[PK_SAMPLE_INV_TEMP] = pk_sample_bits_of(1.0f / sp->temperature);
    w[PK_SAMPLE_TOP_K] = sp->top_k;
    w[PK_SAMPLE_TOP_P] = pk_sample_bits_of(sp->top_p > 0 ? sp->top_p : 1.0f);
    w[PK_SAMPLE_MIN_P] = pk_sample_bits_of(sp->min_p);
    w[PK_SAMPLE_SEED_LO] = (int32_t)(uint32_t)sp->seed;
    w[PK_SAMPLE_SEED_HI] = (int32_t)(uint32_t)(sp->seed >> 32);
}

pk_status pk_decode_setup(pk_decode *d, pk_kernel *k, int emitted_cap) {
    memset(d, 0, sizeof *d);
    const pk_config *c = &k->cfg;
    d->k = k;
    pk_step_state *s = &d->s;
    s->R = c->max_requests;
    s->T = c->max_tokens_per_step;
    s->max_seq = c->max_seq_length;
    s->page_size = c->page_size;
    s->pages_per_req = k->pages_per_req;
    s->num_pages = c->num_pages;
    s->eos = c->eos_token_id;
    s->spec_len = c->spec_length;
    s->spec_ngram = c->spec_ngram;
    s->all_logits = c->all_logits;
    s->ngram_cap = pk_step_ngram_cap(c->spec_length, c->spec_ngram, c->max_seq_length);
    s->ngram_pos = s->ngram_cap ? calloc((size_t)s->R * (size_t)s->ngram_cap, sizeof *s->ngram_pos) : NULL;
    if (c->prefix_cache && k->backend->caches_prefixes) {
        const size_t P = (size_t)c->num_pages;
        int32_t cap = 2;
        while ((size_t)cap < 2 * P && cap < (1 << 30)) cap *= 2;
        s->table_cap = cap;
        s->page_ref = calloc(P, sizeof *s->page_ref);
        s->page_hash = calloc(P, sizeof *s->page_hash);
        s->page_tokens = malloc(P * (size_t)c->page_size * sizeof *s->page_tokens);
        s->lru = malloc(2 * (P + 1) * sizeof *s->lru);
        s->table = calloc((size_t)cap, sizeof *s->table);
        if (!s->page_ref || !s->page_hash || !s->page_tokens || !s->lru || !s->table) {
            pk_decode_free(d);
            return pk_fail(k, PK_ERR_NO_MEMORY, "out of memory for the prefix cache of %d pages", c->num_pages);
        }
    }
    s->tokens = malloc((size_t)s->R * (size_t)s->max_seq * sizeof *s->tokens);
    s->slots = calloc((size_t)s->R, sizeof *s->slots);
    s->free_pages = malloc((size_t)c->num_pages * sizeof *s->free_pages);
    d->emitted = calloc((size_t)emitted_cap, sizeof *d->emitted);
    if (!s->tokens || !s->slots || !s->free_pages || !d->emitted || (s->ngram_cap && !s->ngram_pos)) {
        pk_decode_free(d);
        return pk_fail(k, PK_ERR_NO_MEMORY, "out of memory for the decode state");
    }
    s->emitted = d->emitted;
    s->step_tokens = tensor_i32(k, k->t_step_tokens);
    s->token_pos = tensor_i32(k, k->t_token_pos);
    s->token_req = tensor_i32(k, k->t_token_req);
    s->page_table = tensor_i32(k, k->t_page_table);
    if (k->backend->samples) {
        s->sample_params = tensor_i32(k, k->t_sample_params);
        s->sample_slot = tensor_i32(k, k->t_sample_slot);
    }
    s->step_info = tensor_i32(k, k->t_step_info);
    s->step_output = tensor_i32(k, k->t_step_output);
    return PK_OK;
}

pk_status pk_decode_init(pk_decode *d, pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token,
                         void *user) {
    memset(d, 0, sizeof *d);
    if (n < 0 || (n > 0 && !reqs))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_run: %d requests at %p", n, (void *)reqs);
    for (int i = 0; i < n; i++) {
        reqs[i].num_output = 0;
        reqs[i].num_cached = 0;
        reqs[i].finish = PK_FINISH_NONE;
        char who[48];
        snprintf(who, sizeof who, "pk_run: request %d", i);
        pk_status st = pk_decode_check_request(k, &reqs[i], who);
        if (st != PK_OK) return st;
    }
    pk_status st = pk_decode_setup(d, k, k->cfg.max_requests * (1 + k->cfg.spec_length));
    if (st != PK_OK) return st;
    d->reqs = reqs;
    d->nreqs = n;
    d->on_token = on_token;
    d->user = user;
    d->sreqs = calloc(n > 0 ? (size_t)n : 1, sizeof *d->sreqs);
    if (!d->sreqs) {
        pk_decode_free(d);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory for the decode state");
    }
    for (int i = 0; i < n; i++) {
        d->sreqs[i].prompt = reqs[i].prompt;
        d->sreqs[i].prompt_len = reqs[i].prompt_len;
        d->sreqs[i].max_new_tokens = reqs[i].max_new_tokens;
        pk_decode_sample_words(&reqs[i].sampling, d->sreqs[i].sample);
    }
    pk_step_state *s = &d->s;
    s->reqs = d->sreqs;
    s->req_mask = -1; /* every id its own entry */
    s->nreqs = n;
    pk_step_reset(s);
    return PK_OK;
}

void pk_decode_free(pk_decode *d) {
    free(d->s.tokens);
    free(d->s.slots);
    free(d->s.free_pages);
    free(d->sreqs);
    free(d->emitted);
    free(d->s.ngram_pos);
    d->s.ngram_pos = NULL;
    free(d->s.page_ref);
    free(d->s.page_hash);
    free(d->s.page_tokens);
    free(d->s.lru);
    free(d->s.table);
    d->s.page_ref = NULL;
    d->s.page_hash = NULL;
    d->s.page_tokens = NULL;
    d->s.lru = d->s.table = NULL;
    d->s.tokens = NULL;
    d->s.slots = NULL;
    d->s.free_pages = NULL;
    d->sreqs = NULL;
    d->emitted = NULL;
}

void pk_decode_finish_step(pk_decode *d) {
    d->s.nemitted = 0;
    pk_step_finish(&d->s);
    if (d->sess) {
        pk_session_step_finished(d);
        return;
    }
    for (uint32_t i = 0; i < d->s.nemitted; i++) {
        const pk_step_token *e = &d->emitted[i];
        pk_request *r = &d->reqs[e->req];
        r->output[r->num_output++] = e->token;
        r->finish = (pk_finish_reason)d->sreqs[e->req].finish;
        if (d->on_token) d->on_token(d->user, e->req, e->token, e->row);
    }
}

int pk_decode_plan_step(pk_decode *d) {
    if (d->sess) return pk_session_step_plan(d);
    return !pk_cancel_requested(d->k) && pk_step_plan(&d->s);
}
