// SPDX-License-Identifier: Apache-2.0
/* trace.c — writes executed tasks as a Chrome trace-event JSON file, which Perfetto
 * (ui.perfetto.dev) and chrome://tracing open: one track (tid) per worker, one complete event
 * ("ph": "X") per task, named "<layer>.<task index>", with the step and the layer's first output
 * tensor (which tells the layers of one kind apart: "qkv" and "gate_up") in its args.
 */
#include <inttypes.h>

#include "common/json_write.h"
#include "runtime/cpu/cpu_runtime.h"

pk_status pk_trace_write(pk_kernel *k, const char *path, pk_trace_record *const *recs, const size_t *n,
                         int nworkers) {
    FILE *f = fopen(path, "w");
    if (!f) return pk_fail(k, PK_ERR_IO, "trace: cannot write '%s'", path);
    uint64_t t0 = UINT64_MAX;
    for (int w = 0; w < nworkers; w++)
        if (n[w] && recs[w][0].start_ns < t0) t0 = recs[w][0].start_ns;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    int first = 1;
    for (int w = 0; w < nworkers; w++) {
        fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"worker %d\"}}",
                first ? "" : ",\n", w, w);
        first = 0;
        for (size_t i = 0; i < n[w]; i++) {
            const pk_trace_record *r = &recs[w][i];
            const pk_task *t = &k->graph.tasks[r->task];
            const pk_layer *l = &k->layers[t->layer];
            const char *out = l->noutputs > 0 && l->outputs[0] >= 0 ? k->tensors[l->outputs[0]]->name : "";
            fprintf(f, ",\n{\"name\":\"%s.%u\",\"cat\":\"task\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"task\":%u,\"step\":%u,\"out\":",
                    l->name, t->index, w, (double)(r->start_ns - t0) / 1e3, (double)(r->end_ns - r->start_ns) / 1e3,
                    r->task, r->step);
            pk_json_write_string(f, out);
            fputs("}}", f);
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) return pk_fail(k, PK_ERR_IO, "trace: error writing '%s'", path);
    return PK_OK;
}
