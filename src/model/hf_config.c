// SPDX-License-Identifier: Apache-2.0
/* hf_config.c — config.json → pk_hf_config, with transformers' defaults and pk's limits.
 *
 * JSON numbers arrive as doubles: an integer key must hold an exact integer (|v| <= 2^53)
 * inside its range, or the parse fails naming the key and value. A JSON null counts as an
 * absent key (transformers writes "head_dim": null, "rope_scaling": null).
 */
#include "model/hf_config.h"
#include "common/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_BYTES (16u << 20) /* config.json is a few KB; refuse anything huge */
#define MAX_EXACT_INT 9007199254740992.0
/* Lower bound (exclusive) of the positive reals: the layers take them as fp32, where a smaller
 * double would be 0 (rejected there, with a message that does not name config.json). */
#define MIN_REAL ((double)FLT_MIN)

typedef struct ctx {
    const char *label;
    char *err;
    size_t err_len;
} ctx;

static pk_status fail(const ctx *c, pk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pk_status fail(const ctx *c, pk_status s, const char *fmt, ...) {
    if (c->err && c->err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_len, fmt, ap);
        va_end(ap);
    }
    return s;
}

static void describe(const cJSON *v, char *buf, size_t len) {
    if (cJSON_IsNumber(v)) snprintf(buf, len, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, len, "the string \"%.40s\"", v->valuestring);
    else if (cJSON_IsArray(v)) snprintf(buf, len, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, len, "an object");
    else if (cJSON_IsBool(v)) snprintf(buf, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else snprintf(buf, len, "null");
}

static const cJSON *item(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* An exact integer in [lo, hi]. `prefix` qualifies the key in messages ("rope_scaling."). */
static pk_status int_value(const ctx *c, const cJSON *v, const char *prefix, const char *key,
                           int64_t lo, int64_t hi, int64_t *out) {
    char what[80];
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(fabs(d) <= MAX_EXACT_INT) || (double)(int64_t)d != d) {
        describe(v, what, sizeof what);
        return fail(c, PK_ERR_FORMAT, "'%s%s' in %s is %s, not an integer", prefix, key,
                    c->label, what);
    }
    int64_t i = (int64_t)d;
    if (i < lo || i > hi)
        return fail(c, PK_ERR_FORMAT, "'%s%s' = %lld in %s is out of range [%lld, %lld]", prefix,
                    key, (long long)i, c->label, (long long)lo, (long long)hi);
    *out = i;
    return PK_OK;
}

/* Integer key of obj: required (missing → error) or defaulted (*out keeps def). */
static pk_status get_int(const ctx *c, const cJSON *obj, const char *prefix, const char *key,
                         int required, int64_t def, int64_t lo, int64_t hi, int64_t *out) {
    const cJSON *v = item(obj, key);
    *out = def;
    if (!v) {
        if (required)
            return fail(c, PK_ERR_FORMAT, "missing key '%s%s' in %s", prefix, key, c->label);
        return PK_OK;
    }
    return int_value(c, v, prefix, key, lo, hi, out);
}

static pk_status get_int32(const ctx *c, const cJSON *obj, const char *key, int required,
                           int64_t def, int64_t lo, int64_t hi, int *out) {
    int64_t v;
    pk_status s = get_int(c, obj, "", key, required, def, lo, hi, &v);
    *out = (int)v;
    return s;
}

/* A finite number in (lo, hi) (exclusive: epsilons and thetas must be > 0). */
static pk_status get_real(const ctx *c, const cJSON *obj, const char *prefix, const char *key,
                          int required, double def, double lo, double hi, double *out) {
    const cJSON *v = item(obj, key);
    char what[80];
    *out = def;
    if (!v) {
        if (required)
            return fail(c, PK_ERR_FORMAT, "missing key '%s%s' in %s", prefix, key, c->label);
        return PK_OK;
    }
    if (!cJSON_IsNumber(v)) {
        describe(v, what, sizeof what);
        return fail(c, PK_ERR_FORMAT, "'%s%s' in %s is %s, not a number", prefix, key, c->label,
                    what);
    }
    double d = v->valuedouble;
    if (!(d > lo && d < hi))
        return fail(c, PK_ERR_FORMAT, "'%s%s' = %g in %s is out of range (%g, %g)", prefix, key,
                    d, c->label, lo, hi);
    *out = d;
    return PK_OK;
}

static pk_status get_bool(const ctx *c, const cJSON *obj, const char *key, int def, int *out) {
    const cJSON *v = item(obj, key);
    char what[80];
    *out = def;
    if (!v) return PK_OK;
    if (!cJSON_IsBool(v)) {
        describe(v, what, sizeof what);
        return fail(c, PK_ERR_FORMAT, "'%s' in %s is %s, not true or false", key, c->label, what);
    }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return PK_OK;
}

static pk_status get_string(const ctx *c, const cJSON *obj, const char *key, const char **out) {
    const cJSON *v = item(obj, key);
    char what[80];
    *out = NULL;
    if (!v) return PK_OK;
    if (!cJSON_IsString(v)) {
        describe(v, what, sizeof what);
        return fail(c, PK_ERR_FORMAT, "'%s' in %s is %s, not a string", key, c->label, what);
    }
    *out = v->valuestring;
    return PK_OK;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Python's json keeps the last of two equal keys and cJSON the first; a config with both
 * would mean different things to transformers and to pk, so it is refused. */
static pk_status check_duplicate_keys(const ctx *c, const cJSON *obj) {
    int n = cJSON_GetArraySize(obj), i = 0;
    if (n < 2) return PK_OK;
    const char **keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return fail(c, PK_ERR_NO_MEMORY, "out of memory reading %s", c->label);
    for (const cJSON *e = obj->child; e && i < n; e = e->next) keys[i++] = e->string ? e->string : "";
    qsort(keys, (size_t)i, sizeof *keys, cmp_str_ptr);
    pk_status s = PK_OK;
    for (int j = 1; j < i && s == PK_OK; j++) {
        if (strcmp(keys[j - 1], keys[j]) == 0)
            s = fail(c, PK_ERR_FORMAT, "duplicate key '%.100s' in %s", keys[j], c->label);
    }
    free(keys);
    return s;
}

#define TRY(expr)                          \
    do {                                   \
        pk_status s_ = (expr);             \
        if (s_ != PK_OK) return s_;        \
    } while (0)

static pk_status parse_arch(const ctx *c, const cJSON *root, pk_hf_config *cfg) {
    const cJSON *a = item(root, "architectures");
    char what[80];
    if (!a) return fail(c, PK_ERR_FORMAT, "missing key 'architectures' in %s", c->label);
    if (!cJSON_IsArray(a) || !cJSON_IsString(a->child)) {
        describe(cJSON_IsArray(a) ? a->child : a, what, sizeof what);
        if (cJSON_IsArray(a) && !a->child) snprintf(what, sizeof what, "empty");
        return fail(c, PK_ERR_FORMAT,
                    "'architectures' in %s must be a list of architecture names (it is %s)",
                    c->label, cJSON_IsArray(a) ? what : "not a list");
    }
    const char *name = a->child->valuestring;
    if (strcmp(name, "Qwen3ForCausalLM") == 0) {
        cfg->arch = PK_HF_ARCH_QWEN3;
        cfg->has_qk_norm = 1;
    } else if (strcmp(name, "LlamaForCausalLM") == 0) {
        cfg->arch = PK_HF_ARCH_LLAMA;
        cfg->has_qk_norm = 0;
    } else {
        return fail(c, PK_ERR_UNSUPPORTED,
                    "unsupported architecture '%.100s' in %s (pk runs Qwen3ForCausalLM, "
                    "LlamaForCausalLM)",
                    name, c->label);
    }
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", name);
    return PK_OK;
}

/* Things pk's decode graph does not implement, refused rather than run wrong. */
static pk_status parse_unsupported_features(const ctx *c, const cJSON *root) {
    const char *act;
    int flag;
    TRY(get_string(c, root, "hidden_act", &act));
    if (act && strcmp(act, "silu") != 0)
        return fail(c, PK_ERR_UNSUPPORTED,
                    "hidden_act '%.40s' in %s is not supported (pk runs silu)", act, c->label);
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (size_t i = 0; i < 2; i++) {
        TRY(get_bool(c, root, biases[i], 0, &flag));
        if (flag)
            return fail(c, PK_ERR_UNSUPPORTED, "'%s' = true in %s is not supported (pk's "
                        "projections have no bias)", biases[i], c->label);
    }
    TRY(get_bool(c, root, "use_sliding_window", 0, &flag));
    if (flag)
        return fail(c, PK_ERR_UNSUPPORTED,
                    "'use_sliding_window' = true in %s is not supported (pk runs full attention)",
                    c->label);
    const cJSON *lt = item(root, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt))
            return fail(c, PK_ERR_FORMAT, "'layer_types' in %s is not a list", c->label);
        int i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            if (!cJSON_IsString(e))
                return fail(c, PK_ERR_FORMAT, "'layer_types'[%d] in %s is not a string", i,
                            c->label);
            if (strcmp(e->valuestring, "full_attention") != 0)
                return fail(c, PK_ERR_UNSUPPORTED,
                            "'layer_types'[%d] = '%.40s' in %s is not supported (pk runs "
                            "full_attention)", i, e->valuestring, c->label);
        }
    }
    return PK_OK;
}

