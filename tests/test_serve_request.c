// SPDX-License-Identifier: Apache-2.0
/* test_serve_request.c — pk serve's request parser (tools/serve/request.c) alone: what each
 * field becomes, the 400 each bad value gets (naming the field), and a seeded mutation run over
 * valid bodies (bytes flipped, cut, repeated) that must never crash and must keep the parser's
 * promises: a 400 with a message and nothing allocated, or a request the server can use.
 * fuzz/fuzz_serve_request.c is the same target under libFuzzer. */
#include <stdlib.h>
#include <string.h>

#include "../tools/serve/request.h"
#include "check.h"

static serve_request req;
static serve_error err;

static int parse(serve_kind kind, const char *body) {
    serve_request_free(&req);
    return serve_request_parse(kind, body, strlen(body), &req, &err);
}

/* The body fails with a 400 whose param is `param` and whose message holds `needle`. */
static void bad(serve_kind kind, const char *body, const char *param, const char *needle) {
    int rc = parse(kind, body);
    CHECK(rc == -1 && err.status == 400 && !strcmp(err.param, param) && strstr(err.message, needle) && !req.model,
          "%s: rc %d, status %d, param '%s', message '%s'", body, rc, err.status, err.param, err.message);
}

static void check_fields(void) {
    int rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"In the beginning\",\"max_tokens\":16,"
                                      "\"temperature\":0,\"top_p\":1,\"n\":1,\"stop\":null,\"seed\":3,\"user\":\"u\"}");
    CHECK(rc == 0 && !strcmp(req.model, "m") && !strcmp(req.prompt, "In the beginning") && req.max_tokens == 16 &&
              !req.stream && req.enable_thinking == -1 && req.temperature == 0 && req.has_seed && req.seed == 3,
          "completions: rc %d %s", rc, err.message);
    rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":0.7,\"top_p\":0.9,\"top_k\":40,"
                                  "\"min_p\":0.05,\"seed\":-2}");
    CHECK(rc == 0 && req.temperature == 0.7 && req.top_p == 0.9 && req.top_k == 40 && req.min_p == 0.05 && req.has_seed &&
              req.seed == (uint64_t)-2,
          "sampling fields: rc %d %s", rc, err.message);
    rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"\\n\",\"\",\"END\"]}");
    CHECK(rc == 0 && req.num_stop == 2 && !strcmp(req.stop[0], "\n") && !strcmp(req.stop[1], "END"), "stop: rc %d %s", rc,
          err.message);
    rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":\"Amen\"}");
    CHECK(rc == 0 && req.num_stop == 1 && !strcmp(req.stop[0], "Amen"), "stop string: rc %d %s", rc, err.message);
    rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"top_k\":-1}");
    CHECK(rc == 0 && req.top_k == 0 && req.top_p == 1 && req.temperature == 0 && !req.has_seed, "defaults: rc %d %s", rc,
          err.message);
    rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[[7,8,9]],\"stream\":true,"
                                  "\"stream_options\":{\"include_usage\":true}}\n");
    CHECK(rc == 0 && req.num_prompt_ids == 3 && req.prompt_ids[2] == 9 && req.stream && req.include_usage && !req.max_tokens,
          "prompt ids: rc %d %s", rc, err.message);
    rc = parse(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"one\"]}");
    CHECK(rc == 0 && !strcmp(req.prompt, "one"), "a prompt in an array: rc %d %s", rc, err.message);
    rc = parse(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
                           "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                           "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}],\"max_completion_tokens\":5,"
                           "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    CHECK(rc == 0 && req.num_messages == 3 && req.messages[0].role == SERVE_ROLE_SYSTEM &&
              !strcmp(req.messages[1].content, "ab") && req.messages[2].role == SERVE_ROLE_ASSISTANT &&
              !strcmp(req.messages[2].content, "") && req.max_tokens == 5 && req.enable_thinking == 0,
          "chat: rc %d %s", rc, err.message);
}

