# SPDX-License-Identifier: Apache-2.0
"""model.py — pk's high-level face: pk.load(model_dir) → Model.generate, and Tokenizer.

A Model is pk_model_load_with's graph (the C builder's layers, as `pk generate` runs it),
compiled once; generate() runs one request on it, session() opens a resident session
(session.py) where many decode together. A Tokenizer wraps pk_tokenizer
(tokenizer.json, byte-level BPE) and its streaming decoder.
"""
import ctypes
import os

from . import _lib, errors
from .kernel import BACKENDS, SCHED_MODES, _b
from ._lib import lib

ERR_LEN = 1024
CONFIG_KEYS = {"world_size", "rank", "num_workers", "num_local_schedulers", "num_remote_schedulers",
               "max_seq_length", "max_requests", "max_tokens_per_step", "page_size", "num_pages", "eos_token_id",
               "attention_kv_splits", "spec_length", "spec_ngram", "prefix_cache", "all_logits"}
OPTION_KEYS = {"fused_mlp", "lm_head_argmax", "check_tensors"}  # pk_model_options: -1 auto, 0 off, 1 on


def read_info(model_dir):
    """pk_model_read_info: the model's shape from config.json, as a dict."""
    info, err = _lib.ModelInfo(), ctypes.create_string_buffer(ERR_LEN)
    status = lib.pk_model_read_info(_b(os.fspath(model_dir)), ctypes.byref(info), err, ERR_LEN)
    if status != errors.PK_OK:
        raise errors.from_status(status, err.value.decode())
    return _info_dict(info)


def _info_dict(info):
    d = {f: getattr(info, f) for f, _ in info._fields_}
    d["architecture"] = info.architecture.decode()
    return d


class Tokenizer:
    """tokenizer.json through pk_tokenizer: encode(text) → ids, decode(ids) → text."""

    def __init__(self, path):
        err = ctypes.create_string_buffer(ERR_LEN)
        self._t = lib.pk_tokenizer_load(_b(os.fspath(path)), err, ERR_LEN)
        if not self._t:
            msg = err.value.decode()
            raise (errors.IOError_ if "open" in msg or "No such" in msg else errors.FormatError)(msg)
        self.vocab_size = lib.pk_tokenizer_vocab_size(self._t)

    def encode(self, text):
        data = text.encode()
        cap = max(16, len(data) + 8)
        while True:
            buf = (ctypes.c_int32 * cap)()
            n = lib.pk_tokenizer_encode(self._t, data, len(data), buf, cap)
            if n < 0:
                raise errors.InvalidArgumentError(lib.pk_tokenizer_error(self._t).decode())
            if n <= cap:
                return list(buf[:n])
            cap = n

    def decode(self, ids):
        return "".join(self.decode_stream(ids))

    def decode_stream(self, ids):
        """Yields text pieces as the ids complete UTF-8 characters (pk_decoder)."""
        d = lib.pk_decoder_new(self._t)
        if not d:
            raise errors.NoMemoryError("pk_decoder_new: out of memory")
        buf = ctypes.create_string_buffer(1 << 16)
        try:
            for i in ids:
                n = lib.pk_decoder_push(d, int(i), buf, len(buf))
                if n < 0:
                    raise errors.LimitError(f"token id {i} is outside the tokenizer's vocabulary [0, "
                                            f"{self.vocab_size})")
                if n:
                    yield buf.raw[:n].decode("utf-8", "replace")
            n = lib.pk_decoder_flush(d, buf, len(buf))
            if n:
                yield buf.raw[:n].decode("utf-8", "replace")
        finally:
            lib.pk_decoder_free(d)

    def token_id(self, token):
        """The id of a token string, or -1."""
        return lib.pk_tokenizer_token_id(self._t, token.encode())

    def chat_prompt(self, prompt):
        """The prompt in the tokenizer family's chat template (one user turn)."""
        p = lib.pk_tokenizer_chat_prompt(self._t, prompt.encode())
        if not p:
            raise errors.UnsupportedError(lib.pk_tokenizer_error(self._t).decode())
        try:
            return ctypes.string_at(p).decode()
        finally:
            _lib.libc.free(p)

    def close(self):
        if getattr(self, "_t", None):
            lib.pk_tokenizer_free(self._t)
            self._t = None

    __del__ = close