static pk_status parse_rope(const ctx *c, const cJSON *root, pk_hf_config *cfg) {
    const cJSON *params = item(root, "rope_parameters"); /* transformers 5 */
    const cJSON *scaling = item(root, "rope_scaling");   /* transformers 4 */
    if (params && !cJSON_IsObject(params))
        return fail(c, PK_ERR_FORMAT, "'rope_parameters' in %s is not an object", c->label);
    if (scaling && !cJSON_IsObject(scaling))
        return fail(c, PK_ERR_FORMAT, "'rope_scaling' in %s is neither null nor an object",
                    c->label);
    if (params) TRY(check_duplicate_keys(c, params));
    if (scaling) TRY(check_duplicate_keys(c, scaling));
    TRY(get_real(c, root, "", "rope_theta", 0, 10000.0, MIN_REAL, 1e30, &cfg->rope_theta));
    if (params && item(params, "rope_theta"))
        TRY(get_real(c, params, "rope_parameters.", "rope_theta", 1, 0.0, MIN_REAL, 1e30,
                     &cfg->rope_theta));

    const cJSON *sc = scaling ? scaling : params;
    const char *where = scaling ? "rope_scaling" : "rope_parameters";
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.", where);
    cfg->rope_scaling = PK_ROPE_SCALING_NONE;
    if (!sc) return PK_OK;
    const cJSON *type = item(sc, "rope_type");
    if (!type) type = item(sc, "type");
    if (!type) {
        if (scaling)
            return fail(c, PK_ERR_FORMAT, "'rope_scaling' in %s has no \"rope_type\"", c->label);
        return PK_OK; /* rope_parameters with only rope_theta */
    }
    if (!cJSON_IsString(type))
        return fail(c, PK_ERR_FORMAT, "'%s.rope_type' in %s is not a string", where, c->label);
    if (strcmp(type->valuestring, "default") == 0) return PK_OK;
    if (strcmp(type->valuestring, "llama3") != 0)
        return fail(c, PK_ERR_UNSUPPORTED,
                    "rope scaling type '%.40s' ('%s.rope_type') in %s is not supported (pk "
                    "runs none/default and llama3)",
                    type->valuestring, where, c->label);
    cfg->rope_scaling = PK_ROPE_SCALING_LLAMA3;
    int64_t orig;
    TRY(get_real(c, sc, prefix, "factor", 1, 0.0, MIN_REAL, 1e9, &cfg->rope_factor));
    TRY(get_real(c, sc, prefix, "low_freq_factor", 1, 0.0, MIN_REAL, 1e9,
                 &cfg->rope_low_freq_factor));
    TRY(get_real(c, sc, prefix, "high_freq_factor", 1, 0.0, MIN_REAL, 1e9,
                 &cfg->rope_high_freq_factor));
    TRY(get_int(c, sc, prefix, "original_max_position_embeddings", 1, 0, 1, INT32_MAX, &orig));
    cfg->rope_original_max_position = (int)orig;
    if (!((float)cfg->rope_high_freq_factor > (float)cfg->rope_low_freq_factor)) /* as fp32 */
        return fail(c, PK_ERR_FORMAT,
                    "%s in %s: high_freq_factor %g must exceed low_freq_factor %g", where,
                    c->label, cfg->rope_high_freq_factor, cfg->rope_low_freq_factor);
    return PK_OK;
}

