/* step_advance.cu — prepare_next_step's device half (runtime.cuh pk_step_advance: decode_step.h's
 * pk_step_finish and pk_step_plan on a copy of the state) alone, on one thread of an idle GPU: how
 * long one decode step's boundary spends in it, and what in it costs.
 *
 * issue 5, session 35 (docs/PERF.md): -DPK_STEP_PROFILE put pk_step_advance at 3.5-3.8 us of the
 * 0.6B's 6.6-7.5 us step boundary. One request decoding (R slots, one busy), T 64 rows per step
 * (pk bench's), its prompt prefilled first; every step the benchmark writes the sampled token into
 * step_output, makes the acquire the persistent kernel makes before the call (an atom.acq_rel: the
 * SM's L1 is then empty of global lines), then times the call with %clock64 and %globaltimer.
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -Isrc -Iinclude -o build/step_advance bench/step_advance.cu
 *   build/step_advance [R]      (R: slots, default 1)
 *
 * Variants (each its own launch, the same steps): "tree" is pk_step_advance's body as runtime.cuh
 * has it; "s34" is session 34's decode_step.h — each load of pk_step_finish after the stores before
 * it, and every one of the T - rows unused rows of the three step tensors zeroed every step.
 * Session 35 (idle H200, R 1): s34 4,130 cycles (2.08 us); without the zeroing 2,940; with the
 * finish's loads first as well 2,450 (1.25 us) — the tree since then.
 */
#include "micro.cuh"
#include "runtime/decode_step.h"

enum { T = 64, MAX_SEQ = 288, PAGE = 16, PROMPT = 160, GEN = 120, STEPS = 100 };

/* Session 34's pk_step_finish (the variant "s34"): each load after the stores before it. */
__device__ void finish_s34(pk_step_state *s) {
    for (int i = 0; i < s->R; i++) {
        pk_slot *sl = &s->slots[i];
        if (sl->req < 0 || sl->sample_row < 0) continue;
        pk_step_req *r = &s->reqs[sl->req];
        int32_t tok = s->step_output[sl->sample_row];
        s->tokens[(int64_t)i * s->max_seq + sl->len++] = tok;
        r->num_output++;
        pk_step_token *e = &s->emitted[s->nemitted++];
        e->req = sl->req;
        e->token = tok;
        e->row = sl->sample_row;
        e->pad = 0;
        if (s->eos >= 0 && tok == s->eos)
            pk_step_retire(s, sl, PK_STEP_FINISH_EOS);
        else if (r->num_output >= r->max_new_tokens || sl->len >= s->max_seq)
            pk_step_retire(s, sl, PK_STEP_FINISH_LENGTH);
    }
}

/* Session 34's pk_step_plan tail: every unused row of the T zeroed every step. Run after the
 * tree's plan (which zeroed the rows the last step used), it adds those stores back. */
__device__ void clear_all_s34(pk_step_state *s) {
    const int row = s->rows; /* the tree's plan set it to this step's rows */
    for (int r = row; r < s->T; r++) s->step_tokens[r] = s->token_pos[r] = s->token_req[r] = 0;
}

struct state_box {
    pk_step_state *step; /* as pk_dev_state's: the state is reached through a pointer in global memory */
};

template <int VARIANT>
__device__ __noinline__ int advance(const state_box *S) {
    pk_step_state s = *S->step;
    if (VARIANT == 1)
        finish_s34(&s);
    else
        pk_step_finish(&s);
    const int more = pk_step_plan(&s);
    if (VARIANT == 1 && more) clear_all_s34(&s);
    *S->step = s;
    return more;
}

template <int VARIANT>
__global__ void steps_kernel(const state_box *S, unsigned long long *dummy, uint64_t *cyc, uint64_t *ns, int *nsteps) {
    if (threadIdx.x != 0) return;
    pk_step_state *st = S->step;
    pk_step_reset(st);
    pk_step_plan(st); /* the prompt's steps, then one row per step */
    int n = 0;
    for (int k = 0; k < STEPS + 20; k++) {
        /* the sampled token of every row that samples: a value that is never EOS */
        for (int i = 0; i < st->R; i++)
            if (st->slots[i].sample_row >= 0) const_cast<int32_t *>(st->step_output)[st->slots[i].sample_row] = 1000 + k;
        __threadfence();
        atomicAdd(dummy, 1ull); /* the runtime's acquire before the call, as an atom (L1 emptied below) */
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        const long long c0 = clock64();
        const uint64_t t0 = now_ns();
        const int more = advance<VARIANT>(S);
        const uint64_t t1 = now_ns_after((uint64_t)more + 1);
        const long long c1 = clock64();
        if (n < STEPS) {
            cyc[n] = (uint64_t)(c1 - c0);
            ns[n] = t1 - t0;
            n++;
        }
        if (!more) break;
    }
    *nsteps = n;
}

