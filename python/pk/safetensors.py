# SPDX-License-Identifier: Apache-2.0
"""safetensors.py — a Hugging Face model directory's tensors, memory-mapped with numpy.

A .safetensors file is an 8-byte little-endian header length, a JSON header (name → dtype,
shape, [begin, end) byte offsets into the data that follows), then the raw data. open_dir()
reads model.safetensors, or the shards model.safetensors.index.json lists. bf16 comes as
uint16 bits (attach with dtype=pk.bfloat16); bf16_weight() converts F16 / F32 to those bits as
pk's C loader does (round to nearest even), so a graph built from them computes the same.
"""
import json
import os
import struct

import numpy as np

from . import errors
from .arrays import float32_to_bf16

_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "I64": np.int64}


class File:
    """One .safetensors file: tensor(name) is a read-only view into its mapping."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise errors.FormatError(f"{path}: shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            size = os.fstat(f.fileno()).st_size
            if n > size - 8:
                raise errors.FormatError(f"{path}: header length {n} exceeds the file ({size} bytes)")
            try:
                self.header = json.loads(f.read(n))
            except ValueError as e:
                raise errors.FormatError(f"{path}: the header is not JSON ({e})") from None
        self.header.pop("__metadata__", None)
        self._data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if size > 8 + n else \
            np.zeros(0, np.uint8)

    def names(self):
        return list(self.header)

    def tensor(self, name):
        e = self.header[name]
        dt = _DTYPES.get(e["dtype"])
        if dt is None:
            raise errors.DtypeError(f"{self.path}: tensor '{name}' has dtype {e['dtype']}, which pk does not load")
        begin, end = e["data_offsets"]
        raw = self._data[begin:end]
        if begin % np.dtype(dt).itemsize:
            raw = raw.copy()  # a misaligned tensor: pk_attach_input needs whole aligned elements
        return raw.view(dt).reshape(e["shape"])


class Dir:
    """A model directory's tensors over one or more shards."""

    def __init__(self, path):
        self.path = path
        index = os.path.join(path, "model.safetensors.index.json")
        self._where = {}
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            files = {s: File(os.path.join(path, s)) for s in sorted(set(weight_map.values()))}
            self._where = {name: files[s] for name, s in weight_map.items()}
        else:
            one = File(os.path.join(path, "model.safetensors"))
            self._where = {name: one for name in one.names()}

    def __contains__(self, name):
        return name in self._where

    def tensor(self, name):
        if name not in self._where:
            raise errors.FormatError(f"{self.path}: no tensor '{name}'")
        return self._where[name].tensor(name)

    def bf16_weight(self, name):
        """The tensor as bf16 bits (uint16): BF16 as stored, F16 / F32 rounded to nearest even."""
        t = self.tensor(name)
        return t if t.dtype == np.uint16 else float32_to_bf16(t.astype(np.float32)).reshape(t.shape)


def open_dir(path):
    return Dir(os.fspath(path))