static void check_errors(void) {
    bad(SERVE_COMPLETIONS, "", "", "empty");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",", "", "not valid JSON");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\"}{}", "", "after its JSON");
    bad(SERVE_COMPLETIONS, "\"just a string\"", "", "JSON object");
    bad(SERVE_COMPLETIONS, "{\"prompt\":\"x\"}", "model", "required");
    bad(SERVE_COMPLETIONS, "{\"model\":5,\"prompt\":\"x\"}", "model", "string");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\"}", "prompt", "required");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", "prompt", "one per request");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1,-2]}", "prompt", "token id 1");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1.5]}", "prompt", "token id 0");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[]}", "prompt", "empty");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", "at least 1");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":-5}", "max_tokens", "at least 1");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":99999999999}", "max_tokens", "must be in");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":2.5}", "max_tokens", "integer");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":\"8\"}", "max_tokens", "integer");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":-1}", "temperature", "in [0, 100]");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":101}", "temperature", "in [0, 100]");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature", "number");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"top_p\":1.5}", "top_p", "in [0, 1]");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"top_p\":0}", "top_p", "keeps no token");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"min_p\":1}", "min_p", "number in");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"top_k\":2.5}", "top_k", "integer");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"seed\":1.5}", "seed", "64-bit integer");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"seed\":1e30}", "seed", "64-bit integer");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"presence_penalty\":0.5}", "presence_penalty", "no penalties");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":3}", "n", "one choice");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop", "at most 4");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",3]}", "stop", "array of strings");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":7}", "stop", "array of strings");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":5}", "logprobs", "not supported");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"echo\":true}", "echo", "not supported");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stream\":\"yes\"}", "stream", "true or false");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}", "stream_options",
        "only allowed when");
    bad(SERVE_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"x\",\"messages\":[]}", "messages", "Unrecognized");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"prompt\":\"x\"}", "prompt", "Unrecognized");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[]}", "messages", "empty");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":{}}", "messages", "array");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[\"hi\"]}", "messages[0]", "object");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"hi\"}]}", "messages[0]", "role");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"hi\"}]}", "messages[0]", "tool");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", "messages[0].content", "required");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
        "messages[0].content", "text only");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[{}]}]}", "messages[0]",
        "tool_calls");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
                    "{\"enable_thinking\":1}}", "chat_template_kwargs", "true or false");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
                    "{\"tools\":[]}}", "chat_template_kwargs", "enable_thinking only");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":4,"
                    "\"max_completion_tokens\":5}", "max_completion_tokens", "differ");
    bad(SERVE_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", "tools", "not supported");
    /* deep nesting is refused by cJSON's limit, not by the stack */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    CHECK(parse(SERVE_CHAT, deep) == -1 && err.status == 400, "deep nesting: %s", err.message);
    free(deep);
}

/* Seeded mutations of valid bodies: flips, cuts, inserted and repeated bytes. */
static void check_mutations(void) {
    static const char *const seeds[] = {
        "{\"model\":\"m\",\"prompt\":\"In the beginning\",\"max_tokens\":16,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
        "{\"model\":\"m\",\"prompt\":[[1,2,3]],\"temperature\":0,\"top_p\":1,\"n\":1,\"logprobs\":null}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":[{\"type\":"
        "\"text\",\"text\":\"\\u00e9\"}]}],\"chat_template_kwargs\":{\"enable_thinking\":false},\"max_completion_tokens\":3}",
    };
    static const char inserts[] = "{}[]\",:0123456789-.eE\\u nultrfas";
    uint64_t rng = 0x5eed;
    int ok = 0, fail = 0, broken = 0;
    char buf[1024];
    for (int it = 0; it < 30000; it++) {
        const char *seed = seeds[it % 3];
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        int edits = 1 + (int)(check_rand_u64(&rng) % 4);
        for (int e = 0; e < edits && n > 0; e++) {
            size_t at = check_rand_u64(&rng) % n;
            switch (check_rand_u64(&rng) % 4) {
            case 0: buf[at] = (char)(check_rand_u64(&rng) & 0xff); break;
            case 1: n = at; break;
            case 2:
                if (n + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = inserts[check_rand_u64(&rng) % (sizeof inserts - 1)];
                    n++;
                }
                break;
            default: buf[at] = inserts[check_rand_u64(&rng) % (sizeof inserts - 1)]; break;
            }
        }
        serve_kind kind = it % 3 == 2 ? SERVE_CHAT : SERVE_COMPLETIONS;
        serve_request_free(&req);
        if (serve_request_parse(kind, buf, n, &req, &err) == 0) {
            ok++;
            int good = req.model && (kind == SERVE_CHAT ? req.num_messages >= 1 && req.messages[0].content
                                                        : (req.prompt != NULL) != (req.prompt_ids != NULL)) &&
                       req.max_tokens >= 0 && req.max_tokens <= SERVE_MAX_TOKENS_CAP;
            broken += !good;
        } else {
            fail++;
            broken += err.status != 400 || !err.message[0] || req.model || req.messages || req.prompt;
        }
    }
    CHECK(broken == 0 && ok > 100 && fail > 1000, "mutations: %d parsed, %d refused, %d broke a promise", ok, fail, broken);
}

int main(void) {
    check_fields();
    check_errors();
    check_mutations();
    serve_request_free(&req);
    return check_report("serve_request");
}
