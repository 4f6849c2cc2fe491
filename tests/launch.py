"""How the tests start `hil`: `HIL + [ARGS…]`, through the test worker's fork server where one runs
(tests/fork_server.py), else a fresh interpreter; `FRESH_HIL` always a fresh interpreter (the
tests of start-up, of sys.path, of a process group signalled whole). `command_pid(proc)`: the pid
of the command itself (the forked process, or the client become the command)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

FRESH_HIL = [sys.executable, "-m", "hil.cli"]
CLIENT = str(Path(__file__).resolve().parent / "fork_client.py")
from tests.fork_client import SOCKET_ENV
HIL = [sys.executable, "-I", "-S", CLIENT] if os.environ.get(SOCKET_ENV) else FRESH_HIL


def command_pid(proc, timeout_s: float = 30.0) -> int:
    """The pid of the `hil` command `proc` started (proc.pid unless its fork server ran it)."""
    if os.environ.get(SOCKET_ENV) is None:
        return proc.pid
    pid_file = f"{os.environ[SOCKET_ENV]}.{proc.pid}.pid"
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with open(pid_file) as f:
                return int(f.read())
        except (OSError, ValueError):
            pass
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            return proc.pid   # ended
        if cmdline and CLIENT.encode() not in cmdline:
            return proc.pid   # the client became the command (a fresh interpreter); empty: still starting
        time.sleep(0.005)
    return proc.pid