static pk_status parse_tokens(const ctx *c, const cJSON *root, pk_hf_config *cfg) {
    TRY(get_int(c, root, "", "bos_token_id", 0, -1, 0, INT32_MAX, &cfg->bos_token_id));
    const cJSON *eos = item(root, "eos_token_id");
    cfg->eos_token_id = -1;
    cfg->num_eos_token_ids = 0;
    if (!eos) return PK_OK;
    if (cJSON_IsArray(eos)) {
        int i = 0;
        for (const cJSON *e = eos->child; e; e = e->next, i++) {
            char key[48];
            int64_t id = -1;
            snprintf(key, sizeof key, "eos_token_id[%d]", i);
            TRY(int_value(c, e, "", key, 0, INT32_MAX, &id));
            if (cfg->num_eos_token_ids < PK_HF_MAX_EOS)
                cfg->eos_token_ids[cfg->num_eos_token_ids++] = id;
        }
    } else {
        int64_t id = -1;
        TRY(int_value(c, eos, "", "eos_token_id", 0, INT32_MAX, &id));
        cfg->eos_token_ids[cfg->num_eos_token_ids++] = id;
    }
    if (cfg->num_eos_token_ids > 0) cfg->eos_token_id = cfg->eos_token_ids[0];
    return PK_OK;
}