class Model:
    """A loaded, compiled model. generate(ids or text, max_tokens, stream) → ids or text."""

    def __init__(self, model_dir, backend="cpu", **config):
        self._m = None
        self._session = None
        unknown = set(config) - CONFIG_KEYS - OPTION_KEYS - {"sched_mode", "trace_path", "cache_dir"}
        if unknown:
            raise errors.InvalidArgumentError(f"pk.load: unknown setting(s) {', '.join(sorted(unknown))}")
        if backend not in BACKENDS:
            raise errors.InvalidArgumentError(f"backend {backend!r} is not 'cpu' or 'cuda'")
        self.dir = os.fspath(model_dir)
        info = read_info(self.dir)
        cfg = lib.pk_config_default()
        cfg.backend = BACKENDS[backend]
        cfg.num_workers = (os.cpu_count() or 1) if backend == "cpu" else 0  # as `pk generate`
        cfg.max_tokens_per_step = 0  # the backend's choice (pk.h), as `pk generate`
        cfg.max_requests = 1
        cfg.max_seq_length = min(cfg.max_seq_length, info["max_position_embeddings"])
        for key in CONFIG_KEYS & set(config):
            setattr(cfg, key, config[key])
        if "sched_mode" in config:
            cfg.sched_mode = SCHED_MODES[config["sched_mode"]]
        self._strings = (_b(config.get("trace_path")), _b(config.get("cache_dir")))
        cfg.trace_path, cfg.cache_dir = self._strings
        opts = lib.pk_model_options_default()
        for key in OPTION_KEYS & set(config):
            setattr(opts, key, config[key])
        err = ctypes.create_string_buffer(ERR_LEN)
        m = lib.pk_model_load_with(_b(self.dir), ctypes.byref(cfg), ctypes.byref(opts), err, ERR_LEN)
        if not m:
            raise _load_error(err.value.decode())
        self._m = m
        self._k = lib.pk_model_kernel(m)
        self.info = _info_dict(lib.pk_model_get_info(m).contents)
        self.config = {f: getattr(lib.pk_kernel_config(self._k).contents, f) for f in CONFIG_KEYS}
        status = lib.pk_compile(self._k, None)
        if status != errors.PK_OK:
            msg = lib.pk_kernel_error(self._k).decode()
            self.close()
            raise errors.from_status(status, msg)
        tok = os.path.join(self.dir, "tokenizer.json")
        self.tokenizer = Tokenizer(tok) if os.path.exists(tok) else None
        self.finish_reason = None

    def _ids_of(self, prompt):
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise errors.InvalidArgumentError(f"{self.dir} has no tokenizer.json: give the prompt as token ids")
            ids = self.tokenizer.encode(prompt)
            bos = self.info["bos_token_id"]
            if self.info["architecture"] == "LlamaForCausalLM" and bos >= 0 and (not ids or ids[0] != bos):
                ids = [bos] + ids  # Llama-3 expects <|begin_of_text|>, as `pk generate` adds it
            return ids
        return [int(i) for i in prompt]

    def generate(self, prompt, max_tokens=64, stream=False, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 seed=None):
        """The continuation of prompt (text, or a list of token ids): greedy at temperature 0,
        else drawn from softmax(logits / temperature) among the tokens top_k, top_p and min_p keep
        (pk_sampling; the CPU backend so far), from seed's random stream (None: a random seed,
        then in self.seed). Returns the generated text (text prompt) or ids (id prompt);
        stream=True yields them piece by piece."""
        ids = self._ids_of(prompt)
        as_text = isinstance(prompt, str)
        sampling = self._sampling(temperature, top_k, top_p, min_p, seed)
        if stream:
            return self._stream(ids, max_tokens, as_text, sampling)
        out = self._run(ids, max_tokens, None, sampling)
        return self.tokenizer.decode(out) if as_text else out

    def _sampling(self, temperature, top_k, top_p, min_p, seed):
        self.seed = None
        if not temperature:
            return None
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little") >> 1
        if not isinstance(seed, int) or not 0 <= seed < 1 << 64:
            raise errors.InvalidArgumentError(f"seed {seed!r} is not an integer in [0, 2^64)")
        self.seed = seed
        return _lib.Sampling(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                             min_p=float(min_p), seed=seed)

    def _stream(self, ids, max_tokens, as_text, sampling=None):
        from .kernel import PersistentKernel
        tokens = (t for _, t in PersistentKernel.stream(self._facade(), [ids], max_tokens, sampling))
        if as_text:
            yield from self.tokenizer.decode_stream(tokens)
        else:
            yield from tokens

    def _facade(self):
        """A PersistentKernel face on the model's kernel, for PersistentKernel's run and stream
        (the kernel stays the model's: the facade never frees it)."""
        from .kernel import PersistentKernel
        f = PersistentKernel.__new__(PersistentKernel)
        f._k, f._keep, f._trace_dir, f.max_seq_length = self._handle(), [], None, self.config["max_seq_length"]
        f.finish_reasons, f._borrowed = [], True
        return f

    def _run(self, ids, max_tokens, on_token, sampling=None):
        f = self._facade()
        try:
            out = f._run([ids], max_tokens, on_token, sampling)[0]
            self.finish_reason = f.finish_reasons[0]
            return out
        finally:
            f._k = None  # the model frees its kernel

    def _handle(self):
        if self._m is None:
            raise errors.StateError("the model was closed")
        return self._k

    def stats(self):
        """pk_kernel_stats of the model's kernel: steps of the last run, speculation's counts."""
        s = _lib.GraphStats()
        status = lib.pk_kernel_stats(self._handle(), ctypes.byref(s))
        if status != errors.PK_OK:
            raise errors.from_status(status, lib.pk_kernel_error(self._handle()).decode())
        return {f: getattr(s, f) for f, _ in s._fields_}

    def session(self, queue=0):
        """A resident session over the model's kernel (pk.session.Session): requests submitted
        at any time decode together, up to max_requests (pk.load's config) at once; queue: how
        many may run or wait (0: 4 · max_requests). The CPU backend so far."""
        from .session import Session
        return Session(self, queue)

    def close(self):
        if getattr(self, "_session", None):
            self._session.close()
        if getattr(self, "_m", None):
            lib.pk_model_free(self._m)
            self._m = self._k = None
        if getattr(self, "tokenizer", None):
            self.tokenizer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    __del__ = close


def _load_error(msg):
    """pk_model_load_with reports a message, not a status: the error class from its words."""
    low = msg.lower()
    if "not supported" in low or "unsupported" in low:
        return errors.UnsupportedError(msg)
    if "cannot open" in low or "no such file" in low or "cannot read" in low:
        return errors.IOError_(msg)
    if "exceeds" in low or "outside" in low:
        return errors.LimitError(msg)
    if "must be" in low or "is null" in low:
        return errors.InvalidArgumentError(msg)
    return errors.FormatError(msg)


def load(model_dir, backend="cpu", **config):
    """Opens a Hugging Face model directory (Qwen3 / Llama-3 safetensors) and compiles its graph.
    config: pk_config fields (num_workers, max_seq_length, max_tokens_per_step, ...) and
    pk_model_options (fused_mlp, lm_head_argmax, check_tensors)."""
    return Model(model_dir, backend, **config)
