/* device_query.c — how many workers "auto" (num_workers 0) means: the CPU's online cores, or
 * the GPU's streaming multiprocessors (one worker CTA per SM). The GPU is asked through the
 * driver API loaded with dlopen, so libpk has no link-time dependency on CUDA.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "kernels/attention_decode_layout.h"
#include "kernels/stage_layout.h" /* PK_WSTAGE_BYTES */
#include "runtime/runtime.h"

#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16

int pk_cpu_core_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

pk_status pk_cuda_sm_count(int *out, char *err, size_t err_len) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, err_len, "no CUDA GPU found: the NVIDIA driver library libcuda.so.1 is not installed");
        return PK_ERR_BACKEND;
    }
    typedef int (*init_fn)(unsigned);
    typedef int (*count_fn)(int *);
    typedef int (*get_fn)(int *, int);
    typedef int (*attr_fn)(int *, int, int);
    init_fn cu_init = (init_fn)dlsym(lib, "cuInit");
    count_fn cu_count = (count_fn)dlsym(lib, "cuDeviceGetCount");
    get_fn cu_get = (get_fn)dlsym(lib, "cuDeviceGet");
    attr_fn cu_attr = (attr_fn)dlsym(lib, "cuDeviceGetAttribute");
    int n = 0, dev = 0, sms = 0, rc;
    pk_status st = PK_OK;
    if (!cu_init || !cu_count || !cu_get || !cu_attr) {
        snprintf(err, err_len, "no CUDA GPU found: libcuda.so.1 lacks the driver API");
        st = PK_ERR_BACKEND;
    } else if ((rc = cu_init(0)) != 0) {
        snprintf(err, err_len, "no CUDA GPU found: cuInit failed with CUDA error %d", rc);
        st = PK_ERR_BACKEND;
    } else if (cu_count(&n) != 0 || n < 1) {
        snprintf(err, err_len, "no CUDA GPU found: the driver reports %d devices", n);
        st = PK_ERR_BACKEND;
    } else if (cu_get(&dev, 0) != 0 || cu_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != 0 || sms < 1) {
        snprintf(err, err_len, "no CUDA GPU found: cannot read the multiprocessor count of device 0");
        st = PK_ERR_BACKEND;
    }
    dlclose(lib);
    if (st == PK_OK) *out = sms;
    return st;
}

pk_status pk_kernel_device_info(const pk_kernel *k, pk_device_info *out) {
    if (!k || !out) return PK_ERR_INVALID_ARGUMENT;
    out->workers = k->cfg.num_workers;
    out->stage_bytes = k->cfg.backend == PK_BACKEND_CUDA ? (int64_t)PK_WSTAGE_BYTES : 0;
    return PK_OK;
}

int pk_kernel_attention_reach(const pk_kernel *k, int head_dim, int q_heads_per_kv_head) {
    if (!k || k->cfg.backend != PK_BACKEND_CUDA) return 0;
    if (!pk_attd_shape_ok(head_dim, q_heads_per_kv_head)) return -1;
    return pk_attd_max_positions(head_dim, q_heads_per_kv_head, PK_ATTD_STATIC_SMEM_BYTES);
}
