/* cuda_stub.c — placeholder for the CUDA backend until src/runtime/cuda lands: every entry
 * point reports that the backend is not built. Replaced by the real backend (issue 4). */
#include "runtime/runtime.h"

pk_status pk_cuda_compile(pk_kernel *k, const pk_compile_options *opts) {
    (void)opts;
    return pk_fail(k, PK_ERR_UNSUPPORTED, "pk_compile: the CUDA backend is not built into this pk yet");
}

pk_status pk_cuda_run(pk_kernel *k, pk_decode *d) {
    (void)d;
    return pk_fail(k, PK_ERR_UNSUPPORTED, "pk_run: the CUDA backend is not built into this pk yet");
}

pk_status pk_cuda_read_tensor(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes) {
    (void)t, (void)dst, (void)bytes;
    return pk_fail(k, PK_ERR_UNSUPPORTED, "pk_tensor_read: the CUDA backend is not built into this pk yet");
}

void pk_cuda_free(pk_kernel *k) { (void)k; }
