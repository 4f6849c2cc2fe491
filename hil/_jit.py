"""The one place that fixes the Numba options used by every kernel.

`cache=True` keeps compiled machine code between processes (set `NUMBA_CACHE_DIR`
to a writable folder when the package directory is read-only); `error_model="numpy"`
makes a division by zero give inf/NaN instead of raising, so kernels never raise.
Of the fast-math flags only `contract` is on: it lets the compiler fuse a*b + c into one
fused multiply-add (one rounding instead of two; 5–8 % off FK and LM IK, measured side by side).
Not `nnan`/`ninf` (the compiler could drop the NaN checks the kernels rely on) nor `reassoc`
(it could undo the split-constant argument reduction of the inline sine and cosine).
The GIL is released (`nogil=True`) only by kernels that run for tens of microseconds or more
(the loop's cycle, LM IK, batched FK, path checks), so that a port or GUI thread runs meanwhile:
releasing and retaking it costs 50–100 ns, measured: a tenth of a PUMA FK call. Short kernels
keeping the GIL is relied on: `RobotModel.jacobian` and `com` share one scratch array per model.

Numba's own inlining (`inline="always"`) is kept for the few-line helpers (sine and cosine, a
rotation, a segment distance, a column of a Jacobian): it types the inlined code again at every
call site, and on the large kernels (FK, the pose check, LM's evaluation) it made a machine's
first run compile for minutes; LLVM still inlines what pays across the rest. Figures in
benchmarks/README.md ("compile").
"""

from __future__ import annotations

import numpy as np
from numba import njit, typeof
from numba.core import types
from numba.np import numpy_support

# Numba's cache is keyed on each kernel's own source file, not on this one: after changing these
# options, clear NUMBA_CACHE_DIR (and __pycache__) or kernels keep their old machine code.
_OPTIONS = dict(cache=True, error_model="numpy", fastmath={"contract"})


def kernel(signature=None, **extra):
    """Decorator: compile a kernel with the project's options (eagerly when a signature is given)."""
    options = dict(_OPTIONS)
    options.update(extra)
    if signature is None:
        return njit(**options)
    return njit(signature, **options)


def entry_point(dispatcher, *example_args):
    """The compiled entry of `dispatcher` for exactly the types of `example_args`.

    Calling it skips Numba's per-call type dispatch (a cost per array argument, measured in
    benchmarks/bench_kinematics.py), but it does no type checking at all: callers must pass arguments of exactly
    these types (the `RobotModel` wrappers check q's class, dtype, shape and contiguity first).
    Falls back to the dispatcher itself if the entry cannot be had.
    """
    try:
        return dispatcher.compile(tuple(numba_type(a) for a in example_args))
    except Exception:  # an internal API: any failure just means the slower, checked path
        return dispatcher


def numba_type(value):
    """Numba's type of `value` (`numba.typeof`), a plain NumPy array's built here as Numba builds it:
    Numba's own first asks whether the array is a masked one, and that question imports numpy.ma
    (60 ms of CPU in each process that loads a robot; one whose kernels are given tuples of arrays,
    a safety check's, imports it all the same: Numba types those arguments in Python)."""
    if type(value) is not np.ndarray:
        return typeof(value)
    return types.Array(numpy_support.from_dtype(value.dtype), value.ndim, numpy_support.map_layout(value),
                       readonly=not value.flags.writeable)
