# SPDX-License-Identifier: Apache-2.0
"""_lib.py — libpk.so through ctypes: finding it, and pk.h's structs and prototypes.

The library is looked up in this order: $PK_LIBRARY (a path to libpk.so); the source tree's
build/libpk.so when this package runs from the tree (python/pk/ beside build/); libpk.so under
$PK_PREFIX/lib, sys.prefix/lib and /usr/local/lib (`make install`'s default PREFIX); the dynamic
loader's search path (ldconfig, LD_LIBRARY_PATH). The structs mirror pk.h field by field;
tests/test_python.sh checks their sizes and offsets against a C compiler's.
"""
import ctypes
import ctypes.util
import os
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_uint64,
                    c_int64, c_size_t, c_void_p)

PK_MAX_DIMS = 4


class Config(Structure):
    _fields_ = [("world_size", c_int), ("rank", c_int), ("num_workers", c_int), ("num_local_schedulers", c_int),
                ("num_remote_schedulers", c_int), ("max_seq_length", c_int), ("max_requests", c_int),
                ("max_tokens_per_step", c_int), ("page_size", c_int), ("num_pages", c_int),
                ("eos_token_id", c_int64), ("sched_mode", c_int), ("backend", c_int), ("trace_path", c_char_p),
                ("cache_dir", c_char_p), ("attention_kv_splits", c_int), ("spec_length", c_int),
                ("spec_ngram", c_int), ("prefix_cache", c_int), ("all_logits", c_int)]


class DeviceInfo(Structure):
    _fields_ = [("workers", c_int), ("stage_bytes", c_int64)]


class AttentionParams(Structure):
    _fields_ = [("num_q_heads", c_int), ("num_kv_heads", c_int), ("head_dim", c_int), ("rope_theta", c_float),
                ("rope_scaling", c_int), ("rope_factor", c_float), ("rope_low_freq_factor", c_float),
                ("rope_high_freq_factor", c_float), ("rope_original_max_position", c_int),
                ("qk_norm_eps", c_float), ("kv_splits", c_int)]


class CompileOptions(Structure):
    _fields_ = [("output_dir", c_char_p)]


class Sampling(Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int), ("top_p", c_float), ("min_p", c_float),
                ("seed", c_uint64)]


class Request(Structure):
    _fields_ = [("prompt", POINTER(c_int32)), ("prompt_len", c_int), ("max_new_tokens", c_int),
                ("output", POINTER(c_int32)), ("num_output", c_int), ("finish", c_int), ("sampling", Sampling),
                ("num_cached", c_int)]


class GraphStats(Structure):
    _fields_ = [("num_layers", c_int), ("num_tasks", c_int), ("num_events", c_int), ("num_workers", c_int),
                ("steps_run", c_int64), ("spec_drafted", c_int64), ("spec_accepted", c_int64)]


class LayerInfo(Structure):
    _fields_ = [("name", c_char_p), ("kind", c_char_p), ("grid", c_int), ("first_task", c_int)]


class StepTimes(Structure):
    _fields_ = [("num_steps", c_int64), ("num_timed", c_int64), ("ms", POINTER(c_double)),
                ("rows", POINTER(c_int32)), ("prompt_rows", POINTER(c_int32))]


class MemoryStats(Structure):
    _fields_ = [("weight_bytes", c_int64), ("kv_cache_bytes", c_int64), ("workspace_bytes", c_int64),
                ("on_device", c_int)]


class ModelInfo(Structure):
    _fields_ = [("architecture", c_char * 64), ("vocab_size", c_int), ("hidden_size", c_int),
                ("intermediate_size", c_int), ("num_layers", c_int), ("num_q_heads", c_int),
                ("num_kv_heads", c_int), ("head_dim", c_int), ("max_position_embeddings", c_int),
                ("tie_word_embeddings", c_int), ("has_qk_norm", c_int), ("bos_token_id", c_int64),
                ("eos_token_id", c_int64), ("weight_bytes", c_int64), ("attention_kv_splits", c_int)]


class ModelOptions(Structure):
    _fields_ = [("fused_mlp", c_int), ("lm_head_argmax", c_int), ("check_tensors", c_int)]


# void (*pk_token_fn)(void *user, int request, int32_t token, int row)
TOKEN_FN = CFUNCTYPE(None, c_void_p, c_int, c_int32, c_int)

K = c_void_p  # pk_kernel *
T = c_void_p  # pk_tensor *
I64P = POINTER(c_int64)