template <int VARIANT>
static void run(int R, const char *name) {
    /* the state's arrays in device memory, the struct itself too */
    const int pages_per_req = (MAX_SEQ + PAGE - 1) / PAGE, num_pages = R * pages_per_req;
    pk_step_state h = {};
    h.R = R;
    h.T = T;
    h.max_seq = MAX_SEQ;
    h.page_size = PAGE;
    h.pages_per_req = pages_per_req;
    h.num_pages = num_pages;
    h.eos = -1;
    h.nreqs = 1;
    int32_t *prompt;
    CHECK(cudaMalloc(&prompt, PROMPT * 4));
    int32_t hp[PROMPT];
    for (int i = 0; i < PROMPT; i++) hp[i] = 7 + i;
    CHECK(cudaMemcpy(prompt, hp, sizeof hp, cudaMemcpyHostToDevice));
    pk_step_req hr = {prompt, PROMPT, GEN, 0, 0};
    CHECK(cudaMalloc(&h.reqs, sizeof hr));
    CHECK(cudaMemcpy(h.reqs, &hr, sizeof hr, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&h.tokens, (size_t)R * MAX_SEQ * 4));
    CHECK(cudaMalloc(&h.slots, (size_t)R * sizeof(pk_slot)));
    CHECK(cudaMalloc(&h.free_pages, (size_t)num_pages * 4));
    CHECK(cudaMalloc(&h.step_tokens, T * 4));
    CHECK(cudaMalloc(&h.token_pos, T * 4));
    CHECK(cudaMalloc(&h.token_req, T * 4));
    CHECK(cudaMalloc(&h.page_table, (size_t)R * pages_per_req * 4));
    CHECK(cudaMalloc(&h.step_info, PK_STEP_INFO_LEN * 4));
    int32_t *out;
    CHECK(cudaMalloc(&out, T * 4));
    CHECK(cudaMemset(out, 0, T * 4));
    h.step_output = out;
    CHECK(cudaMalloc(&h.emitted, (size_t)(STEPS + 200) * R * sizeof(pk_step_token)));
    pk_step_state *ds;
    CHECK(cudaMalloc(&ds, sizeof h));
    CHECK(cudaMemcpy(ds, &h, sizeof h, cudaMemcpyHostToDevice));
    state_box hb = {ds}, *db;
    CHECK(cudaMalloc(&db, sizeof hb));
    CHECK(cudaMemcpy(db, &hb, sizeof hb, cudaMemcpyHostToDevice));
    unsigned long long *dummy;
    uint64_t *cyc;
    uint64_t *ns;
    int *nsteps;
    CHECK(cudaMalloc(&dummy, 8));
    CHECK(cudaMalloc(&cyc, STEPS * 8));
    CHECK(cudaMalloc(&ns, STEPS * 8));
    CHECK(cudaMalloc(&nsteps, 4));
    steps_kernel<VARIANT><<<1, 32>>>(db, dummy, cyc, ns, nsteps);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    uint64_t hc[STEPS], hn[STEPS];
    int n = 0;
    CHECK(cudaMemcpy(&n, nsteps, 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hc, cyc, sizeof hc, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hn, ns, sizeof hn, cudaMemcpyDeviceToHost));
    pk_step_state fin;
    CHECK(cudaMemcpy(&fin, ds, sizeof fin, cudaMemcpyDeviceToHost));
    pk_step_req fr;
    CHECK(cudaMemcpy(&fr, h.reqs, sizeof fr, cudaMemcpyDeviceToHost));
    /* steps 2 .. n: one row each (the first call finishes the prompt's step) */
    qsort(hc + 1, (size_t)(n - 1), 8, cmp_u64);
    qsort(hn + 1, (size_t)(n - 1), 8, cmp_u64);
    printf("%-9s R %3d: %d calls, median %6llu cycles %6.2f us (min %llu, max %llu cycles); the request: %d tokens, finish %d\n",
           name, R, n, (unsigned long long)hc[1 + (n - 1) / 2], hn[1 + (n - 1) / 2] / 1e3, (unsigned long long)hc[1],
           (unsigned long long)hc[n - 1], fr.num_output, fr.finish);
    CHECK(cudaDeviceReset());
}

int main(int argc, char **argv) {
    const int R = argc > 1 ? atoi(argv[1]) : 1;
    if (R < 1 || R > 1024) {
        fprintf(stderr, "R %d: 1 .. 1024\n", R);
        return 1;
    }
    for (int round = 0; round < 3; round++) {
        run<1>(R, "s34");
        run<0>(R, "tree");
    }
    return 0;
}
