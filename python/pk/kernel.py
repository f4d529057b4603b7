# SPDX-License-Identifier: Apache-2.0
"""kernel.py — pk.PersistentKernel, the seed's (MPK's) Python class over pk.h's kernel.

A PersistentKernel owns one pk_kernel: tensors are attached or made on it, layers added in
order, then compile() and calls run requests. Every C failure raises the pk.Error subclass of
its status with the kernel's message. The object keeps every attached array (and what
pk_attach_input points into) alive until finalize(), so callers may drop their references.
Tensor handles are checked to belong to this kernel and to a kernel not yet finalized before
any pointer reaches C.
"""
import ctypes
import dataclasses
import os
import queue
import tempfile
import threading

import numpy as np

from . import _lib, arrays, errors
from ._lib import lib

BACKENDS = {"cpu": 0, "cuda": 1}
SCHED_MODES = {"static": 0, "dynamic": 1}
IO_CATEGORIES = {"cuda_tensor": 0, "nvshmem_tensor": 1}
FINISH = {0: "none", 1: "eos", 2: "length", 3: "cancelled"}


def _b(s):
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else s.encode()


def grid_of(grid_dim):
    """pk's grid from MPK's grid_dim: an int, or a tuple whose entries are multiplied (pk splits
    each layer along one dimension; pk.h names it per layer)."""
    if isinstance(grid_dim, (tuple, list)):
        g = 1
        for x in grid_dim:
            g *= int(x)
        return g
    if isinstance(grid_dim, (int, np.integer)) and not isinstance(grid_dim, bool):
        return int(grid_dim)
    raise errors.InvalidArgumentError(f"grid_dim {grid_dim!r} is neither an int nor a tuple of ints")


class Tensor:
    """A handle on a pk_tensor (MPK's DTensor): name, dims, dtype; numpy() reads its contents."""

    def __init__(self, kernel, ptr):
        self._kernel = kernel
        self._ptr = ptr
        self.name = lib.pk_tensor_name(ptr).decode()
        self.dims = tuple(lib.pk_tensor_dim(ptr, i) for i in range(lib.pk_tensor_ndim(ptr)))
        self.dtype = arrays.dtype(lib.pk_tensor_dtype(ptr))

    num_dims = property(lambda self: len(self.dims))
    shape = property(lambda self: self.dims)

    def dim(self, i):
        return self.dims[i]

    def numpy(self):
        """A copy of the tensor's contents (pk_tensor_read); bf16 comes as uint16 bits
        (pk.bf16_to_float32 converts). After a run: the values of its last step."""
        k = self._kernel._handle()
        out = np.empty(self.dims, dtype=arrays.NUMPY_OF[self.dtype])
        self._kernel._check(lib.pk_tensor_read(k, self._ptr, out.ctypes.data, out.nbytes))
        return out

    def __repr__(self):
        return f"pk.Tensor({self.name!r}, dims={self.dims}, dtype={self.dtype!r})"


@dataclasses.dataclass
class PromptLookupConfig:
    """MPK's spec_decode_config for prompt-lookup speculation: drafts of up to spec_length tokens
    found by matching the latest ngram_size tokens against the request's earlier ones."""
    method: str = "promptlookup"
    ngram_size: int = 3
    spec_length: int = 5


