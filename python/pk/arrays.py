# SPDX-License-Identifier: Apache-2.0
"""arrays.py — pk's dtypes and the memory of the caller's arrays.

describe(obj, dtype) turns what a caller attaches into (host pointer, dims, element strides,
pk dtype, the object that owns the memory), without copying where the memory is on the host:
numpy arrays; torch tensors (data_ptr / stride; a GPU tensor is copied to the host once, since
pk_attach_input reads host memory and the CUDA backend uploads it); and any object with
__array_interface__ or __dlpack__ (read through numpy, zero-copy). bf16 has no numpy dtype:
torch's bfloat16, ml_dtypes' bfloat16, or a uint16 array with dtype=pk.bfloat16.
"""
import numpy as np

from . import errors

BF16, FP16, FP32, INT32, INT64 = 0, 1, 2, 3, 4


class dtype(int):
    """A pk_dtype (an int, so it passes straight to C); pk.bfloat16 prints as 'bfloat16'."""
    _names = {BF16: "bfloat16", FP16: "float16", FP32: "float32", INT32: "int32", INT64: "int64"}

    def __repr__(self):
        return "pk." + self._names.get(int(self), f"dtype({int(self)})")

    @property
    def itemsize(self):
        return 4 if self in (FP32, INT32) else 8 if self == INT64 else 2


bfloat16, float16, float32, int32, int64 = (dtype(i) for i in range(5))

_ALIASES = {"bfloat16": bfloat16, "bf16": bfloat16, "float16": float16, "fp16": float16, "half": float16,
            "float32": float32, "fp32": float32, "float": float32, "int32": int32, "int64": int64}
_FROM_NUMPY = {np.dtype(np.float16): float16, np.dtype(np.float32): float32, np.dtype(np.int32): int32,
               np.dtype(np.int64): int64}
NUMPY_OF = {bfloat16: np.uint16, float16: np.float16, float32: np.float32, int32: np.int32, int64: np.int64}


def as_dtype(d):
    """pk.bfloat16, 'bf16', a numpy dtype, a torch dtype... as a pk dtype."""
    if isinstance(d, dtype):
        return d
    if isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 4:
        return dtype(d)
    name = str(d).replace("torch.", "").lower()
    if name in _ALIASES:
        return _ALIASES[name]
    raise errors.DtypeError(f"unknown dtype {d!r} (pk has bfloat16, float16, float32, int32, int64)")


def _numpy_dtype(arr, declared):
    """The pk dtype of a numpy array: its own, or the declared one (uint16 declared bf16)."""
    if arr.dtype.name == "bfloat16":  # ml_dtypes
        own = bfloat16
    else:
        own = _FROM_NUMPY.get(arr.dtype)
    if declared is None:
        if own is None:
            hint = " (declare bf16 data: dtype=pk.bfloat16)" if arr.dtype == np.uint16 else ""
            raise errors.DtypeError(f"numpy dtype {arr.dtype} has no pk dtype{hint}")
        return own
    d = as_dtype(declared)
    if own == d or (d == bfloat16 and arr.dtype == np.uint16):
        return d
    raise errors.DtypeError(f"the array's dtype {arr.dtype} is not {d!r}")


def _from_numpy(arr, declared):
    d = _numpy_dtype(arr, declared)
    item = arr.itemsize
    if any(s % item for s in arr.strides):
        raise errors.StrideError(f"byte strides {arr.strides} are not whole {item}-byte elements")
    strides = tuple(s // item for s in arr.strides)
    ptr = arr.__array_interface__["data"][0]
    return ptr, tuple(arr.shape), strides, d, arr


def _is_torch(obj):
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr")


def _from_torch(t, declared):
    if t.device.type != "cpu":
        t = t.detach().to("cpu")  # pk_attach_input reads host memory (the CUDA backend uploads it)
    d = as_dtype(t.dtype)
    if declared is not None and as_dtype(declared) != d:
        raise errors.DtypeError(f"the tensor's dtype {t.dtype} is not {as_dtype(declared)!r}")
    return t.data_ptr(), tuple(t.shape), tuple(t.stride()), d, t


def describe(obj, declared=None):
    """(pointer, dims, element strides, pk dtype, owner) of an array the caller attaches."""
    if isinstance(obj, np.ndarray):
        return _from_numpy(obj, declared)
    if _is_torch(obj):
        return _from_torch(obj, declared)
    if hasattr(obj, "__array_interface__"):
        return _from_numpy(np.asarray(obj), declared)
    if hasattr(obj, "__dlpack__"):
        try:
            arr = np.from_dlpack(obj)
        except (TypeError, RuntimeError, BufferError, ValueError) as e:
            raise errors.InvalidArgumentError(f"cannot read {type(obj).__name__} through DLPack on the host: {e}")
        return _from_numpy(arr, declared)
    raise errors.InvalidArgumentError(
        f"cannot attach a {type(obj).__name__}: pk takes numpy arrays, torch tensors, and objects with "
        "__array_interface__ or __dlpack__")


def float32_to_bf16(x):
    """fp32 values as bf16 bits (uint16), rounded to nearest even as PyTorch (pk's pk_f32_to_bf16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def bf16_to_float32(b):
    """bf16 bits (uint16) as fp32 values."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
