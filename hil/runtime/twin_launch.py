"""Start the twin in its own process (DearPyGui must never share a process with the loop)."""

from __future__ import annotations

import os
import subprocess
import sys

from hil.runtime.process_life import ENV_PARENT


def start_twin(loop_name: str, robot: str, path: str | None = None, view: str | None = None) -> subprocess.Popen:
    # -P: the current folder (a hil checkout, say) must not shadow the installed package
    argv = [sys.executable, "-P", "-m", "hil.cli", "twin", "--attach", loop_name, "--robot", robot]
    if path:
        argv += ["--path", path]
    if view:
        argv += ["--view", view]
    return subprocess.Popen(argv, env={**os.environ, ENV_PARENT: str(os.getpid())})
