"""A few rows through XGBoost's C prediction call, without the Python wrapper's work.

One task's decision calls four boosters on one row each. On a 2-core AMD EPYC
host ``Booster.inplace_predict`` took 155-180 us per call, of which the C call
``XGBoosterPredictFromDense`` was 63-88 us: the rest is the wrapper rebuilding,
on every call, what does not change between calls (the prediction config as JSON,
the checks of the input's type, a ctypes array type for the output). Four calls
spend about 0.35 ms there, a fifth of the whole decision.

The C call itself does one more thing on every call that need not be repeated:
given no matrix handle (as the wrapper gives it), it makes a new proxy matrix, and
each new one reads the host's CPU quota from the cgroup files (eleven system calls
seen under ``strace``, about 65 us of a 190 us call on the same host). Passing a
proxy made once (``XGProxyDMatrixCreate``) skips that; the answer is the same.

:class:`RowPredictor` makes the C call with what is fixed built once: the config,
the library, the booster's handle and, per thread, the proxy and the output
pointers. Only the input's array interface is written per call. The C functions,
their arguments and the array-interface format are XGBoost's public C API
(``c_api.h``); the answer is the same array ``inplace_predict`` gives (a test
compares them bit for bit). Where the library cannot be reached this way, the
classifier keeps calling ``inplace_predict``.
"""

from __future__ import annotations

import ctypes
import json
import math
import threading
from functools import lru_cache
from typing import Any

import numpy as np

#: The prediction config ``inplace_predict`` sends for plain probabilities: every
#: tree (iteration range 0..0), NaN as missing, the booster's own output shape.
PREDICT_CONFIG = json.dumps(
    {
        "type": 0,
        "training": False,
        "iteration_begin": 0,
        "iteration_end": 0,
        "missing": math.nan,
        "strict_shape": False,
        "cache_id": 0,
    }
).encode()


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    """Return XGBoost's shared library (the one its Python package loaded)."""
    try:
        from xgboost.libpath import find_lib_path

        lib = ctypes.CDLL(find_lib_path()[0])
        functions = (
            lib.XGBoosterPredictFromDense,
            lib.XGProxyDMatrixCreate,
            lib.XGDMatrixFree,
        )
    except (ImportError, IndexError, OSError, AttributeError):
        return None
    for function in functions:
        function.restype = ctypes.c_int
    lib.XGBGetLastError.restype = ctypes.c_char_p
    return lib


def _check(lib: ctypes.CDLL, status: int, what: str) -> None:
    """Raise XGBoost's own message where one of its C calls failed."""
    if status != 0:
        raise RuntimeError(
            f"XGBoost's {what} must succeed. Got: {lib.XGBGetLastError().decode()}"
        )


class _ThreadCall:
    """One thread's proxy matrix and output pointers (C calls may run concurrently
    from the HTTP service's threads; each fills only its own)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self.proxy = ctypes.c_void_p()
        _check(lib, lib.XGProxyDMatrixCreate(ctypes.byref(self.proxy)), "proxy matrix")
        self.shape = ctypes.POINTER(ctypes.c_uint64)()
        self.dims = ctypes.c_uint64()
        self.out = ctypes.POINTER(ctypes.c_float)()
        self.arguments = (
            self.proxy,
            ctypes.byref(self.shape),
            ctypes.byref(self.dims),
            ctypes.byref(self.out),
        )

    def __del__(self) -> None:
        if self.proxy:
            self._lib.XGDMatrixFree(self.proxy)


class RowPredictor:
    """Predict a few float32 rows with one booster through the C API.

    The booster must stay alive as long as this object (it holds a reference).
    """

    def __init__(self, booster: Any) -> None:
        lib = _library()
        if lib is None:
            raise RuntimeError(
                "XGBoost's shared library must be loadable to predict rows through "
                "its C API. Got none from xgboost.libpath.find_lib_path()."
            )
        self._lib = lib
        self._booster = booster
        self._handle = booster.handle
        self._threads = threading.local()

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        """Return the flat float32 predictions of a C-contiguous 2-D float32 matrix."""
        call = getattr(self._threads, "call", None)
        if call is None:
            call = self._threads.call = _ThreadCall(self._lib)
        rows, columns = matrix.shape
        address = matrix.__array_interface__["data"][0]
        interface = (
            f'{{"data":[{address},true],"shape":[{rows},{columns}],'
            f'"strides":null,"typestr":"<f4","version":3}}'
        ).encode()
        status = self._lib.XGBoosterPredictFromDense(
            self._handle, interface, PREDICT_CONFIG, *call.arguments
        )
        _check(self._lib, status, "prediction call")
        size = 1
        for axis in range(call.dims.value):
            size *= call.shape[axis]
        # The buffer is XGBoost's and is reused by the next call: copy it out.
        result = np.empty(size, dtype=np.float32)
        ctypes.memmove(result.__array_interface__["data"][0], call.out, size * 4)
        return result
