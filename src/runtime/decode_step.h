// SPDX-License-Identifier: Apache-2.0
/* decode_step.h — prepare_next_step's logic, shared by both backends: the host runs it for the
 * CPU backend (decode.c) and the CUDA persistent kernel runs the same code on the device (the
 * header is embedded into kernel.cu and compiled by nvcc).
 *
 * A step carries up to T rows: first one row for every decoding slot, then prefill chunks of the
 * slots still reading their prompt, in slot order. A request is admitted only when the pool can
 * reserve every page its whole life may need (prompt + max_new_tokens, capped at max_seq_length),
 * so running requests never starve each other of pages. Tokens come back per row: a slot samples
 * from the row of its last token when that token is its newest one.
 *
 * Plain C over plain arrays (host or device pointers alike): no allocation, no I/O, one thread.
 */
#ifndef PK_DECODE_STEP_H
#define PK_DECODE_STEP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/sample.h"
#include "pk_abi.h"

#ifdef __CUDACC__
#define PK_HD static inline __host__ __device__
#else
#define PK_HD static inline
#endif

/* A broken invariant of this file (a bug in pk, never user input). */
#if defined(__CUDA_ARCH__)
#define PK_STEP_ASSERT(cond) \
    do {                     \
        if (!(cond)) __trap(); \
    } while (0)
#else
#define PK_STEP_ASSERT(cond)                                                                   \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "pk: internal error at %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                           \
        }                                                                                      \
    } while (0)
#endif

/* pk_finish_reason of pk.h (checked equal in decode.c). */
enum { PK_STEP_FINISH_NONE = 0, PK_STEP_FINISH_EOS = 1, PK_STEP_FINISH_LENGTH = 2, PK_STEP_FINISH_CANCELLED = 3 };

typedef struct pk_slot {
    int32_t req;        /* the request's id, -1 when free */
    int32_t ent;        /* its entry in reqs (pk_step_req_of at admission) */
    int32_t len;        /* tokens known: prompt + generated */
    int32_t cached;     /* tokens whose K/V are in the cache */
    int32_t npages;     /* pages held */
    int32_t reserved;   /* pages reserved for the request's whole life */
    int32_t sample_row; /* row of this step whose output is the next token, -1 if none */
    int32_t ndraft;     /* draft tokens verified this step: rows sample_row + 1 .. + ndraft */
    int32_t indexed;    /* speculation: n-grams ending before this position are in the index */
    int32_t shared;     /* prefix cache: the first pages, found in the cache at admission */
    int32_t hashed;     /* prefix cache: pages offered to the cache so far */
    uint64_t chain;     /* prefix cache: the chain hash of the pages offered */
} pk_slot;

/* One request as the step logic sees it (validated by pk_decode_init). */
typedef struct pk_step_req {
    const int32_t *prompt;  /* [prompt_len] */
    int32_t prompt_len;
    int32_t max_new_tokens;
    int32_t num_output;     /* out: tokens generated so far */
    int32_t finish;         /* out: pk_finish_reason */
    int32_t num_cached;     /* out: prompt tokens whose K/V came from the prefix cache */
    int32_t sample[PK_SAMPLE_PARAMS]; /* kernels/sample.h's words; inverse temperature 0: greedy */
} pk_step_req;

/* A generated token, in the order prepare_next_step produced it; finish: the request ended with
 * it (PK_STEP_FINISH_*); ent: the request's entry in reqs. A session's cancel emits a record
 * without a token (token and row -1). */
typedef struct pk_step_token {
    int32_t req, token, row, finish, ent;
} pk_step_token;

/* Step timing (pk_run_step_times), optional. rec[0].ns: when step 1 was released. For step
 * i >= 1, rec[i].rows and .prompt_rows are what pk_step_plan gave it (prompt_rows > 0: a prefill
 * step), and rec[i].ns is when it ended: the runtime's clock (CLOCK_MONOTONIC on the CPU,
 * %globaltimer on the GPU) read at the start of the prepare_next_step that follows it. */
typedef struct pk_step_rec {
    uint64_t ns;
    int32_t rows, prompt_rows;
} pk_step_rec;

