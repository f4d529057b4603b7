// SPDX-License-Identifier: Apache-2.0
/* decode.c — prepare_next_step on the host: validates requests, owns the decode state's memory,
 * and hands generated tokens to the caller. The step logic itself (admission with page
 * reservations, chunked prefill, EOS / length) is decode_step.h, shared with the CUDA kernel.
 */
#include <string.h>

#include "runtime/runtime.h"

static int32_t *tensor_i32(pk_kernel *k, int id) { return (int32_t *)k->tensors[id]->data; }

_Static_assert(PK_STEP_FINISH_EOS == (int)PK_FINISH_EOS && PK_STEP_FINISH_LENGTH == (int)PK_FINISH_LENGTH &&
                   PK_STEP_FINISH_NONE == (int)PK_FINISH_NONE,
               "decode_step.h finish reasons are pk.h's");

pk_status pk_decode_init(pk_decode *d, pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token,
                         void *user) {
    memset(d, 0, sizeof *d);
    const pk_config *c = &k->cfg;
    if (n < 0 || (n > 0 && !reqs))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_run: %d requests at %p", n, (void *)reqs);
    for (int i = 0; i < n; i++) {
        pk_request *r = &reqs[i];
        r->num_output = 0;
        r->finish = PK_FINISH_NONE;
        if (!r->prompt || !r->output)
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_run: request %d has a NULL prompt or output", i);
        if (r->prompt_len < 1)
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_run: request %d has an empty prompt (%d tokens)", i,
                           r->prompt_len);
        if (r->prompt_len >= c->max_seq_length)
            return pk_fail(k, PK_ERR_LIMIT,
                           "pk_run: request %d has a prompt of %d tokens; max_seq_length %d leaves room "
                           "for at most %d",
                           i, r->prompt_len, c->max_seq_length, c->max_seq_length - 1);
        if (r->max_new_tokens < 1)
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_run: request %d has max_new_tokens %d", i,
                           r->max_new_tokens);
        for (int j = 0; j < r->prompt_len; j++)
            if (r->prompt[j] < 0 || r->prompt[j] >= k->vocab_size)
                return pk_fail(k, PK_ERR_LIMIT, "pk_run: request %d, prompt token %d is id %d, outside the vocabulary [0, %d)",
                               i, j, (int)r->prompt[j], k->vocab_size);
        int64_t life = (int64_t)r->prompt_len + r->max_new_tokens;
        if (life > c->max_seq_length) life = c->max_seq_length;
        if (pk_step_pages_for((int)life, c->page_size) > c->num_pages)
            return pk_fail(k, PK_ERR_LIMIT, "pk_run: request %d needs %d KV pages of %d tokens; the cache has %d",
                           i, pk_step_pages_for((int)life, c->page_size), c->page_size, c->num_pages);
    }
    d->k = k;
    d->reqs = reqs;
    d->nreqs = n;
    d->on_token = on_token;
    d->user = user;
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
    s->ngram_cap = pk_step_ngram_cap(c->spec_length, c->spec_ngram, c->max_seq_length);
    s->ngram_pos = s->ngram_cap ? calloc((size_t)s->R * (size_t)s->ngram_cap, sizeof *s->ngram_pos) : NULL;
    s->nreqs = n;
    s->tokens = malloc((size_t)s->R * (size_t)s->max_seq * sizeof *s->tokens);
    s->slots = calloc((size_t)s->R, sizeof *s->slots);
    s->free_pages = malloc((size_t)c->num_pages * sizeof *s->free_pages);
    d->sreqs = calloc(n > 0 ? (size_t)n : 1, sizeof *d->sreqs);
    d->emitted = calloc((size_t)s->R * (size_t)(1 + c->spec_length), sizeof *d->emitted); /* one step's */
    if (!s->tokens || !s->slots || !s->free_pages || !d->sreqs || !d->emitted || (s->ngram_cap && !s->ngram_pos)) {
        pk_decode_free(d);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory for the decode state");
    }
    for (int i = 0; i < n; i++) {
        d->sreqs[i].prompt = reqs[i].prompt;
        d->sreqs[i].prompt_len = reqs[i].prompt_len;
        d->sreqs[i].max_new_tokens = reqs[i].max_new_tokens;
    }
    s->reqs = d->sreqs;
    s->emitted = d->emitted;
    s->step_tokens = tensor_i32(k, k->t_step_tokens);
    s->token_pos = tensor_i32(k, k->t_token_pos);
    s->token_req = tensor_i32(k, k->t_token_req);
    s->page_table = tensor_i32(k, k->t_page_table);
    s->step_info = tensor_i32(k, k->t_step_info);
    s->step_output = tensor_i32(k, k->t_step_output);
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
    d->s.tokens = NULL;
    d->s.slots = NULL;
    d->s.free_pages = NULL;
    d->sreqs = NULL;
    d->emitted = NULL;
}

void pk_decode_finish_step(pk_decode *d) {
    d->s.nemitted = 0;
    pk_step_finish(&d->s);
    for (uint32_t i = 0; i < d->s.nemitted; i++) {
        const pk_step_token *e = &d->emitted[i];
        pk_request *r = &d->reqs[e->req];
        r->output[r->num_output++] = e->token;
        r->finish = (pk_finish_reason)d->sreqs[e->req].finish;
        if (d->on_token) d->on_token(d->user, e->req, e->token, e->row);
    }
}

int pk_decode_plan_step(pk_decode *d) { return pk_step_plan(&d->s); }