static pk_status parse_root(const ctx *c, const cJSON *root, pk_hf_config *cfg) {
    TRY(check_duplicate_keys(c, root));
    TRY(parse_arch(c, root, cfg));
    TRY(get_int32(c, root, "vocab_size", 1, 0, 1, INT32_MAX, &cfg->vocab_size));
    TRY(get_int32(c, root, "hidden_size", 1, 0, 1, 1 << 20, &cfg->hidden_size));
    TRY(get_int32(c, root, "intermediate_size", 1, 0, 1, 1 << 22, &cfg->intermediate_size));
    TRY(get_int32(c, root, "num_hidden_layers", 1, 0, 1, 4096, &cfg->num_hidden_layers));
    TRY(get_int32(c, root, "num_attention_heads", 1, 0, 1, 4096, &cfg->num_attention_heads));
    const int hq = cfg->num_attention_heads;
    TRY(get_int32(c, root, "num_key_value_heads", 0, hq, 1, hq, &cfg->num_key_value_heads));
    if (cfg->num_key_value_heads < 1 || hq % cfg->num_key_value_heads != 0)
        return fail(c, PK_ERR_FORMAT,
                    "num_attention_heads %d in %s is not a multiple of num_key_value_heads %d",
                    hq, c->label, cfg->num_key_value_heads);
    if (item(root, "head_dim")) {
        TRY(get_int32(c, root, "head_dim", 1, 0, 1, PK_HF_MAX_HEAD_DIM, &cfg->head_dim));
    } else if (cfg->arch == PK_HF_ARCH_QWEN3) {
        cfg->head_dim = 128; /* transformers' Qwen3Config default */
    } else {
        if (cfg->hidden_size % hq != 0)
            return fail(c, PK_ERR_FORMAT,
                        "hidden_size %d in %s is not divisible by num_attention_heads %d (and "
                        "head_dim is not given)",
                        cfg->hidden_size, c->label, hq);
        cfg->head_dim = cfg->hidden_size / hq;
        if (cfg->head_dim > PK_HF_MAX_HEAD_DIM)
            return fail(c, PK_ERR_FORMAT,
                        "head_dim %d (hidden_size %d / num_attention_heads %d) in %s is larger "
                        "than %d",
                        cfg->head_dim, cfg->hidden_size, hq, c->label, PK_HF_MAX_HEAD_DIM);
    }
    if (cfg->head_dim % 2 != 0)
        return fail(c, PK_ERR_FORMAT, "head_dim %d in %s is odd (RoPE rotates pairs)",
                    cfg->head_dim, c->label);
    TRY(get_real(c, root, "", "rms_norm_eps", 0, 1e-6, MIN_REAL, 1.0, &cfg->rms_norm_eps));
    TRY(get_int32(c, root, "max_position_embeddings", 0,
                  cfg->arch == PK_HF_ARCH_QWEN3 ? 32768 : 2048, 1, INT32_MAX,
                  &cfg->max_position_embeddings));
    TRY(get_bool(c, root, "tie_word_embeddings", 0, &cfg->tie_word_embeddings));
    TRY(parse_rope(c, root, cfg));
    TRY(parse_tokens(c, root, cfg));
    TRY(parse_unsupported_features(c, root));
    const char *dt;
    TRY(get_string(c, root, "torch_dtype", &dt));
    if (!dt) TRY(get_string(c, root, "dtype", &dt));
    if (dt) snprintf(cfg->dtype, sizeof cfg->dtype, "%.15s", dt);
    return PK_OK;
}

