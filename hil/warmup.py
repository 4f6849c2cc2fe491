"""Compile every Numba kernel ahead of use (`hil warmup`), and say so when a command is about to.

Compiled machine code is cached on disk, so only the first run on a machine (or after an
upgrade) pays for it: what the loop needs in about 20 s on a 2-core machine, everything (the
planners and IK too) in about a minute.
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
import pickle
import sys
import time
from pathlib import Path

import hil

COMPILE_NOTE = ("compiling the kinematics and safety kernels (first run on this machine: about 20 seconds; "
                "later runs start in seconds; `hil warmup` does this ahead) …")


def cache_is_cold() -> bool:
    """True when no compiled safety kernel is cached for the installed source (the loop's first
    start would compile): none at all, or only for another source or Numba (hil upgraded or edited).
    Read as Numba reads its index: the version, then the source's stamp (its content's hash in
    recent Numba, its mtime and size in older ones), so a file only touched is not taken as new."""
    folder = os.environ.get("NUMBA_CACHE_DIR")
    source = Path(hil.__file__).parent / "safety" / "_kernel.py"
    pattern = (os.path.join(folder, "safety_*", "_kernel.*.nbi") if folder
               else str(source.parent / "__pycache__" / "_kernel.*.nbi"))
    try:
        st = source.stat()
        stamps = (hashlib.sha256(source.read_bytes()).digest(), (st.st_mtime, st.st_size))
    except OSError:
        return False
    return not any(_index_stamp(index) in stamps for index in glob.glob(pattern))


def _index_stamp(path: str):
    """The source stamp a Numba cache index was written for (None: unreadable, or another Numba).
    Read without importing Numba (a third of a second of every command's start): its version
    from the package's metadata, the index's entries (Numba's types) left unbuilt."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        with open(path, "rb") as f:
            if pickle.load(f) != version("numba"):
                return None
            return _StampOnly(io.BytesIO(f.read())).load()[0]
    except (PackageNotFoundError, Exception):  # noqa: BLE001 - any unreadable index is one Numba will not use either
        return None


class _Unbuilt:
    """Stands for any of Numba's objects in an index: takes whatever it is built from."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __setstate__(self, state) -> None:
        pass


class _StampOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module.split(".")[0] == "numba":
            return _Unbuilt
        return super().find_class(module, name)


def warm_if_cold(out=sys.stdout) -> None:
    """Before a command that starts the loop or plans: on a machine whose cache is cold, compile
    here first (saying so), so that the loop, its port process and the planners then load the
    compiled code instead of each compiling while the run's time passes."""
    if cache_is_cold():
        print(COMPILE_NOTE, file=out, flush=True)
        compile_all(loop_only=True)


def compile_all(progress=None, loop_only: bool = False) -> float:
    """Compile (or load) every kernel the loop, the planners and IK use (compiled code depends on
    the argument types, not on the robot: the two built-in robots cover every kernel's types);
    returns the seconds it took. `progress(text)` is told what is being compiled. `loop_only`:
    just what the loop and its safety checks run (the planners compile the rest where they run,
    before a run starts)."""
    import numpy as np

    import hil.robots as robots
    from hil.kinematics import Task, ik_lm, ik_puma
    from hil.safety import SafetyChecker

    t0 = time.monotonic()
    say = progress or (lambda text: None)
    for name in ("puma560", "humanoid17"):
        m = robots.load(name)
        q = m.home.copy()
        say(f"{name}: kinematics")
        m.fk(q), m.fk_frames(q), m.jacobian(q), m.com(q)
        say(f"{name}: safety checks")
        checker = SafetyChecker(m)
        checker.step(q, q.copy(), 0.002, 1.0, q.copy(), q.copy())
        checker.check(q)
        checker.check_path(np.repeat(q[None, :], 2, axis=0))
        if loop_only:
            continue
        m.com_jacobian(q), m.fk_batch(q[None, :])
        say(f"{name}: inverse kinematics")
        ik_lm(m, [Task(m.tool_frame, m.fk(q))], q)
        if "dh" in m.meta:
            ik_puma(m, m.fk(q))
    return time.monotonic() - t0