class PersistentKernel:
    """The seed's PersistentKernel over pk.h. Arguments as MPK's; pk's extras (max_num_batched_*,
    page sizes, backend, sched_mode) are keywords. See docs/PYTHON.md for meta_tensors and
    profiler_tensor."""

    def __init__(self, world_size=1, mpi_rank=0, num_workers=0, num_local_schedulers=1, num_remote_schedulers=0,
                 max_seq_length=512, eos_token_id=-1, meta_tensors=None, profiler_tensor=None,
                 spec_decode_config=None, backend="cpu", *, mode="offline", max_num_batched_requests=4,
                 max_num_batched_tokens=64, page_size=16, max_num_pages=0, sched_mode="static", trace_name=None,
                 cache_dir=None, attention_kv_splits=0):
        self._k = None
        self._keep = []  # every attached array: pk reads them until pk_kernel_free
        spec_length, spec_ngram = self._spec(spec_decode_config)
        if mode != "offline":
            raise errors.UnsupportedError(f"mode {mode!r}: pk runs requests to completion (MPK's 'offline')")
        if backend not in BACKENDS:
            raise errors.InvalidArgumentError(f"backend {backend!r} is not 'cpu' or 'cuda'")
        if sched_mode not in SCHED_MODES:
            raise errors.InvalidArgumentError(f"sched_mode {sched_mode!r} is not 'static' or 'dynamic'")
        if meta_tensors is not None and not isinstance(meta_tensors, dict):
            raise errors.InvalidArgumentError(f"meta_tensors is a {type(meta_tensors).__name__}, not a dict")
        self.meta_tensors = meta_tensors if meta_tensors is not None else {}
        self.profiler_tensor = profiler_tensor
        if profiler_tensor is not None:
            self._profile = self._profiler_view(profiler_tensor)
        self.trace_name = trace_name
        self.trace = None  # the last run's trace (JSON text) when profiling
        self._trace_dir = tempfile.mkdtemp(prefix="pk-trace-") if profiler_tensor is not None else None
        cfg = lib.pk_config_default()
        for field, value in (("world_size", world_size), ("rank", mpi_rank), ("num_workers", num_workers),
                             ("num_local_schedulers", num_local_schedulers),
                             ("num_remote_schedulers", num_remote_schedulers), ("max_seq_length", max_seq_length),
                             ("max_requests", max_num_batched_requests),
                             ("max_tokens_per_step", max_num_batched_tokens), ("page_size", page_size),
                             ("num_pages", max_num_pages), ("attention_kv_splits", attention_kv_splits)):
            setattr(cfg, field, self._int(field, value))
        cfg.eos_token_id = self._int("eos_token_id", eos_token_id)
        cfg.spec_length, cfg.spec_ngram = spec_length, spec_ngram
        cfg.backend, cfg.sched_mode = BACKENDS[backend], SCHED_MODES[sched_mode]
        self._strings = (_b(os.path.join(self._trace_dir, "trace.json")) if self._trace_dir else None, _b(cache_dir))
        cfg.trace_path, cfg.cache_dir = self._strings
        k = lib.pk_kernel_new(ctypes.byref(cfg))
        if not k:
            raise errors.NoMemoryError("pk_kernel_new: out of memory")
        status = lib.pk_kernel_status(k)
        if status != errors.PK_OK:
            message = lib.pk_kernel_error(k).decode()
            lib.pk_kernel_free(k)
            raise errors.from_status(status, message)
        self._k = k
        self._compiled = False
        self._argmax_partial = None
        self.finish_reasons = []
        c = lib.pk_kernel_config(k).contents
        self.backend, self.world_size, self.mpi_rank = backend, c.world_size, c.rank
        self.num_workers, self.num_local_schedulers = c.num_workers, c.num_local_schedulers
        self.num_remote_schedulers, self.max_seq_length = c.num_remote_schedulers, c.max_seq_length
        self.max_num_batched_requests, self.max_num_batched_tokens = c.max_requests, c.max_tokens_per_step
        self.page_size, self.max_num_pages, self.eos_token_id = c.page_size, c.num_pages, c.eos_token_id
        self.step_tokens = Tensor(self, lib.pk_step_tokens(k))  # int32 [T]: the embedding's input
        self.step_output = Tensor(self, lib.pk_step_output(k))  # int32 [T]: the argmax's output

    @staticmethod
    def _int(name, v):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise errors.InvalidArgumentError(f"{name} is {v!r}, not an int")
        return int(v)

    @staticmethod
    def _profiler_view(t):
        """The profiler tensor's memory as writable host bytes (numpy, or torch on the CPU)."""
        arr = t.numpy() if type(t).__module__.split(".")[0] == "torch" and t.device.type == "cpu" else t
        if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous or not arr.flags.writeable:
            raise errors.InvalidArgumentError("profiler_tensor must be a writable C-contiguous numpy array or CPU "
                                              "torch tensor (it receives the run's trace)")
        return arr.reshape(-1).view(np.uint8)

    # ---- plumbing ---------------------------------------------------------------------------

    def _handle(self):
        if self._k is None:
            raise errors.StateError("the PersistentKernel was finalized")
        return self._k

    def _check(self, status):
        if status != errors.PK_OK:
            raise errors.from_status(status, lib.pk_kernel_error(self._k).decode())

    def _tensor(self, ptr):
        if not ptr:
            self._check(lib.pk_kernel_status(self._k) or 1)
        return Tensor(self, ptr)

    def _t(self, t, what, optional=False):
        """The C pointer of a Tensor argument of this kernel (None where optional)."""
        if t is None and optional:
            return None
        if not isinstance(t, Tensor):
            raise errors.InvalidArgumentError(f"{what} is a {type(t).__name__}, not a pk.Tensor")
        if t._kernel is not self:
            raise errors.InvalidArgumentError(f"{what} '{t.name}' belongs to another PersistentKernel")
        return t._ptr

    def _layer(self, fn, *args):
        self._handle()
        self._check(fn(self._k, *args))

    # ---- tensors ----------------------------------------------------------------------------

    def attach_input(self, torch_tensor=None, name=None, dtype=None, *, tensor=None):
        """Wraps the caller's array as an input tensor (weights, tables), without a copy where it
        is in host memory. Row-major only (pk_attach_input's check). The kernel keeps the array
        alive until finalize(). dtype=pk.bfloat16 declares a uint16 array's bits as bf16."""
        k = self._handle()
        obj = tensor if tensor is not None else torch_tensor
        ptr, dims, strides, d, owner = arrays.describe(obj, dtype)
        n = len(dims)  # pk_attach_input checks it (1 to PK_MAX_DIMS)
        t = self._tensor(lib.pk_attach_input(k, _b(name), d, n, (ctypes.c_int64 * max(1, n))(*dims),
                                             (ctypes.c_int64 * max(1, n))(*strides), ptr))
        self._keep.append(owner)
        t._owner = owner
        return t

    def new_tensor(self, dims, strides=None, dtype=arrays.bfloat16, name=None, io_category="cuda_tensor"):
        """A pk-owned tensor (activations, KV caches), zero-filled. io_category 'cuda_tensor': this
        rank's memory; 'nvshmem_tensor': shared by every rank (one rank on the CPU)."""
        k = self._handle()
        try:
            dims = tuple(int(x) for x in dims)
        except (TypeError, ValueError):
            raise errors.InvalidArgumentError(f"new_tensor '{name}': dims {dims!r} are not a tuple of ints") from None
        n = len(dims)
        if strides is not None:
            expect, row_major = 1, []
            for x in reversed(dims):
                row_major.insert(0, expect)
                expect *= x
            if tuple(strides) != tuple(row_major):
                raise errors.StrideError(f"new_tensor '{name}': strides {tuple(strides)} of dims {dims} are not "
                                         f"row-major {tuple(row_major)}; pk's tensors are row-major")
        if io_category not in IO_CATEGORIES:
            raise errors.InvalidArgumentError(f"new_tensor '{name}': io_category {io_category!r} is not "
                                              "'cuda_tensor' or 'nvshmem_tensor'")
        return self._tensor(lib.pk_new_tensor(k, _b(name), arrays.as_dtype(dtype), n,
                                              (ctypes.c_int64 * max(1, n))(*dims),
                                              IO_CATEGORIES[io_category]))

    def fuse_tensors(self, inputs, fused_dim=0, num_groups=1, name=None):
        """pk_fuse_tensors: the inputs' rows in num_groups groups along dim 0, without a copy."""
        k = self._handle()
        ptrs = [self._t(t, f"inputs[{i}]") for i, t in enumerate(inputs)]
        arr = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
        return self._tensor(lib.pk_fuse_tensors(k, _b(name), arr, len(ptrs), self._int("fused_dim", fused_dim),
                                                self._int("num_groups", num_groups)))

    def find_tensor(self, name):
        p = lib.pk_find_tensor(self._handle(), _b(name))
        return Tensor(self, p) if p else None

    # ---- layers: MPK's names and arguments where MPK has the layer --------------------------

    def embed_layer(self, input, weight, output, grid_dim, block_dim=None, input_source=0):
        """out[t] = weight[tokens[t]]; input must be self.step_tokens; grid splits H."""
        self._layer(lib.pk_embedding_layer, self._t(input, "input"), self._t(weight, "weight"),
                    self._t(output, "output"), grid_of(grid_dim))

    def rmsnorm_layer(self, input, weight, output, grid_dim, block_dim=None, eps=1e-6):
        self._layer(lib.pk_rmsnorm_layer, self._t(input, "input"), self._t(weight, "weight"),
                    self._t(output, "output"), eps, grid_of(grid_dim))

    def rmsnorm_linear_layer(self, input, weight_norm, weight_linear, output, grid_dim, block_dim=None, eps=1e-6):
        self._layer(lib.pk_rmsnorm_linear_layer, self._t(input, "input"), self._t(weight_norm, "weight_norm"),
                    self._t(weight_linear, "weight_linear"), self._t(output, "output"), eps, grid_of(grid_dim))

    def linear_layer(self, input, weight, output, grid_dim, block_dim=None):
        self._layer(lib.pk_linear_layer, self._t(input, "input"), self._t(weight, "weight"),
                    self._t(output, "output"), grid_of(grid_dim))

    def linear_with_residual_layer(self, input, weight, residual, output, grid_dim, block_dim=None):
        self._layer(lib.pk_linear_with_residual_layer, self._t(input, "input"), self._t(weight, "weight"),
                    self._t(residual, "residual"), self._t(output, "output"), grid_of(grid_dim))

    def silu_mul_layer(self, input, output, grid_dim, block_dim=None):
        self._layer(lib.pk_silu_mul_layer, self._t(input, "input"), self._t(output, "output"), grid_of(grid_dim))

    def silu_mul_linear_with_residual_layer(self, input, weight, residual, output, grid_dim, block_dim=None):
        self._layer(lib.pk_silu_mul_linear_with_residual_layer, self._t(input, "input"), self._t(weight, "weight"),
                    self._t(residual, "residual"), self._t(output, "output"), grid_of(grid_dim))

    def attention_layer(self, input, k_cache, v_cache, q_norm, k_norm, cos_pos_embed, sin_pos_embed, output,
                        grid_dim, block_dim=None, *, rope_theta=10000.0, rope_scaling=None, qk_norm_eps=1e-6,
                        kv_splits=0):
        """Paged causal attention with GQA and RoPE, as MPK's: heads from the shapes (D =
        k_cache.dim(3), Hkv = k_cache.dim(2), Hq = output.dim(1) / D). pk computes RoPE from
        rope_theta and rope_scaling (a config.json rope_scaling dict, type 'llama3', or None);
        cos_pos_embed / sin_pos_embed, when given ([S, D] attached tables, as MPK's), are checked
        against those parameters and must agree."""
        for t, what in ((k_cache, "k_cache"), (output, "output")):
            self._t(t, what)
        D, Hkv = k_cache.dim(3) if k_cache.num_dims == 4 else 0, k_cache.dim(2) if k_cache.num_dims == 4 else 0
        p = _lib.AttentionParams(num_q_heads=output.dim(1) // D if D else 0, num_kv_heads=Hkv, head_dim=D,
                                 rope_theta=rope_theta, qk_norm_eps=qk_norm_eps, kv_splits=kv_splits)
        if rope_scaling is not None:
            kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
            if kind != "llama3":
                raise errors.UnsupportedError(f"rope_scaling type {kind!r}: pk runs none and 'llama3'")
            p.rope_scaling, p.rope_factor = 1, rope_scaling["factor"]
            p.rope_low_freq_factor, p.rope_high_freq_factor = rope_scaling["low_freq_factor"], \
                rope_scaling["high_freq_factor"]
            p.rope_original_max_position = rope_scaling["original_max_position_embeddings"]
        if (cos_pos_embed is None) != (sin_pos_embed is None):
            raise errors.InvalidArgumentError("attention_layer: give both cos_pos_embed and sin_pos_embed, or neither")
        if cos_pos_embed is not None and D:
            self._check_rope_tables(cos_pos_embed, sin_pos_embed, p)
        self._layer(lib.pk_attention_layer, self._t(input, "input"), self._t(k_cache, "k_cache"),
                    self._t(v_cache, "v_cache"), self._t(q_norm, "q_norm", True), self._t(k_norm, "k_norm", True),
                    self._t(output, "output"), ctypes.byref(p), grid_of(grid_dim))

    def _check_rope_tables(self, cos_t, sin_t, p):
        from .rope import check_tables
        self._t(cos_t, "cos_pos_embed"), self._t(sin_t, "sin_pos_embed")
        check_tables(self._source(cos_t), self._source(sin_t), p, self.max_seq_length)

    @staticmethod
    def _source(t):
        """An attached tensor's values as fp32 numpy, read from the array it was attached from."""
        owner = getattr(t, "_owner", None)
        if owner is None:
            raise errors.InvalidArgumentError(f"'{t.name}' is not an attached tensor (attach_input)")
        arr = owner.float().numpy() if type(owner).__module__.split(".")[0] == "torch" else np.asarray(owner)
        if t.dtype == arrays.bfloat16 and arr.dtype == np.uint16:
            return arrays.bf16_to_float32(arr)
        return arr.astype(np.float32)

    def argmax_layer(self, input, output, grid_dim, block_dim=None):
        """out[t] = argmax logits[t] (smallest index on ties); output int32 [T] (self.step_output)."""
        self._layer(lib.pk_argmax_layer, self._t(input, "input"), self._t(output, "output"), grid_of(grid_dim))

    def argmax_partial_layer(self, input, output, grid_dim, block_dim=None):
        """MPK's first argmax half. pk's argmax layer does both halves (its last task reduces the
        partials), so this records the logits and grid and argmax_reduce_layer adds the layer; the
        (value, index) tensors are checked for shape but never written."""
        self._handle()
        value, index = output
        g = grid_of(grid_dim)
        self._t(input, "input"), self._t(value, "output[0]"), self._t(index, "output[1]")
        if value.num_dims != 2 or index.num_dims != 2 or value.dim(1) != g or index.dim(1) != g:
            raise errors.ShapeError(f"argmax_partial_layer: output tensors {value.dims} and {index.dims} must be "
                                    f"[T, {g}] (one column per task of grid {g})")
        self._argmax_partial = (input, value, index, g)

    def argmax_reduce_layer(self, input, output, grid_dim, block_dim=None):
        self._handle()
        p = self._argmax_partial
        if p is None or p[1] is not input[0] or p[2] is not input[1]:
            raise errors.StateError("argmax_reduce_layer: its input is not the output of the last "
                                    "argmax_partial_layer")
        self._argmax_partial = None
        self._layer(lib.pk_argmax_layer, self._t(p[0], "logits"), self._t(output, "output"), p[3])

    # ---- pk's own layers, under pk.h's names --------------------------------------------------

    def rmsnorm_linear_swiglu_layer(self, x, norm_w, w, block, out, grid_dim, block_dim=None, eps=1e-6):
        self._layer(lib.pk_rmsnorm_linear_swiglu_layer, self._t(x, "x"), self._t(norm_w, "norm_w"), self._t(w, "w"),
                    self._int("block", block), self._t(out, "out"), eps, grid_of(grid_dim))

    def rmsnorm_swiglu_down_layer(self, x, norm_w, w_gu, w_down, acc, grid_dim, block_dim=None, eps=1e-6):
        self._layer(lib.pk_rmsnorm_swiglu_down_layer, self._t(x, "x"), self._t(norm_w, "norm_w"),
                    self._t(w_gu, "w_gu"), self._t(w_down, "w_down"), self._t(acc, "acc"), eps, grid_of(grid_dim))

    def rmsnorm_linear_acc_layer(self, x, acc, norm_w, w, out, sum, grid_dim, block_dim=None, eps=1e-6):
        self._layer(lib.pk_rmsnorm_linear_acc_layer, self._t(x, "x"), self._t(acc, "acc"), self._t(norm_w, "norm_w"),
                    self._t(w, "w"), self._t(out, "out"), self._t(sum, "sum"), eps, grid_of(grid_dim))

    def linear_with_residual_clear_layer(self, x, w, residual, clear, out, grid_dim, block_dim=None):
        self._layer(lib.pk_linear_with_residual_clear_layer, self._t(x, "x"), self._t(w, "w"),
                    self._t(residual, "residual"), self._t(clear, "clear"), self._t(out, "out"), grid_of(grid_dim))

    def linear_splitk_with_residual_layer(self, x, w, residual, out, grid_dim, block_dim=None):
        self._layer(lib.pk_linear_splitk_with_residual_layer, self._t(x, "x"), self._t(w, "w"),
                    self._t(residual, "residual"), self._t(out, "out"), grid_of(grid_dim))

    def rmsnorm_linear_argmax_layer(self, x, norm_w, w, logits, out, grid_dim, block_dim=None, eps=1e-6):
        self._layer(lib.pk_rmsnorm_linear_argmax_layer, self._t(x, "x"), self._t(norm_w, "norm_w"), self._t(w, "w"),
                    self._t(logits, "logits"), self._t(out, "out"), eps, grid_of(grid_dim))

    # ---- compile, run, finalize ---------------------------------------------------------------

    def compile(self, output_dir=None):
        """pk_compile: builds the task graph (CUDA: generates, compiles and loads the kernel). With
        output_dir, task_graph.json (and kernel.cu for CUDA) are written there."""
        k = self._handle()
        if self._argmax_partial is not None:
            raise errors.StateError("compile: an argmax_partial_layer has no argmax_reduce_layer")
        opts = _lib.CompileOptions(output_dir=_b(output_dir))
        self._check(lib.pk_compile(k, ctypes.byref(opts)))
        self._compiled = True

    def __call__(self, prompts=None, max_new_tokens=None, on_token=None):
        """Runs requests to completion (greedy) and returns each one's generated ids, a list of
        lists. prompts: a list of token-id lists; max_new_tokens: an int, a list (one per prompt)
        or None (up to max_seq_length); on_token(request, token) is called per token as it is
        made. prompts None runs MPK's offline requests from meta_tensors: 'tokens' [R, S] holds
        the prompts, 'prompt_lengths' [R] their lengths; the generated ids are written after each
        prompt in 'tokens', and 'step' [R], if given, gets the index of each request's last token.
        self.finish_reasons then says why each stopped ('eos', 'length', 'cancelled')."""
        offline = prompts is None
        if offline:
            prompts = self._offline_prompts()
        outs = self._run(prompts, max_new_tokens, on_token)
        if offline:
            self._offline_store(prompts, outs)
        return outs

    def stream(self, prompts, max_new_tokens=None, sampling=None):
        """Yields (request, token) pairs as the run makes them (the run goes on in a thread);
        closing the generator early cancels the run."""
        q, done = queue.Queue(), object()
        result = {}

        def work():
            try:
                self._run(prompts, max_new_tokens, lambda r, t: q.put((r, t)), sampling)
            except BaseException as e:  # handed to the consumer
                result["error"] = e
            q.put(done)

        th = threading.Thread(target=work, daemon=True)
        th.start()
        try:
            while True:
                item = q.get()
                if item is done:
                    break
                yield item
        finally:
            if th.is_alive():
                lib.pk_cancel(self._k)
                th.join()
        if "error" in result:
            raise result["error"]

    def cancel(self):
        """pk_cancel: stops the run in progress at the end of its step (safe from on_token or
        another thread); unfinished requests end 'cancelled' with the tokens made so far."""
        if self._k is not None:
            lib.pk_cancel(self._k)

    def _run(self, prompts, max_new_tokens, on_token, sampling=None):
        k = self._handle()
        if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__len__"):
            raise errors.InvalidArgumentError("prompts must be a list of token-id lists")
        n = len(prompts)
        ids, outs = [], []
        news = max_new_tokens if isinstance(max_new_tokens, (list, tuple)) else [max_new_tokens] * n
        if len(news) != n:
            raise errors.InvalidArgumentError(f"max_new_tokens has {len(news)} entries for {n} prompts")
        reqs = (_lib.Request * max(1, n))()
        for i, p in enumerate(prompts):
            try:
                a = np.ascontiguousarray(np.asarray(p, dtype=np.int64).reshape(-1))
            except (TypeError, ValueError, OverflowError):
                raise errors.InvalidArgumentError(f"prompt {i} is not a list of token ids") from None
            if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
                raise errors.LimitError(f"prompt {i}: a token id is outside int32")
            a = a.astype(np.int32)
            m = news[i]
            m = max(1, self.max_seq_length - a.size) if m is None else self._int("max_new_tokens", m)
            out = np.zeros(max(1, m), dtype=np.int32)
            ids.append(a), outs.append(out)
            reqs[i] = _lib.Request(prompt=a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), prompt_len=a.size,
                                   max_new_tokens=m, output=out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                   sampling=sampling or _lib.Sampling())
        raised = []

        def trampoline(user, request, token, row):
            try:
                on_token(request, token)
            except BaseException as e:  # ctypes would only print it: stop the run and re-raise
                raised.append(e)
                lib.pk_cancel(k)

        cb = _lib.TOKEN_FN(trampoline) if on_token else _lib.TOKEN_FN()
        status = lib.pk_run(k, reqs, n, cb, None)
        if raised:
            raise raised[0]
        self._check(status)
        self.finish_reasons = [FINISH.get(reqs[i].finish, "none") for i in range(n)]
        self._store_trace()
        return [outs[i][:reqs[i].num_output].tolist() for i in range(n)]

    def _offline_prompts(self):
        mt = self.meta_tensors
        if "tokens" not in mt or "prompt_lengths" not in mt:
            raise errors.InvalidArgumentError("no prompts: pass prompts, or give meta_tensors 'tokens' [R, S] and "
                                              "'prompt_lengths' [R] (MPK's offline requests)")
        tokens, lengths = mt["tokens"], mt["prompt_lengths"]
        if len(lengths) != len(tokens):
            raise errors.ShapeError(f"meta_tensors: 'prompt_lengths' has {len(lengths)} entries, 'tokens' "
                                    f"{len(tokens)} rows")
        return [[int(x) for x in tokens[r][:int(lengths[r])]] for r in range(len(tokens))]

    def _offline_store(self, prompts, outs):
        tokens, step = self.meta_tensors["tokens"], self.meta_tensors.get("step")
        for r, (p, o) in enumerate(zip(prompts, outs)):
            room = len(tokens[r]) - len(p)
            if room > 0 and o:
                tokens[r][len(p):len(p) + min(room, len(o))] = o[:room]
            if step is not None:
                step[r] = len(p) + len(o) - 1

    def _store_trace(self):
        """profiler_tensor: the run's Chrome/Perfetto trace (JSON bytes, truncated to its size,
        the rest zeroed); self.trace keeps the whole text; trace_name + '.json' a copy."""
        if self._trace_dir is None:
            return
        path = os.path.join(self._trace_dir, "trace.json")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return
        self.trace = data.decode("utf-8", "replace")
        view = self._profile
        m = min(len(data), view.size)
        view[:m] = np.frombuffer(data[:m], dtype=np.uint8)
        view[m:] = 0
        if self.trace_name:
            with open(self.trace_name + ".json", "wb") as f:
                f.write(data)

    # ---- queries --------------------------------------------------------------------------------

    @staticmethod
    def _spec(config):
        """MPK's spec_decode_config (a PromptLookupConfig, or a dict with its fields) as pk_config's
        (spec_length, spec_ngram); None: off. pk has prompt lookup only."""
        if config is None:
            return 0, 0
        get = config.get if isinstance(config, dict) else lambda f, d=None: getattr(config, f, d)
        method = get("method", "promptlookup")
        if method != "promptlookup":
            raise errors.UnsupportedError(f"spec_decode_config method {method!r}: pk has prompt lookup only")
        length, ngram = get("spec_length", 5), get("ngram_size", 3)
        for name, v in (("spec_length", length), ("ngram_size", ngram)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise errors.InvalidArgumentError(f"spec_decode_config {name} {v!r} is not an int")
        return length, ngram

    def stats(self):
        """pk_kernel_stats: layers, tasks, events, workers, steps of the last run."""
        s = _lib.GraphStats()
        self._check(lib.pk_kernel_stats(self._handle(), ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in s._fields_}

    def layers(self):
        """Each layer as (name, kind, grid), in the order added."""
        out = []
        for i in range(self.stats()["num_layers"]):
            li = _lib.LayerInfo()
            self._check(lib.pk_kernel_layer(self._k, i, ctypes.byref(li)))
            out.append((li.name.decode(), li.kind.decode(), li.grid))
        return out

    def memory(self):
        """pk_kernel_memory, after compile: weight, KV cache and workspace bytes."""
        m = _lib.MemoryStats()
        self._check(lib.pk_kernel_memory(self._handle(), ctypes.byref(m)))
        return {f: getattr(m, f) for f, _ in m._fields_}

    def write_task_graph(self, path):
        self._check(lib.pk_write_task_graph(self._handle(), _b(path)))

    def finalize(self):
        """Frees the kernel (pk_kernel_free) and releases the attached arrays. Idempotent; the
        object raises pk.StateError afterwards."""
        if self._k is not None and not getattr(self, "_borrowed", False):  # a Model's kernel is the Model's
            lib.pk_kernel_free(self._k)
        self._k = None
        self._keep = []
        if self._trace_dir:
            for f in os.listdir(self._trace_dir):
                os.unlink(os.path.join(self._trace_dir, f))
            os.rmdir(self._trace_dir)
            self._trace_dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finalize()

    def __del__(self):
        if getattr(self, "_k", None) is not None and lib is not None:
            self.finalize()