typedef struct pk_step_state {
    /* config */
    int32_t R, T, max_seq, page_size, pages_per_req, num_pages;
    int64_t eos;               /* -1: none */
    int32_t spec_len, spec_ngram; /* prompt-lookup speculation (pk_config): draft tokens, n-gram */
    int32_t all_logits;        /* pk_config.all_logits: the LM head's rows start at 0, not at the
                                * first row that draws a token (step_info's FIRST_SAMPLE) */
    /* speculation's n-gram index, [R][ngram_cap] (ngram_cap a power of two; NULL when off): an
     * n-gram's hash -> 1 + the position its latest occurrence ends at (0: none) */
    int32_t *ngram_pos;
    int32_t ngram_cap;
    /* progress: requests are ids 0, 1, ... in the order they are admitted. A waiting id's entry
     * is reqs[order[id & req_mask]] (a resident session's: the host puts each request in a free
     * entry and says which in order[], a ring of the ids not yet admitted), or without order
     * reqs[id & req_mask] (pk_run: every id its own, req_mask all ones); an admitted one's is its
     * slot's ent */
    int32_t nreqs, next_req, ndone, req_mask;
    const int32_t *order;      /* [req_mask + 1] or NULL */
    int32_t nfree, unreserved; /* free pages; pages no admitted request has reserved */
    int64_t step;              /* steps planned so far */
    pk_step_req *reqs;         /* [nreqs], or the session's ring [req_mask + 1] */
    int32_t *tokens;           /* [R, max_seq]: every slot's tokens */
    pk_slot *slots;            /* [R] */
    int32_t *free_pages;       /* [num_pages]: stack of free page ids */
    /* the step tensors (pk.step_tokens, ... of pk_runtime_create_state_tensors) */
    int32_t *step_tokens;      /* [T] */
    int32_t *token_pos;        /* [T] */
    int32_t *token_req;        /* [T] */
    int32_t *page_table;       /* [R, pages_per_req] */
    int32_t *sample_params;    /* [R, PK_SAMPLE_PARAMS]: each slot's request's (NULL: greedy only) */
    int32_t *sample_slot;      /* [T]: 1 + the slot of a row whose token is drawn, else 0 */
    int32_t *step_info;        /* [PK_STEP_INFO_LEN] */
    const int32_t *step_output; /* [T] */
    /* pk_step_finish appends here; the caller consumes (and may reset nemitted) */
    pk_step_token *emitted;    /* [capacity: at least R per step not consumed] */
    uint32_t nemitted;
    int32_t prompt_rows;       /* of the planned step's rows, those holding prompt tokens */
    int32_t rows;              /* rows of the step tensors that may hold a non-zero value: the
                                * planned step's (T after a reset: anything) */
    /* The prefix cache (page_ref NULL: off). A page all of whose page_size positions hold K/V is
     * offered to it under the chain hash of its tokens and every token before them; a request
     * admitted later takes the pages of its prompt's longest cached prefix (whole pages, leaving
     * at least its last prompt token to compute) instead of computing them. A page is free, held
     * (page_ref > 0 slots have it in their page table) or cached and unheld: evictable, in least
     * recently released order, taken back when a free page is wanted and none is left. */
    int32_t *page_ref;         /* [num_pages] */
    uint64_t *page_hash;       /* [num_pages]: its chain hash; 0: not in the cache */
    int32_t *page_tokens;      /* [num_pages, page_size]: a cached page's tokens (checked on a hit) */
    int32_t *lru;              /* [2 (num_pages + 1)]: prev, next of the evictable list; sentinel num_pages */
    int32_t *table;            /* [table_cap]: 1 + a cached page, 0 empty (linear probing) */
    int32_t table_cap;         /* a power of two >= 2 num_pages */
    int32_t nevictable;
    /* step records (NULL: none): rec[0 .. rec_cap], steps past rec_cap are not recorded */
    pk_step_rec *rec;
    int64_t rec_cap;
    /* speculation's counts over the run: draft tokens verified, and those kept */
    int64_t drafted, accepted;
} pk_step_state;

