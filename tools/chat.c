// SPDX-License-Identifier: Apache-2.0
/* chat.c — the chat template and `pk chat`, a conversation in the terminal.
 *
 * The template is the one pk_tokenizer_chat_prompt writes for one user turn (ChatML or Llama 3,
 * checked equal at start), extended to a system prompt and earlier turns. Each turn re-runs the
 * whole history greedily (pk_run has no cache across runs); when it no longer fits the context,
 * the oldest turns go. SIGINT is taken by a thread of its own (sigwait), so the runtime's threads
 * never see it: during an answer it stops the printing and the run (pk_cancel), at the prompt it
 * leaves.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

struct chat_template {
    const char *name, *family_token;
    const char *begin;                /* once, first */
    const char *system_pre, *system_post;
    const char *user_pre, *user_post;
    const char *assistant_pre;        /* the assistant's header: also what the prompt ends with */
    const char *assistant_post;       /* after an answer; starts with the end-of-turn token */
    const char *end_token;
    const char *no_think;             /* after the header when thinking is off (Qwen3), "" if none */
};

static const chat_template TEMPLATES[] = {
    {"ChatML", "<|im_start|>", "", "<|im_start|>system\n", "<|im_end|>\n", "<|im_start|>user\n", "<|im_end|>\n",
     "<|im_start|>assistant\n", "<|im_end|>\n", "<|im_end|>", "<think>\n\n</think>\n\n"},
    {"Llama 3", "<|start_header_id|>", "<|begin_of_text|>", "<|start_header_id|>system<|end_header_id|>\n\n",
     "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|>",
     "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", "<|eot_id|>", ""},
};

typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) die("out of memory");
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

char *chat_format_messages(const chat_template *ct, const chat_message *msgs, int n, int no_think) {
    strbuf b = {0};
    sb_puts(&b, ct->begin);
    for (int i = 0; i < n; i++) {
        const char *pre = msgs[i].role == CHAT_SYSTEM ? ct->system_pre : msgs[i].role == CHAT_USER ? ct->user_pre : ct->assistant_pre;
        const char *post = msgs[i].role == CHAT_SYSTEM ? ct->system_post : msgs[i].role == CHAT_USER ? ct->user_post : ct->assistant_post;
        sb_puts(&b, pre);
        sb_puts(&b, msgs[i].content);
        sb_puts(&b, post);
    }
    sb_puts(&b, ct->assistant_pre);
    if (no_think) sb_puts(&b, ct->no_think);
    return b.s;
}

char *chat_format(const chat_template *ct, const char *system, const chat_turn *turns, int n, const char *user) {
    chat_message *msgs = malloc((size_t)(2 * n + 2) * sizeof *msgs);
    if (!msgs) die("out of memory");
    int m = 0;
    if (system) msgs[m++] = (chat_message){CHAT_SYSTEM, system};
    for (int i = 0; i < n; i++) {
        msgs[m++] = (chat_message){CHAT_USER, turns[i].user};
        msgs[m++] = (chat_message){CHAT_ASSISTANT, turns[i].assistant};
    }
    msgs[m++] = (chat_message){CHAT_USER, user};
    char *s = chat_format_messages(ct, msgs, m, 0);
    free(msgs);
    return s;
}

const chat_template *chat_template_for(pk_tokenizer *t) {
    char *lib = pk_tokenizer_chat_prompt(t, "x");
    if (!lib) die("--chat: %s", pk_tokenizer_error(t));
    for (size_t i = 0; i < sizeof TEMPLATES / sizeof TEMPLATES[0]; i++) {
        const chat_template *ct = &TEMPLATES[i];
        if (pk_tokenizer_token_id(t, ct->family_token) < 0) continue;
        char *mine = chat_format(ct, NULL, NULL, 0, "x");
        int same = !strcmp(mine, lib);
        free(mine);
        if (!same) continue;
        free(lib);
        return ct;
    }
    die("the tokenizer's chat template is not one pk chat knows: %s", lib);
}

int32_t chat_end_token(const chat_template *ct, const pk_tokenizer *t) { return pk_tokenizer_token_id(t, ct->end_token); }

int chat_has_thinking(const chat_template *ct, const pk_tokenizer *t) {
    return ct->no_think[0] && pk_tokenizer_token_id(t, "<think>") >= 0 && pk_tokenizer_token_id(t, "</think>") >= 0;
}

/* ---- pk chat ----------------------------------------------------------------------------- */

static atomic_int answering, interrupted;
static pk_kernel *_Atomic chat_kernel; /* what SIGINT cancels during an answer */

static void *sigint_thread(void *arg) {
    const sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0) continue;
        if (atomic_load(&answering)) {
            atomic_store(&interrupted, 1);
            pk_cancel(atomic_load(&chat_kernel));
        } else {
            (void)!write(STDOUT_FILENO, "\n", 1);
            _exit(130);
        }
    }
    return NULL;
}

typedef struct chat_stream {
    pk_decoder *dec;
    int32_t eos, end;
    int done; /* 1: the answer ended (end of turn, EOS); 2: stopped by SIGINT */
    strbuf answer;
    char buf[1 << 16]; /* > 64 bytes + the longest token */
} chat_stream;

