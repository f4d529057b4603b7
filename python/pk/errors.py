# SPDX-License-Identifier: Apache-2.0
"""errors.py — pk.Error and one subclass per pk_status.

Every error carries `status` (the pk_status number), `status_name` ("PK_ERR_SHAPE") and `message`
(the C library's one-line message, or the Python layer's in the same style). Each subclass also
derives from the built-in exception a Python caller would expect (ShapeError is a ValueError,
StateError a RuntimeError, ...), so `except ValueError` works too.
"""

PK_OK = 0


class Error(Exception):
    status = -1
    status_name = "PK_ERR"

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(f"{message} [{self.status_name}]")


def _subclass(name, status, status_name, base):
    return type(name, (Error, base), {"status": status, "status_name": status_name, "__module__": "pk"})


InvalidArgumentError = _subclass("InvalidArgumentError", 1, "PK_ERR_INVALID_ARGUMENT", ValueError)
ShapeError = _subclass("ShapeError", 2, "PK_ERR_SHAPE", ValueError)
StrideError = _subclass("StrideError", 3, "PK_ERR_STRIDE", ValueError)
GridError = _subclass("GridError", 4, "PK_ERR_GRID", ValueError)
DtypeError = _subclass("DtypeError", 5, "PK_ERR_DTYPE", TypeError)
StateError = _subclass("StateError", 6, "PK_ERR_STATE", RuntimeError)
NoMemoryError = _subclass("NoMemoryError", 7, "PK_ERR_NO_MEMORY", MemoryError)
IOError_ = _subclass("IOError", 8, "PK_ERR_IO", OSError)
FormatError = _subclass("FormatError", 9, "PK_ERR_FORMAT", ValueError)
UnsupportedError = _subclass("UnsupportedError", 10, "PK_ERR_UNSUPPORTED", NotImplementedError)
LimitError = _subclass("LimitError", 11, "PK_ERR_LIMIT", ValueError)
BackendError = _subclass("BackendError", 12, "PK_ERR_BACKEND", RuntimeError)

BY_STATUS = {c.status: c for c in (InvalidArgumentError, ShapeError, StrideError, GridError, DtypeError, StateError,
                                    NoMemoryError, IOError_, FormatError, UnsupportedError, LimitError, BackendError)}


def from_status(status, message):
    """The Error subclass of a pk_status (a bare Error for a number pk.h does not name)."""
    cls = BY_STATUS.get(status)
    return cls(message) if cls else Error(message, status)
