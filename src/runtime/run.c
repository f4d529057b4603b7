/* run.c — pk_compile and pk_run: the backend-independent part of compiling and running. */
#include <string.h>
#include <sys/stat.h>

#include "runtime/runtime.h"

pk_status pk_compile(pk_kernel *k, const pk_compile_options *opts) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (k->compiled) return pk_fail(k, PK_ERR_STATE, "pk_compile: the kernel is compiled already");
    s = pk_taskgraph_build(k);
    if (s != PK_OK) return s;
    /* Outputs first, the backend next; any failure leaves the kernel uncompiled. */
    if (opts && opts->output_dir) {
        struct stat st;
        if (mkdir(opts->output_dir, 0755) != 0 && (stat(opts->output_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
            s = pk_fail(k, PK_ERR_IO, "pk_compile: cannot create output directory '%s'", opts->output_dir);
        char path[1200];
        snprintf(path, sizeof path, "%s/task_graph.json", opts->output_dir);
        if (s == PK_OK) s = pk_taskgraph_write_json(k, path);
    }
    if (s == PK_OK && k->cfg.backend == PK_BACKEND_CUDA) s = pk_cuda_compile(k, opts);
    if (s != PK_OK) {
        pk_taskgraph_free(&k->graph);
        return s;
    }
    k->compiled = 1;
    return PK_OK;
}

pk_status pk_write_task_graph(pk_kernel *k, const char *path) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (!path) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_write_task_graph: path is NULL");
    if (!k->compiled) return pk_fail(k, PK_ERR_STATE, "pk_write_task_graph: compile the kernel first");
    return pk_taskgraph_write_json(k, path);
}

pk_status pk_run(pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token, void *user) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (!k->compiled) return pk_fail(k, PK_ERR_STATE, "pk_run: compile the kernel first");
    pk_tensor *out = k->tensors[k->t_step_output];
    if (out->producer < 0)
        return pk_fail(k, PK_ERR_STATE, "pk_run: no layer writes pk_step_output(k): add pk_argmax_layer(k, logits, "
                                        "pk_step_output(k), grid)");
    /* Generated ids are fed back to the embedding: the argmax must not pick ids past its rows.
     * pk_argmax_layer adds the partial layer (reading the logits) just before the reduce. */
    PK_ASSERT(out->producer >= 1 && k->layers[out->producer - 1].kind == PK_TASK_ARGMAX_PARTIAL);
    const pk_layer *partial = &k->layers[out->producer - 1];
    const pk_tensor *logits = k->tensors[partial->inputs[0]];
    if (k->vocab_size > 0 && logits->dims[1] > k->vocab_size)
        return pk_fail(k, PK_ERR_SHAPE,
                       "pk_run: the argmax into pk_step_output reads logits '%s' of %lld columns, more than "
                       "the %d rows of the embedding: generated ids would index past it",
                       logits->name, (long long)logits->dims[1], k->vocab_size);
    pk_decode d;
    s = pk_decode_init(&d, k, reqs, n, on_token, user);
    if (s != PK_OK) return s;
    k->steps_run = 0;
    s = k->cfg.backend == PK_BACKEND_CUDA ? pk_cuda_run(k, &d) : pk_cpu_run(k, &d);
    pk_decode_free(&d);
    return s;
}

void pk_runtime_free(pk_kernel *k) {
    if (k->cfg.backend == PK_BACKEND_CUDA) pk_cuda_free(k);
}