PK_HD int pk_step_pages_for(int tokens, int page_size) { return (tokens + page_size - 1) / page_size; }

/* The entry of a request not admitted yet (waiting); an admitted one's: pk_step_slot_req. */
PK_HD int32_t pk_step_ent_of(const pk_step_state *s, int32_t id) {
    return s->order ? s->order[id & s->req_mask] : id & s->req_mask;
}
PK_HD pk_step_req *pk_step_req_of(const pk_step_state *s, int32_t id) { return &s->reqs[pk_step_ent_of(s, id)]; }
PK_HD pk_step_req *pk_step_slot_req(const pk_step_state *s, const pk_slot *sl) { return &s->reqs[sl->ent]; }

/* Appends a record of request id to emitted. */
PK_HD pk_step_token *pk_step_emit(pk_step_state *s, int32_t id, int32_t ent, int32_t token, int32_t row) {
    pk_step_token *e = &s->emitted[s->nemitted++];
    e->req = id;
    e->token = token;
    e->row = row;
    e->finish = PK_STEP_FINISH_NONE;
    e->ent = ent;
    return e;
}

/* Entries of a slot's n-gram index: a power of two at least twice the n-grams a request can add
 * (every position, each n-gram size), so that collisions stay rare; 0 with speculation off. */
PK_HD int32_t pk_step_ngram_cap(int spec_len, int spec_ngram, int max_seq) {
    if (spec_len <= 0) return 0;
    const int64_t need = 2 * (int64_t)max_seq * (spec_ngram > 0 ? spec_ngram : 3);
    int32_t cap = 64;
    while (cap < need) cap *= 2;
    return cap;
}

/* Every slot free, every page free. The config fields and arrays must be set. */
PK_HD void pk_step_reset(pk_step_state *s) {
    s->next_req = s->ndone = 0;
    s->step = 0;
    s->nemitted = 0;
    s->prompt_rows = 0;
    s->rows = s->T; /* the step tensors' rows hold whatever they held: the first plan zeroes them */
    s->drafted = s->accepted = 0;
    for (int i = 0; i < s->R; i++) {
        pk_slot *sl = &s->slots[i];
        sl->req = -1;
        sl->ent = 0;
        sl->len = sl->cached = sl->npages = sl->reserved = 0;
        sl->sample_row = -1;
        sl->ndraft = sl->indexed = sl->shared = sl->hashed = 0;
        sl->chain = 0;
    }
    for (int i = 0; i < s->R * s->pages_per_req; i++) s->page_table[i] = 0;
    s->nfree = s->unreserved = s->num_pages;
    for (int p = 0; p < s->num_pages; p++) s->free_pages[p] = s->num_pages - 1 - p;
    s->nevictable = 0;
    if (s->page_ref) {
        for (int p = 0; p < s->num_pages; p++) s->page_ref[p] = 0, s->page_hash[p] = 0;
        s->lru[s->num_pages] = s->lru[s->num_pages + 1 + s->num_pages] = s->num_pages; /* empty: the sentinel */
        for (int i = 0; i < s->table_cap; i++) s->table[i] = 0;
    }
    for (int i = 0; i < s->nreqs; i++) {
        pk_step_req_of(s, i)->num_output = 0;
        pk_step_req_of(s, i)->finish = PK_STEP_FINISH_NONE;
    }
}

/* ---- pages and the prefix cache ----
 * s->unreserved counts the pages a new reservation may take: free and evictable ones, less what
 * admitted requests reserved and have not taken yet. */

/* The evictable list: lru[p] is p's prev, lru[num_pages + 1 + p] its next. */
PK_HD void pk_step_lru_unlink(pk_step_state *s, int32_t p) {
    int32_t *prev = s->lru, *next = s->lru + s->num_pages + 1;
    next[prev[p]] = next[p];
    prev[next[p]] = prev[p];
    s->nevictable--;
}

PK_HD void pk_step_lru_append(pk_step_state *s, int32_t p) {
    int32_t *prev = s->lru, *next = s->lru + s->num_pages + 1;
    const int32_t z = s->num_pages;
    prev[p] = prev[z];
    next[p] = z;
    next[prev[z]] = p;
    prev[z] = p;
    s->nevictable++;
}

