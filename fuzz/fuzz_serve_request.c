// SPDX-License-Identifier: Apache-2.0
/* fuzz_serve_request.c — libFuzzer target: pk serve's request parser over arbitrary bytes. The
 * first byte picks the route (even: completions, odd: chat), the rest is the body.
 * On success the request must be what the server relies on (a model name; one prompt, as text or
 * as 1+ ids, or 1+ messages each with content; max_tokens in range); on failure the error must be
 * a 400 with a message, and the request zeroed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    serve_kind kind = (data[0] & 1) ? SERVE_CHAT : SERVE_COMPLETIONS;
    serve_request r;
    serve_error e;
    if (serve_request_parse(kind, (const char *)data + 1, size - 1, &r, &e) != 0) {
        if (e.status != 400 || !e.message[0] || !e.type[0] || r.model || r.prompt || r.prompt_ids || r.messages) abort();
        return 0;
    }
    if (r.kind != kind || !r.model || r.max_tokens < 0 || r.max_tokens > SERVE_MAX_TOKENS_CAP) abort();
    if (r.include_usage && !r.stream) abort();
    if (kind == SERVE_COMPLETIONS) {
        if (!r.prompt == !r.prompt_ids || r.messages) abort();
        if (r.prompt_ids && (r.num_prompt_ids < 1 || r.num_prompt_ids > SERVE_MAX_PROMPT_IDS)) abort();
        for (int i = 0; r.prompt_ids && i < r.num_prompt_ids; i++)
            if (r.prompt_ids[i] < 0) abort();
    } else {
        if (r.prompt || r.prompt_ids || r.num_messages < 1 || r.num_messages > SERVE_MAX_MESSAGES) abort();
        for (int i = 0; i < r.num_messages; i++)
            if (!r.messages[i].content || r.messages[i].role > SERVE_ROLE_ASSISTANT) abort();
        if (r.enable_thinking < -1 || r.enable_thinking > 1) abort();
    }
    serve_request_free(&r);
    if (r.model || r.messages) abort();
    return 0;
}
