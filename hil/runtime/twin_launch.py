"""Start the twin, and the shadow, each in its own process (DearPyGui must never share a process with
the loop, nor physics its CPU)."""

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


def start_shadow(loop_name: str, robot: str, board_config: str | None, record: str | None) -> subprocess.Popen:
    """The shadow twin (hil.runtime.shadow) beside the loop `loop_name`; it ends with this process."""
    argv = [sys.executable, "-P", "-m", "hil.runtime.shadow", "--loop", loop_name, "--robot", robot]
    if board_config:
        argv += ["--board-config", board_config]
    if record:
        argv += ["--record", record]
    return subprocess.Popen(argv, env={**os.environ, ENV_PARENT: str(os.getpid())})