PK_HD uint64_t pk_step_chain(uint64_t h, const int32_t *t, int n) {
    for (int j = 0; j < n; j++) { /* splitmix64's finalizer over each token, chained */
        uint64_t z = h ^ ((uint64_t)(uint32_t)t[j] + 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        h = z ^ (z >> 31);
    }
    return h ? h : 1; /* 0 means "not cached" */
}

/* The cached page of chain hash h holding tokens t[0 .. page_size), or -1; *at: its table index,
 * else the empty one the probe ended at. */
PK_HD int32_t pk_step_cache_find(const pk_step_state *s, uint64_t h, const int32_t *t, int32_t *at) {
    const uint32_t mask = (uint32_t)s->table_cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        const int32_t e = s->table[i] - 1;
        *at = (int32_t)i;
        if (e < 0) return -1;
        if (s->page_hash[e] != h) continue;
        const int32_t *pt = s->page_tokens + (int64_t)e * s->page_size;
        int same = 1;
        for (int j = 0; j < s->page_size && same; j++) same = pt[j] == t[j];
        if (same) return e;
    }
}

/* Takes page p out of the table (backward-shift deletion: the probes of the others stay whole). */
PK_HD void pk_step_cache_remove(pk_step_state *s, int32_t p) {
    const uint32_t mask = (uint32_t)s->table_cap - 1;
    uint32_t i = (uint32_t)s->page_hash[p] & mask;
    while (s->table[i] != p + 1) i = (i + 1) & mask;
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        const int32_t e = s->table[j] - 1;
        if (e < 0) break;
        const uint32_t home = (uint32_t)s->page_hash[e] & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) { /* e may move back to the hole at i */
            s->table[i] = e + 1;
            i = j;
        }
    }
    s->table[i] = 0;
    s->page_hash[p] = 0;
}

/* A page for a reservation: a free one, else the least recently released cached one. */
PK_HD int32_t pk_step_page_take(pk_step_state *s) {
    int32_t p;
    if (s->nfree > 0) {
        p = s->free_pages[--s->nfree];
    } else {
        PK_STEP_ASSERT(s->page_ref && s->nevictable > 0);
        p = s->lru[s->num_pages + 1 + s->num_pages]; /* the sentinel's next: the oldest */
        pk_step_lru_unlink(s, p);
        pk_step_cache_remove(s, p);
    }
    if (s->page_ref) s->page_ref[p] = 1;
    return p;
}

/* A slot lets go of page p: free, or evictable when cached, once no slot holds it. */
PK_HD void pk_step_page_release(pk_step_state *s, int32_t p) {
    if (s->page_ref && --s->page_ref[p] > 0) return;
    if (s->page_ref && s->page_hash[p]) pk_step_lru_append(s, p);
    else s->free_pages[s->nfree++] = p;
    s->unreserved++;
}

/* Offers slot i's pages whose positions all hold K/V (below cached) to the cache; a page whose
 * content is cached already (another request computed it too) stays out. */
PK_HD void pk_step_cache_offer(pk_step_state *s, int i) {
    pk_slot *sl = &s->slots[i];
    const int32_t *pt = s->page_table + (int64_t)i * s->pages_per_req;
    const int32_t *toks = s->tokens + (int64_t)i * s->max_seq;
    for (; sl->hashed < sl->cached / s->page_size; sl->hashed++) {
        const int32_t *t = toks + (int64_t)sl->hashed * s->page_size;
        sl->chain = pk_step_chain(sl->chain, t, s->page_size);
        int32_t at;
        const int32_t p = pt[sl->hashed];
        if (s->page_hash[p] || pk_step_cache_find(s, sl->chain, t, &at) >= 0) continue;
        s->page_hash[p] = sl->chain;
        for (int j = 0; j < s->page_size; j++) s->page_tokens[(int64_t)p * s->page_size + j] = t[j];
        s->table[at] = p + 1;
    }
}

