/* decode.c — prepare_next_step: requests, chunked prefill, the paged KV cache.
 *
 * A step carries up to T rows: first one row for every decoding slot, then prefill chunks of the
 * slots still reading their prompt, in slot order. A request is admitted only when the pool can
 * reserve every page its whole life may need (prompt + max_new_tokens, capped at max_seq_length),
 * so running requests can never starve each other of pages. Tokens come back per row: a slot
 * samples from the row of its last token when that token is its newest one.
 */
#include <string.h>

#include "runtime/runtime.h"

pk_status pk_runtime_create_state_tensors(pk_kernel *k) {
    const pk_config *c = &k->cfg;
    int64_t T = c->max_tokens_per_step;
    k->pages_per_req = (c->max_seq_length + c->page_size - 1) / c->page_size;
    struct {
        const char *name;
        int ndim;
        int64_t dims[2];
        int *id;
    } spec[] = {
        {"pk.step_tokens", 1, {T, 0}, &k->t_step_tokens},
        {"pk.step_output", 1, {T, 0}, &k->t_step_output},
        {"pk.step_info", 1, {PK_STEP_INFO_LEN, 0}, &k->t_step_info},
        {"pk.token_pos", 1, {T, 0}, &k->t_token_pos},
        {"pk.token_req", 1, {T, 0}, &k->t_token_req},
        {"pk.page_table", 2, {c->max_requests, k->pages_per_req}, &k->t_page_table},
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        pk_tensor *t = pk_new_tensor(k, spec[i].name, PK_DTYPE_INT32, spec[i].ndim, spec[i].dims, PK_IO_LOCAL);
        if (!t) return k->status;
        *spec[i].id = t->id;
    }
    return PK_OK;
}

static int32_t *tensor_i32(pk_kernel *k, int id) { return (int32_t *)k->tensors[id]->data; }

static int pages_for(int tokens, int page_size) { return (tokens + page_size - 1) / page_size; }

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
        if (pages_for((int)life, c->page_size) > c->num_pages)
            return pk_fail(k, PK_ERR_LIMIT, "pk_run: request %d needs %d KV pages of %d tokens; the cache has %d",
                           i, pages_for((int)life, c->page_size), c->page_size, c->num_pages);
    }
    d->k = k;
    d->reqs = reqs;
    d->nreqs = n;
    d->on_token = on_token;
    d->user = user;
    d->R = c->max_requests;
    d->T = c->max_tokens_per_step;
    d->max_seq = c->max_seq_length;
    d->page_size = c->page_size;
    d->pages_per_req = k->pages_per_req;
    d->tokens = malloc((size_t)d->R * (size_t)d->max_seq * sizeof *d->tokens);
    d->slots = calloc((size_t)d->R, sizeof *d->slots);
    d->free_pages = malloc((size_t)c->num_pages * sizeof *d->free_pages);
    if (!d->tokens || !d->slots || !d->free_pages) {
        pk_decode_free(d);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory for the decode state");
    }
    for (int i = 0; i < d->R; i++) d->slots[i].req = -1;
    d->nfree = d->unreserved = c->num_pages;
    for (int p = 0; p < c->num_pages; p++) d->free_pages[p] = c->num_pages - 1 - p;
    d->step_tokens = tensor_i32(k, k->t_step_tokens);
    d->token_pos = tensor_i32(k, k->t_token_pos);
    d->token_req = tensor_i32(k, k->t_token_req);
    d->page_table = tensor_i32(k, k->t_page_table);
    d->step_info = tensor_i32(k, k->t_step_info);
    d->step_output = tensor_i32(k, k->t_step_output);
    return PK_OK;
}

void pk_decode_free(pk_decode *d) {
    free(d->tokens);
    free(d->slots);
    free(d->free_pages);
    d->tokens = NULL;
    d->slots = NULL;
    d->free_pages = NULL;
}

static void retire(pk_decode *d, pk_slot *s, pk_finish_reason why) {
    d->reqs[s->req].finish = why;
    int32_t *pt = d->page_table + (size_t)(s - d->slots) * (size_t)d->pages_per_req;
    for (int p = 0; p < s->npages; p++) d->free_pages[d->nfree++] = pt[p];
    d->unreserved += s->reserved;
    s->req = -1;
    s->npages = s->reserved = 0;
    d->ndone++;
}