pk_status pk_hf_config_parse(const char *buf, size_t len, const char *label, pk_hf_config *out,
                             char *err, size_t err_len) {
    ctx c = {label ? label : "config.json", err, err_len};
    if (err && err_len) err[0] = '\0';
    if (!out) return fail(&c, PK_ERR_INVALID_ARGUMENT, "pk_hf_config_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!buf && len) return fail(&c, PK_ERR_INVALID_ARGUMENT, "pk_hf_config_parse: buf is NULL");
    if (len > MAX_CONFIG_BYTES)
        return fail(&c, PK_ERR_FORMAT, "%s is %zu bytes, more than a config.json can be (%u)",
                    c.label, len, MAX_CONFIG_BYTES);
    char *text = malloc(len + 1);
    if (!text) return fail(&c, PK_ERR_NO_MEMORY, "out of memory reading %s", c.label);
    if (len) memcpy(text, buf, len);
    text[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    pk_status s = PK_OK;
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        s = fail(&c, PK_ERR_FORMAT, "%s is not valid JSON (error near byte %zu)", c.label, at);
    } else {
        for (const char *q = end; q && q < text + len; q++) {
            if (*q != ' ' && *q != '\t' && *q != '\r' && *q != '\n') {
                s = fail(&c, PK_ERR_FORMAT, "%s: unexpected bytes after the JSON object (at "
                         "byte %zu)", c.label, (size_t)(q - text));
                break;
            }
        }
        if (s == PK_OK && !cJSON_IsObject(root))
            s = fail(&c, PK_ERR_FORMAT, "%s is not a JSON object", c.label);
        if (s == PK_OK) s = parse_root(&c, root, out);
    }
    cJSON_Delete(root);
    free(text);
    if (s != PK_OK) memset(out, 0, sizeof *out);
    return s;
}

pk_status pk_hf_config_load(const char *dir, pk_hf_config *out, char *err, size_t err_len) {
    if (err && err_len) err[0] = '\0';
    if (out) memset(out, 0, sizeof *out);
    if (!dir || !out) {
        if (err && err_len) snprintf(err, err_len, "pk_hf_config_load: %s is NULL",
                                     dir ? "out" : "dir");
        return PK_ERR_INVALID_ARGUMENT;
    }
    size_t plen = strlen(dir) + sizeof "/config.json";
    char *path = malloc(plen);
    if (!path) {
        if (err && err_len) snprintf(err, err_len, "out of memory");
        return PK_ERR_NO_MEMORY;
    }
    snprintf(path, plen, "%s/config.json", dir);
    char *buf = NULL;
    size_t n = 0;
    pk_status s = pk_file_read_capped(path, MAX_CONFIG_BYTES, "a config.json", &buf, &n, err, err_len);
    if (s == PK_OK) s = pk_hf_config_parse(buf, n, path, out, err, err_len);
    free(buf);
    free(path);
    return s;
}

void pk_hf_config_attention_params(const pk_hf_config *c, pk_attention_params *out) {
    if (!c || !out) return;
    memset(out, 0, sizeof *out);
    out->num_q_heads = c->num_attention_heads;
    out->num_kv_heads = c->num_key_value_heads;
    out->head_dim = c->head_dim;
    out->rope_theta = (float)c->rope_theta;
    out->rope_scaling = c->rope_scaling;
    out->rope_factor = (float)c->rope_factor;
    out->rope_low_freq_factor = (float)c->rope_low_freq_factor;
    out->rope_high_freq_factor = (float)c->rope_high_freq_factor;
    out->rope_original_max_position = c->rope_original_max_position;
    out->qk_norm_eps = (float)c->rms_norm_eps;
}