PK_HD void pk_step_retire(pk_step_state *s, pk_slot *sl, int32_t why) {
    pk_step_slot_req(s, sl)->finish = why;
    const int i = (int)(sl - s->slots);
    if (s->page_ref) pk_step_cache_offer(s, i);
    int32_t *pt = s->page_table + (int64_t)i * s->pages_per_req;
    for (int p = 0; p < sl->npages; p++) pk_step_page_release(s, pt[p]);
    s->unreserved += sl->reserved - (sl->npages - sl->shared); /* reserved and never taken */
    sl->req = -1;
    sl->npages = sl->reserved = sl->shared = sl->hashed = 0;
    sl->chain = 0;
    s->ndone++;
}

/* A slot that verified drafts (ndraft > 0): its rows' outputs o_0 .. o_ndraft in order; o_j is
 * kept when every draft before it equalled the output before it (draft j sits at tokens[len + j],
 * written by pk_step_draft). The cache then holds valid K / V up to the new len - 1. Stops at EOS
 * and at the length limits as one token at a time would. */
PK_HD void pk_step_finish_drafts(pk_step_state *s, int i) {
    pk_slot *sl = &s->slots[i];
    const int32_t req = sl->req, len0 = sl->len, nd = sl->ndraft, row0 = sl->sample_row;
    int32_t *toks = s->tokens + (int64_t)i * s->max_seq;
    s->drafted += nd;
    for (int j = 0; j <= nd; j++) {
        const int32_t tok = s->step_output[row0 + j], draft = j < nd ? toks[len0 + j] : -1;
        toks[sl->len] = tok;
        sl->len++;
        sl->cached = sl->len - 1;
        pk_step_req *r = pk_step_slot_req(s, sl);
        const int32_t num_output = ++r->num_output;
        pk_step_token *e = pk_step_emit(s, req, sl->ent, tok, row0 + j);
        if (s->eos >= 0 && tok == s->eos) {
            pk_step_retire(s, sl, e->finish = PK_STEP_FINISH_EOS);
            return;
        }
        if (num_output >= r->max_new_tokens || sl->len >= s->max_seq) {
            pk_step_retire(s, sl, e->finish = PK_STEP_FINISH_LENGTH);
            return;
        }
        if (j == nd || tok != draft) return; /* the next draft was not the model's choice */
        s->accepted++;
    }
}

/* Reads step_output for the rows that sample, appends tokens (to the slot and to emitted),
 * retires finished requests. A slot's loads come before its stores (the slot, then its request
 * and its token together): on the GPU each load after a store to memory it might alias waited a
 * round trip to L2 of its own (bench/step_advance.cu: with the plan's clearing below, 4,130 ->
 * 2,450 cycles per decode step). */
PK_HD void pk_step_finish(pk_step_state *s) {
    for (int i = 0; i < s->R; i++) {
        const pk_slot sl = s->slots[i];
        if (sl.req < 0 || sl.sample_row < 0) continue;
        if (sl.ndraft > 0) {
            pk_step_finish_drafts(s, i);
            continue;
        }
        const pk_step_req r = *pk_step_slot_req(s, &sl);
        const int32_t tok = s->step_output[sl.sample_row];
        const int32_t len = sl.len + 1, num_output = r.num_output + 1;
        s->tokens[(int64_t)i * s->max_seq + sl.len] = tok;
        s->slots[i].len = len;
        pk_step_slot_req(s, &sl)->num_output = num_output;
        pk_step_token *e = pk_step_emit(s, sl.req, sl.ent, tok, sl.sample_row);
        if (s->eos >= 0 && tok == s->eos)
            pk_step_retire(s, &s->slots[i], e->finish = PK_STEP_FINISH_EOS);
        else if (num_output >= r.max_new_tokens || len >= s->max_seq)
            pk_step_retire(s, &s->slots[i], e->finish = PK_STEP_FINISH_LENGTH);
    }
}

/* Takes waiting requests into free slots, in order, while the pages they reserve are there. A
 * session's request cancelled while it waited ends here, with a record. */