void pk_decode_finish_step(pk_decode *d) {
    int64_t eos = d->k->cfg.eos_token_id;
    for (int i = 0; i < d->R; i++) {
        pk_slot *s = &d->slots[i];
        if (s->req < 0 || s->sample_row < 0) continue;
        pk_request *r = &d->reqs[s->req];
        int32_t tok = d->step_output[s->sample_row];
        d->tokens[(size_t)i * d->max_seq + s->len++] = tok;
        r->output[r->num_output++] = tok;
        if (d->on_token) d->on_token(d->user, s->req, tok, s->sample_row);
        if (eos >= 0 && tok == eos)
            retire(d, s, PK_FINISH_EOS);
        else if (r->num_output >= r->max_new_tokens || s->len >= d->max_seq)
            retire(d, s, PK_FINISH_LENGTH);
    }
}

static void admit(pk_decode *d) {
    for (int i = 0; i < d->R && d->next_req < d->nreqs; i++) {
        pk_slot *s = &d->slots[i];
        if (s->req >= 0) continue;
        pk_request *r = &d->reqs[d->next_req];
        int life = r->prompt_len + r->max_new_tokens;
        if (life > d->max_seq) life = d->max_seq;
        int need = pages_for(life, d->page_size);
        if (need > d->unreserved) return; /* wait, in order, for pages to come back */
        d->unreserved -= need;
        s->req = d->next_req++;
        s->reserved = need;
        s->len = r->prompt_len;
        s->cached = 0;
        s->npages = 0;
        memcpy(d->tokens + (size_t)i * d->max_seq, r->prompt, (size_t)r->prompt_len * sizeof(int32_t));
    }
}

/* Gives slot i the rows for tokens [s->cached, s->cached + n), taking pages as needed. */
static void place_rows(pk_decode *d, int i, int n, int *row) {
    pk_slot *s = &d->slots[i];
    int32_t *pt = d->page_table + (size_t)i * (size_t)d->pages_per_req;
    while (s->npages < pages_for(s->cached + n, d->page_size)) {
        PK_ASSERT(d->nfree > 0 && s->npages < s->reserved);
        pt[s->npages++] = d->free_pages[--d->nfree];
    }
    for (int j = 0; j < n; j++) {
        int pos = s->cached + j;
        d->step_tokens[*row] = d->tokens[(size_t)i * d->max_seq + pos];
        d->token_pos[*row] = pos;
        d->token_req[*row] = i;
        (*row)++;
    }
    s->cached += n;
    s->sample_row = s->cached == s->len ? *row - 1 : -1;
}

int pk_decode_plan_step(pk_decode *d) {
    admit(d);
    int row = 0;
    for (int i = 0; i < d->R; i++) d->slots[i].sample_row = -1;
    /* Decoding slots first: one row each (T >= R, so they always fit). */
    for (int i = 0; i < d->R; i++) {
        pk_slot *s = &d->slots[i];
        if (s->req >= 0 && s->len - s->cached == 1 && s->cached > 0) place_rows(d, i, 1, &row);
    }
    for (int i = 0; i < d->R && row < d->T; i++) {
        pk_slot *s = &d->slots[i];
        if (s->req < 0 || s->sample_row >= 0 || s->cached == s->len) continue;
        if (s->cached > 0 && s->len - s->cached == 1) continue; /* placed above */
        int n = s->len - s->cached;
        if (n > d->T - row) n = d->T - row;
        place_rows(d, i, n, &row);
    }
    if (row == 0) {
        PK_ASSERT(d->ndone == d->nreqs); /* reservations make a stall impossible */
        return 0;
    }
    /* Unused rows keep in-range values so every kernel can read them safely. */
    for (int r = row; r < d->T; r++) d->step_tokens[r] = d->token_pos[r] = d->token_req[r] = 0;
    d->step++;
    d->step_info[PK_STEP_INFO_NUM_TOKENS] = row;
    d->step_info[PK_STEP_INFO_STEP] = (int32_t)d->step;
    return 1;
}
