# SPDX-License-Identifier: Apache-2.0
"""session.py — a resident session over a Model's kernel (pk.h's pk_session_*): requests submitted
at any time join the running kernel between steps and decode together (up to the model's
max_requests at once, the rest waiting), each with its own sampling; tokens come back through
poll().

    with m.session() as s:
        a = s.submit("In the beginning", max_tokens=32)
        b = s.submit([1, 2, 3], max_tokens=8, temperature=0.8, seed=5)
        s.wait()                      # or: for req, token in s.poll(timeout=0.1): ...
        a.text, b.tokens, b.finish_reason, a.num_cached

Every call comes from one thread at a time (the C library's rule); the runtime's own threads do
the rest. While a session is open the model's generate() is refused.
"""
import ctypes
import time

import numpy as np

from . import _lib, errors
from ._lib import lib
from .kernel import FINISH


class Request:
    """One submitted request: its tokens so far, and once done its finish reason ('eos',
    'length', 'cancelled') and the prompt tokens it took from the prefix cache."""

    def __init__(self, session, ids, as_text, max_tokens, sampling):
        self._session, self.as_text, self.max_tokens = session, as_text, max_tokens
        self._prompt = np.ascontiguousarray(np.asarray(ids, dtype=np.int32))
        self._out = np.zeros(max(1, max_tokens), dtype=np.int32)
        self._c = _lib.Request(prompt=self._prompt.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                               prompt_len=self._prompt.size, max_new_tokens=max_tokens,
                               output=self._out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                               sampling=sampling or _lib.Sampling())
        self.id = -1
        self.tokens = []
        self.seed = sampling.seed if sampling else None

    @property
    def done(self):
        return self._c.finish != 0

    @property
    def finish_reason(self):
        return FINISH.get(self._c.finish) if self.done else None

    @property
    def num_cached(self):
        return self._c.num_cached

    @property
    def text(self):
        """The tokens as text (a text prompt's request)."""
        return self._session._model.tokenizer.decode(self.tokens)


class Session:
    """pk_session_open over the model's compiled kernel; close() (or the with block's end)
    cancels what still runs and stops it."""

    def __init__(self, model, queue=0):
        self._model, self._k = model, model._handle()
        self._live = {}     # id → Request, until it is done
        self._pending = []  # (Request, token) delivered by the last poll
        self._raised = []

        def on_token(user, request, token, row):
            try:
                r = self._live.get(request)
                if r is not None:
                    r.tokens.append(token)
                    self._pending.append((r, token))
            except BaseException as e:  # ctypes would only print it
                self._raised.append(e)

        self._cb = _lib.TOKEN_FN(on_token)  # kept alive while the session is open
        self._check(lib.pk_session_open(self._k, int(queue), self._cb, None))
        self._open = True
        model._session = self

    def _check(self, status):
        if status != errors.PK_OK:
            raise errors.from_status(status, lib.pk_kernel_error(self._k).decode())

    def submit(self, prompt, max_tokens=64, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=None):
        """Hands a request (text or token ids) to the session and returns at once with its
        Request. Sampling as Model.generate; a full queue raises pk.LimitError (poll, then submit
        again)."""
        if not self._open:
            raise errors.StateError("the session is closed")
        ids = self._model._ids_of(prompt)
        sampling = self._model._sampling(temperature, top_k, top_p, min_p, seed)
        r = Request(self, ids, isinstance(prompt, str), int(max_tokens), sampling)
        rid = ctypes.c_int(-1)
        self._check(lib.pk_session_submit(self._k, ctypes.byref(r._c), ctypes.byref(rid)))
        r.id = rid.value
        self._live[r.id] = r
        return r

    def cancel(self, request):
        """Ends the request at the next step boundary (finish_reason 'cancelled'); one that ended
        already is left alone."""
        if self._open:
            self._check(lib.pk_session_cancel(self._k, request.id))

    def poll(self, timeout=0.0):
        """The (Request, token) pairs made since the last poll, waiting up to timeout seconds for
        the first; requests that ended have their finish_reason."""
        if not self._open:
            raise errors.StateError("the session is closed")
        running = ctypes.c_int(0)
        status = lib.pk_session_poll(self._k, int(timeout * 1000), ctypes.byref(running))
        if self._raised:
            raise self._raised.pop(0)
        self._check(status)
        for rid in [rid for rid, r in self._live.items() if r.done]:
            del self._live[rid]
        out, self._pending = self._pending, []
        return out

    @property
    def running(self):
        """Requests submitted and not yet ended."""
        return len(self._live)

    def wait(self, requests=None, timeout=None):
        """Polls until the given requests (default: every one submitted) are done; returns them."""
        reqs = list(self._live.values()) if requests is None else list(requests)
        end = None if timeout is None else time.monotonic() + timeout
        while not all(r.done for r in reqs):
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"{sum(not r.done for r in reqs)} requests still running")
            self.poll(0.05)
        return reqs

    def close(self):
        if getattr(self, "_open", False):
            self._open = False
            self._model._session = None
            status = lib.pk_session_close(self._k)
            self._live.clear()
            self._check(status)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
