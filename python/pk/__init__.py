# SPDX-License-Identifier: Apache-2.0
"""pk — Python over libpk, the persistent-kernel LLM decoder (include/pk.h), through ctypes.

Two faces: pk.PersistentKernel, the seed's (Mirage MPK's) class that builds a decode graph layer
by layer and runs it; and pk.load(model_dir), a Hugging Face Qwen3 / Llama-3 directory built by
pk's C builder, with generate() and its tokenizer. Errors are pk.Error subclasses carrying the C
status and message. docs/PYTHON.md describes both and the differences from MPK.
"""
from . import errors
from ._lib import lib as _clib
from .arrays import bf16_to_float32, bfloat16, dtype, float16, float32, float32_to_bf16, int32, int64
from .errors import (BackendError, DtypeError, Error, FormatError, GridError, InvalidArgumentError, LimitError,
                     NoMemoryError, ShapeError, StateError, StrideError, UnsupportedError)
from .errors import IOError_ as IOError  # noqa: A001 (pk.IOError, as the status name says)
from .kernel import PersistentKernel, PromptLookupConfig, Tensor
from .model import Model, Tokenizer, load, read_info

__version__ = "0.1.0"
library_path = _clib.path


def status_name(status):
    """pk_status_name: 'PK_ERR_SHAPE' for 2."""
    return _clib.pk_status_name(status).decode()


__all__ = ["PersistentKernel", "PromptLookupConfig", "Tensor", "load", "Model", "Tokenizer", "read_info", "Error", "InvalidArgumentError",
           "ShapeError", "StrideError", "GridError", "DtypeError", "StateError", "NoMemoryError", "IOError",
           "FormatError", "UnsupportedError", "LimitError", "BackendError", "bfloat16", "float16", "float32", "int32",
           "int64", "dtype", "float32_to_bf16", "bf16_to_float32", "status_name", "library_path", "errors"]