static void chat_on_token(void *user, int request, int32_t token, int row) {
    chat_stream *s = user;
    (void)request, (void)row;
    if (s->done) return;
    if (atomic_load(&interrupted)) { /* also when SIGINT came before pk_run cleared its flag */
        s->done = 2;
        pk_cancel(atomic_load(&chat_kernel));
        return;
    }
    if (token == s->eos || token == s->end) {
        s->done = 1;
        return;
    }
    int n = pk_decoder_push(s->dec, token, s->buf, sizeof s->buf);
    if (n < 0) die("token id %d cannot be decoded by the tokenizer", (int)token);
    if (n > 0) {
        sb_add(&s->answer, s->buf, (size_t)n);
        out_write(s->buf, (size_t)n);
    }
}

int cmd_chat(options *o) {
    pk_tokenizer *tok = load_tokenizer(o->model, "pk chat needs the model's tokenizer");
    const chat_template *ct = chat_template_for(tok);
    pk_model_info info = read_info(o->model);
    int max_seq = o->max_seq ? o->max_seq : info.max_position_embeddings < 4096 ? info.max_position_embeddings : 4096;
    if (max_seq > info.max_position_embeddings)
        die("--max-seq %d exceeds the model's max_position_embeddings %d", max_seq, info.max_position_embeddings);
    if (!o->max_tokens_set) o->max_tokens = max_seq / 2 < 256 ? max_seq / 2 : 256;
    if (o->max_tokens >= max_seq - 1)
        die("--max-tokens %d leaves no room for a message in the context of %d positions (--max-seq)", o->max_tokens,
            max_seq);

    /* SIGINT goes to sigint_thread only: blocked here before any runtime thread starts. */
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, sigint_thread, &set) != 0) die("cannot start a thread");
    pthread_detach(sig_thread);

    pk_config c = make_config(o, 1, &info);
    c.max_seq_length = max_seq;
    int32_t end = chat_end_token(ct, tok);
    if (end >= 0) c.eos_token_id = end; /* the end of the assistant's turn ends the run */
    pk_model *m = load_model(o, &c);
    pk_kernel *k = pk_model_kernel(m);
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    atomic_store(&chat_kernel, k);
    const pk_sampling sp = sampling_of(o); /* one seed for the conversation: turns sit at other positions */

    int32_t *ids = malloc(MAX_IDS * sizeof *ids), *out = malloc((size_t)o->max_tokens * sizeof *out);
    chat_stream *s = calloc(1, sizeof *s);
    if (!ids || !out || !s) die("out of memory");
    s->dec = pk_decoder_new(tok);
    if (!s->dec) die("out of memory");
    s->eos = (int32_t)info.eos_token_id, s->end = end;
    chat_turn *turns = NULL;
    int nturns = 0, first = 0, tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    for (;;) {
        if (tty) out_write("> ", 2);
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0) break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (len == 0) continue;
        if (memchr(line, '\0', (size_t)len)) {
            fprintf(stderr, "pk: the line holds a NUL byte; not sent\n");
            continue;
        }
        /* the history and the message, the oldest turns dropped until it fits with the answer */
        int n, dropped = 0;
        for (;;) {
            char *text = chat_format(ct, o->system, turns + first, nturns - first, line);
            n = encode_or_die(tok, text, ids, MAX_IDS);
            free(text);
            if (n + o->max_tokens <= max_seq || first == nturns) break;
            first++, dropped++;
        }
        if (n + o->max_tokens > max_seq) {
            fprintf(stderr,
                    "pk: this message takes %d tokens in the chat template; with --max-tokens %d it does not fit "
                    "the context of %d positions (--max-seq): say it shorter\n",
                    n, o->max_tokens, max_seq);
            continue;
        }
        if (dropped)
            fprintf(stderr, "pk: the conversation outgrew the context of %d positions: dropped the %d oldest turn%s\n",
                    max_seq, dropped, dropped == 1 ? "" : "s");
        pk_request req = {.prompt = ids, .prompt_len = n, .max_new_tokens = o->max_tokens, .output = out,
                          .sampling = sp};
        s->done = 0;
        s->answer.len = 0;
        sb_add(&s->answer, "", 0);
        atomic_store(&interrupted, 0);
        atomic_store(&answering, 1);
        pk_status st = pk_run(k, &req, 1, chat_on_token, s);
        int stopped = s->done == 2 || atomic_load(&interrupted);
        atomic_store(&answering, 0);
        if (st != PK_OK) die("%s", pk_kernel_error(k));
        int tail = pk_decoder_flush(s->dec, s->buf, sizeof s->buf);
        if (tail > 0 && !stopped) {
            sb_add(&s->answer, s->buf, (size_t)tail);
            out_write(s->buf, (size_t)tail);
        }
        out_write("\n", 1);
        if (stopped)
            fprintf(stderr, "pk: answer stopped (Ctrl-C) after %d tokens; /exit or end of input leaves\n",
                    req.num_output);
        chat_turn *grown = realloc(turns, (size_t)(nturns + 1) * sizeof *turns);
        if (!grown) die("out of memory");
        turns = grown;
        turns[nturns].user = strdup(line);
        turns[nturns].assistant = strdup(s->answer.s);
        if (!turns[nturns].user || !turns[nturns].assistant) die("out of memory");
        nturns++;
    }
    if (ferror(stdin)) die("cannot read standard input: %s", strerror(errno));
    for (int i = 0; i < nturns; i++) {
        free(turns[i].user);
        free(turns[i].assistant);
    }
    free(turns);
    free(line);
    free(s->answer.s);
    pk_decoder_free(s->dec);
    free(s);
    free(out);
    free(ids);
    atomic_store(&chat_kernel, NULL);
    pk_model_free(m);
    pk_tokenizer_free(tok);
    return 0;
}