PK_HD void pk_step_admit(pk_step_state *s) {
    for (int i = 0; i < s->R && s->next_req < s->nreqs; i++) {
        pk_slot *sl = &s->slots[i];
        if (sl->req >= 0) continue;
        const pk_step_req *r = pk_step_req_of(s, s->next_req);
        if (r->finish != PK_STEP_FINISH_NONE) { /* cancelled while it waited */
            pk_step_emit(s, s->next_req, pk_step_ent_of(s, s->next_req), -1, -1)->finish = r->finish;
            s->next_req++;
            s->ndone++;
            i--; /* the slot is still free */
            continue;
        }
        int life = r->prompt_len + r->max_new_tokens;
        if (life > s->max_seq) life = s->max_seq;
        int need = pk_step_pages_for(life, s->page_size);
        /* the prompt's cached prefix: whole pages, the last prompt token left to compute */
        int32_t *pt = s->page_table + (int64_t)i * s->pages_per_req;
        int hits = 0, taken_back = 0; /* taken_back: hits on unheld pages, which leave the evictable */
        uint64_t chain = 0;
        for (int maxh = s->page_ref ? (r->prompt_len - 1) / s->page_size : 0; hits < maxh; hits++) {
            const int32_t *t = r->prompt + (int64_t)hits * s->page_size;
            const uint64_t h = pk_step_chain(chain, t, s->page_size);
            int32_t at;
            const int32_t p = pk_step_cache_find(s, h, t, &at);
            if (p < 0) break;
            pt[hits] = p;
            taken_back += s->page_ref[p] == 0;
            chain = h;
        }
        if (need - hits + taken_back > s->unreserved) return; /* wait, in order, for pages to come back */
        for (int h = 0; h < hits; h++) {
            if (s->page_ref[pt[h]]++ == 0) pk_step_lru_unlink(s, pt[h]);
        }
        s->unreserved -= need - hits + taken_back;
        sl->ent = pk_step_ent_of(s, s->next_req);
        sl->req = s->next_req++;
        sl->reserved = need - hits;
        sl->len = r->prompt_len;
        sl->cached = hits * s->page_size;
        sl->npages = sl->shared = sl->hashed = hits;
        sl->chain = chain;
        sl->indexed = 0;
        pk_step_slot_req(s, sl)->num_cached = sl->cached;
        if (s->sample_params)
            for (int j = 0; j < PK_SAMPLE_PARAMS; j++) s->sample_params[i * PK_SAMPLE_PARAMS + j] = r->sample[j];
        if (s->ngram_pos) /* a new request: its own index */
            for (int j = 0; j < s->ngram_cap; j++) s->ngram_pos[(int64_t)i * s->ngram_cap + j] = 0;
        int32_t *dst = s->tokens + (int64_t)i * s->max_seq;
        for (int j = 0; j < r->prompt_len; j++) dst[j] = r->prompt[j];
    }
}

/* Whether slot i's request draws its tokens (else the argmax). */
PK_HD int pk_step_samples(const pk_step_state *s, int i) {
    return s->sample_params && s->sample_params[i * PK_SAMPLE_PARAMS + PK_SAMPLE_INV_TEMP] != 0;
}

/* A session's cancel of request id: a running one ends now (its pages come back) and a waiting
 * one when admission reaches it, each with a record; one that ended already is left alone. */
PK_HD void pk_step_cancel(pk_step_state *s, int32_t id) {
    if (id < 0 || id >= s->nreqs) return;
    if (id >= s->next_req) {
        pk_step_req_of(s, id)->finish = PK_STEP_FINISH_CANCELLED;
        return;
    }
    for (int i = 0; i < s->R; i++)
        if (s->slots[i].req == id) {
            const int32_t ent = s->slots[i].ent;
            pk_step_retire(s, &s->slots[i], PK_STEP_FINISH_CANCELLED);
            pk_step_emit(s, id, ent, -1, -1)->finish = PK_STEP_FINISH_CANCELLED;
            return;
        }
}