# name: (restype, argtypes), as pk.h declares them.
_PROTOTYPES = {
    "pk_status_name": (c_char_p, [c_int]),
    "pk_dtype_size": (c_size_t, [c_int]),
    "pk_dtype_name": (c_char_p, [c_int]),
    "pk_config_default": (Config, []),
    "pk_kernel_new": (K, [POINTER(Config)]),
    "pk_kernel_free": (None, [K]),
    "pk_kernel_status": (c_int, [K]),
    "pk_kernel_error": (c_char_p, [K]),
    "pk_kernel_config": (POINTER(Config), [K]),
    "pk_kernel_device_info": (c_int, [K, POINTER(DeviceInfo)]),
    "pk_kernel_attention_reach": (c_int, [K, c_int, c_int]),
    "pk_attach_input": (T, [K, c_char_p, c_int, c_int, I64P, I64P, c_void_p]),
    "pk_new_tensor": (T, [K, c_char_p, c_int, c_int, I64P, c_int]),
    "pk_fuse_tensors": (T, [K, c_char_p, POINTER(T), c_int, c_int, c_int]),
    "pk_tensor_ndim": (c_int, [T]),
    "pk_tensor_dim": (c_int64, [T, c_int]),
    "pk_tensor_dtype": (c_int, [T]),
    "pk_tensor_name": (c_char_p, [T]),
    "pk_find_tensor": (T, [K, c_char_p]),
    "pk_tensor_read": (c_int, [K, T, c_void_p, c_size_t]),
    "pk_step_tokens": (T, [K]),
    "pk_step_output": (T, [K]),
    "pk_embedding_layer": (c_int, [K, T, T, T, c_int]),
    "pk_rmsnorm_layer": (c_int, [K, T, T, T, c_float, c_int]),
    "pk_rmsnorm_linear_layer": (c_int, [K, T, T, T, T, c_float, c_int]),
    "pk_rmsnorm_linear_swiglu_layer": (c_int, [K, T, T, T, c_int, T, c_float, c_int]),
    "pk_rmsnorm_swiglu_down_layer": (c_int, [K, T, T, T, T, T, c_float, c_int]),
    "pk_rmsnorm_linear_acc_layer": (c_int, [K, T, T, T, T, T, T, c_float, c_int]),
    "pk_linear_layer": (c_int, [K, T, T, T, c_int]),
    "pk_linear_with_residual_layer": (c_int, [K, T, T, T, T, c_int]),
    "pk_linear_with_residual_clear_layer": (c_int, [K, T, T, T, T, T, c_int]),
    "pk_linear_splitk_with_residual_layer": (c_int, [K, T, T, T, T, c_int]),
    "pk_silu_mul_layer": (c_int, [K, T, T, c_int]),
    "pk_silu_mul_linear_with_residual_layer": (c_int, [K, T, T, T, T, c_int]),
    "pk_attention_layer": (c_int, [K, T, T, T, T, T, T, POINTER(AttentionParams), c_int]),
    "pk_argmax_layer": (c_int, [K, T, T, c_int]),
    "pk_rmsnorm_linear_argmax_layer": (c_int, [K, T, T, T, T, T, c_float, c_int]),
    "pk_compile": (c_int, [K, POINTER(CompileOptions)]),
    "pk_run": (c_int, [K, POINTER(Request), c_int, TOKEN_FN, c_void_p]),
    "pk_cancel": (None, [K]),
    "pk_session_open": (c_int, [K, c_int, TOKEN_FN, c_void_p]),
    "pk_session_submit": (c_int, [K, POINTER(Request), POINTER(c_int)]),
    "pk_session_cancel": (c_int, [K, c_int]),
    "pk_session_poll": (c_int, [K, c_int, POINTER(c_int)]),
    "pk_session_close": (c_int, [K]),
    "pk_kernel_stats": (c_int, [K, POINTER(GraphStats)]),
    "pk_kernel_layer": (c_int, [K, c_int, POINTER(LayerInfo)]),
    "pk_write_task_graph": (c_int, [K, c_char_p]),
    "pk_run_step_times": (c_int, [K, POINTER(StepTimes)]),
    "pk_kernel_memory": (c_int, [K, POINTER(MemoryStats)]),
    "pk_device_copy_bandwidth": (c_int, [K, POINTER(c_double)]),
    "pk_model_options_default": (ModelOptions, []),
    "pk_model_load_with": (c_void_p, [c_char_p, POINTER(Config), POINTER(ModelOptions), c_char_p, c_size_t]),
    "pk_model_load": (c_void_p, [c_char_p, POINTER(Config), c_char_p, c_size_t]),
    "pk_model_read_info": (c_int, [c_char_p, POINTER(ModelInfo), c_char_p, c_size_t]),
    "pk_model_free": (None, [c_void_p]),
    "pk_model_kernel": (K, [c_void_p]),
    "pk_model_get_info": (POINTER(ModelInfo), [c_void_p]),
    "pk_model_logits": (T, [c_void_p]),
    "pk_tokenizer_load": (c_void_p, [c_char_p, c_char_p, c_size_t]),
    "pk_tokenizer_free": (None, [c_void_p]),
    "pk_tokenizer_vocab_size": (c_int, [c_void_p]),
    "pk_tokenizer_token_id": (c_int32, [c_void_p, c_char_p]),
    "pk_tokenizer_encode": (c_int, [c_void_p, c_char_p, c_size_t, POINTER(c_int32), c_int]),
    "pk_tokenizer_error": (c_char_p, [c_void_p]),
    "pk_decoder_new": (c_void_p, [c_void_p]),
    "pk_decoder_free": (None, [c_void_p]),
    "pk_decoder_push": (c_int, [c_void_p, c_int32, c_char_p, c_size_t]),
    "pk_decoder_flush": (c_int, [c_void_p, c_char_p, c_size_t]),
    "pk_tokenizer_chat_prompt": (c_void_p, [c_void_p, c_char_p]),
}


def candidates():
    """The paths tried, in order (see the module's docstring)."""
    out = []
    env = os.environ.get("PK_LIBRARY")
    if env:
        return [env]  # an explicit choice: no fallback that would hide a wrong path
    tree = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "libpk.so")
    out.append(os.path.normpath(tree))
    prefixes = [os.environ.get("PK_PREFIX"), sys.prefix, "/usr/local"]
    out += [os.path.join(p, "lib", "libpk.so") for p in prefixes if p]
    found = ctypes.util.find_library("pk")
    out.append(found or "libpk.so.0")
    return out


def _load():
    tried = []
    for path in candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        for name, (res, args) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise OSError(f"{path} lacks {name}: it is not the libpk.so of this package's pk.h") from None
            fn.restype, fn.argtypes = res, args
        lib.path = path
        return lib
    raise OSError("libpk.so not found; build it with `make` (build/libpk.so), `make install`, or set PK_LIBRARY "
                  "to its path. Tried: " + "; ".join(tried))


lib = _load()
libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None
