"""One target's tests against the source as it is now: mutmut's runner during a mutation pass
(`python -m tests.mutation.runner TARGET`; exit 0: the tests pass, the mutant survives).

A Numba kernel is run as plain Python here: compiling each mutant (about a minute on 2 cores)
would make a pass of a few hundred mutants take hours, and the kernels' tests check the same
arithmetic either way. Only the target's own module is uncompiled; what it calls stays compiled."""

from __future__ import annotations

import os
import sys


def run_as_python(module: str) -> None:
    """Make hil's kernel decorator leave `module`'s functions as they are (must run before it is imported)."""
    import hil._jit as jit

    compile_kernel = jit.kernel

    def kernel(signature=None, **extra):
        if sys._getframe(1).f_globals.get("__name__") == module:
            return lambda f: f
        return compile_kernel(signature, **extra)

    jit.kernel = kernel


def main() -> int:
    import pytest

    from tests.mutation.targets import TARGETS

    _, tests, python_module = TARGETS[sys.argv[1]]
    warnings = []
    if python_module:
        run_as_python(python_module)
        # NumPy warns of inf − inf in plain Python where the compiled kernel computes it silently
        warnings = ["-W", "ignore::RuntimeWarning"]
    os.environ["HIL_TESTS_NO_WARMUP"] = "1"   # nothing to compile ahead: the tests here start no processes
    return int(pytest.main(["-x", "-q", "-n", "0", "-p", "no:cacheprovider", *warnings, *tests]))


if __name__ == "__main__":
    sys.exit(main())