/* Gives slot i the rows for tokens [cached, cached + n), taking pages as needed. */
PK_HD void pk_step_place_rows(pk_step_state *s, int i, int n, int *row) {
    pk_slot *sl = &s->slots[i];
    int32_t *pt = s->page_table + (int64_t)i * s->pages_per_req;
    while (sl->npages < pk_step_pages_for(sl->cached + n, s->page_size)) {
        PK_STEP_ASSERT(sl->npages - sl->shared < sl->reserved);
        pt[sl->npages++] = pk_step_page_take(s);
    }
    int32_t plen = pk_step_slot_req(s, sl)->prompt_len;
    if (sl->cached < plen) s->prompt_rows += sl->cached + n < plen ? n : plen - sl->cached;
    for (int j = 0; j < n; j++) {
        int pos = sl->cached + j;
        s->step_tokens[*row] = s->tokens[(int64_t)i * s->max_seq + pos];
        s->token_pos[*row] = pos;
        s->token_req[*row] = i;
        if (s->sample_slot) s->sample_slot[*row] = 0;
        (*row)++;
    }
    sl->cached += n;
    sl->sample_row = sl->cached == sl->len ? *row - 1 : -1;
    if (s->sample_slot && sl->sample_row >= 0 && pk_step_samples(s, i)) s->sample_slot[sl->sample_row] = i + 1;
}

/* The index slot of the g tokens t[e - g + 1 .. e] (FNV-1a over g and the ids). */
PK_HD uint32_t pk_step_ngram_key(const int32_t *t, int e, int g, int32_t cap) {
    uint32_t h = 2166136261u ^ (uint32_t)g;
    for (int q = e - g + 1; q <= e; q++) h = (h ^ (uint32_t)t[q]) * 16777619u;
    return h & (uint32_t)(cap - 1);
}

/* Prompt lookup for slot i (decoding: its newest token at len - 1 not cached yet): the latest
 * earlier occurrence of its last spec_ngram tokens (then shorter ones, down to 1), and the up to
 * kmax tokens that followed it, before len, written as drafts to tokens[len ..]. The occurrences
 * come from the slot's n-gram index (positions ending before len - 1 are added first, each once
 * over the request's life; a hash collision shows as a mismatch, and that size finds nothing), so
 * a step's lookup costs the new tokens, not the context. Drafts stay within the request's life
 * (prompt + max_new_tokens, max_seq_length: its reserved pages). Returns how many. */
PK_HD int pk_step_draft(pk_step_state *s, int i, int kmax) {
    pk_slot *sl = &s->slots[i];
    const pk_step_req *r = pk_step_slot_req(s, sl);
    int32_t *t = s->tokens + (int64_t)i * s->max_seq;
    int32_t *idx = s->ngram_pos + (int64_t)i * s->ngram_cap;
    const int n = sl->len, G = s->spec_ngram > 0 ? s->spec_ngram : 3;
    for (int e = sl->indexed; e < n - 1; e++)
        for (int g = 1; g <= G && g <= e + 1; g++) idx[pk_step_ngram_key(t, e, g, s->ngram_cap)] = e + 1;
    if (sl->indexed < n - 1) sl->indexed = n - 1;
    int life = r->prompt_len + r->max_new_tokens;
    if (life > s->max_seq) life = s->max_seq;
    if (kmax > s->spec_len) kmax = s->spec_len;
    if (kmax > life - n) kmax = life - n;
    if (kmax <= 0) return 0;
    for (int g = G; g >= 1; g--) {
        if (g >= n) continue;
        const int e = idx[pk_step_ngram_key(t, n - 1, g, s->ngram_cap)] - 1; /* an earlier end, or -1 */
        if (e < g - 1 || e >= n - 1) continue;
        int same = 1;
        for (int q = 0; q < g && same; q++) same = t[e - q] == t[n - 1 - q];
        if (!same) continue;
        int k = n - 1 - e; /* tokens that followed it, before n */
        if (k > kmax) k = kmax;
        for (int q = 0; q < k; q++) t[n + q] = t[e + 1 + q];
        return k;
    }
    return 0;
}

/* Admits waiting requests and fills the step tensors for the next step. Returns 1 if there is a
 * step to run, 0 when every request is done.
 * Rows: the prompt chunks first, in slot order, then the decoding slots (one row each, T >= R, so
 * they always fit, plus their drafts while rows are left over for the decoding slots after them),
 * which are counted first so the chunks take only the rows they leave. The rows that draw a token
 * (decode rows, drafts, a prompt's last row) then end the step, from step_info's FIRST_SAMPLE on:
 * the LM head and the argmax run over those rows only (a middle chunk of a long prompt over
 * none). */
PK_HD int pk_step_plan(pk_step_state *s) {
    if (s->page_ref) /* the last step's K/V are written: their full pages go to the cache */
        for (int i = 0; i < s->R; i++)
            if (s->slots[i].req >= 0) pk_step_cache_offer(s, i);
    pk_step_admit(s);
    int row = 0, ndec = 0, drows = 0; /* drows: rows the decoding slots take */
    s->prompt_rows = 0;
    for (int i = 0; i < s->R; i++) {
        pk_slot *sl = &s->slots[i];
        sl->ndraft = 0;
        /* -2: decoding, its rows placed after the chunks; -1: no row draws its token */
        sl->sample_row = sl->req >= 0 && sl->len - sl->cached == 1 && sl->cached > 0 ? -2 : -1;
        ndec += sl->sample_row == -2;
    }
    for (int i = 0; i < s->R; i++) {
        pk_slot *sl = &s->slots[i];
        if (sl->sample_row != -2) continue;
        ndec--;
        if (s->spec_len > 0 && !pk_step_samples(s, i)) /* greedy only */
            sl->ndraft = pk_step_draft(s, i, s->T - drows - 1 - ndec);
        drows += 1 + sl->ndraft;
    }
    int first = -1; /* the first row that draws a token: the chunks' rows come in order, before the decode rows */
    for (int i = 0; i < s->R && row < s->T - drows; i++) {
        pk_slot *sl = &s->slots[i];
        if (sl->req < 0 || sl->sample_row == -2 || sl->cached == sl->len) continue;
        int n = sl->len - sl->cached;
        if (n > s->T - drows - row) n = s->T - drows - row;
        pk_step_place_rows(s, i, n, &row);
        if (first < 0 && sl->sample_row >= 0) first = sl->sample_row;
    }
    for (int i = 0; drows > 0 && i < s->R; i++) {
        pk_slot *sl = &s->slots[i];
        if (sl->sample_row != -2) continue;
        if (first < 0) first = row;
        const int row0 = row;
        pk_step_place_rows(s, i, 1 + sl->ndraft, &row);
        sl->sample_row = row0;
    }
    if (row == 0) {
        PK_STEP_ASSERT(s->ndone == s->nreqs); /* reservations make a stall impossible */
        return 0;
    }
    /* Unused rows hold zeros, in range for every kernel that reads them: only those the last
     * planned step used need zeroing again (all T rows once after a reset; a one-row decode step
     * after another, none: 189 stores per step on the GPU at T 64, ~0.6 us of one thread). */
    for (int r = row; r < s->rows; r++) s->step_tokens[r] = s->token_pos[r] = s->token_req[r] = 0;
    if (s->sample_slot)
        for (int r = row; r < s->rows; r++) s->sample_slot[r] = 0;
    s->rows = row;
    s->step++;
    s->step_info[PK_STEP_INFO_NUM_TOKENS] = row;
    s->step_info[PK_STEP_INFO_STEP] = (int32_t)s->step;
    s->step_info[PK_STEP_INFO_FIRST_SAMPLE] = s->all_logits ? 0 : first < 0 ? row : first;
    if (s->rec && s->step <= s->rec_cap) {
        s->rec[s->step].rows = row;
        s->rec[s->step].prompt_rows = s->prompt_rows;
    }
    return 1;
}

/* Step timing: the runtime's clock when step 1 is released, and at the start of every
 * prepare_next_step (the end of step s->step). No-ops without s->rec. */
PK_HD void pk_step_mark_start(pk_step_state *s, uint64_t ns) {
    if (s->rec) s->rec[0].ns = ns;
}

PK_HD void pk_step_mark_end(pk_step_state *s, uint64_t ns) {
    if (s->rec && s->step >= 1 && s->step <= s->rec_cap) s->rec[s->step].ns = ns;
}

#endif /* PK_DECODE_STEP_H */
