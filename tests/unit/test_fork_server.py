"""The tests' fork server (tests/fork_server.py): a command it runs says, exits and ends as the same
command in a fresh interpreter does — or the tests of every command would test something else."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.conftest import wait_for
from tests.fork_client import SOCKET_ENV
from tests.launch import FRESH_HIL, HIL, command_pid


@pytest.fixture
def fork_server():
    path = os.environ.get(SOCKET_ENV)
    if path is None:
        pytest.skip("no fork server in this test run (HIL_TESTS_FRESH_COMMANDS)")
    assert wait_for(lambda: os.path.exists(path), timeout_s=120, step_s=0.05), "the fork server never listened"
    return path


@pytest.mark.parametrize("argv", [
    ["--version"],
    ["robots", "--robot", "puma560"],
    ["run", "--robot", "nope", "--dry-run"],                  # refused: one line, exit 2
    ["fk", "--robot", "puma560", "--bogus"],                  # argparse's usage error, exit 2
    ["urdf", "--robot", "puma560", "--out", "/proc/x.urdf"],   # cannot write its output
])
def test_a_forked_command_says_and_exits_as_a_fresh_one(fork_server, argv):
    forked = subprocess.Popen(HIL + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = command_pid(forked)
    out, err = forked.communicate(timeout=120)
    fresh = subprocess.run(FRESH_HIL + argv, capture_output=True, text=True, timeout=120)
    assert pid != forked.pid, "the command was not forked"
    assert (forked.returncode, out, err) == (fresh.returncode, fresh.stdout, fresh.stderr)


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _emulate(argv: list[str], background: bool = False) -> subprocess.Popen:
    """`hil emulate`; `background`: started with SIGINT ignored, as a shell without job control
    starts a background job (`pytest … &` in a script: the commands its tests start inherit it)."""
    proc = subprocess.Popen(argv + ["emulate", "--robot", "puma560"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, preexec_fn=_ignoring_sigint if background else None)
    assert proc.stdout.readline().startswith("/dev/")
    return proc


def _ended(proc: subprocess.Popen, pid: int) -> bool:
    """`proc` (and the command `pid`) ended by now; else both are killed."""
    gone = wait_for(lambda: proc.poll() is not None and not os.path.exists(f"/proc/{pid}"), timeout_s=20)
    for p in () if gone else (proc.pid, pid):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()
    proc.stdout.close()
    return bool(gone)


@pytest.mark.parametrize("background", [False, True])
def test_a_signal_to_the_client_is_the_commands_and_so_is_its_end(fork_server, background):
    """Also where the client starts with SIGINT ignored: `hil` sets its own handling of it (a run's
    Ctrl-C is an e-stop), so a SIGINT sent to it acts all the same; the client passes it on."""
    fresh = _emulate(FRESH_HIL, background)
    fresh.send_signal(signal.SIGINT)
    assert _ended(fresh, fresh.pid)
    proc = _emulate(HIL, background)
    pid = command_pid(proc)
    proc.send_signal(signal.SIGINT)
    assert _ended(proc, pid), "the command did not end"
    assert pid != proc.pid and proc.returncode == fresh.returncode


def test_a_client_killed_takes_its_command_with_it(fork_server):
    proc = _emulate(HIL)
    pid = command_pid(proc)
    proc.kill()
    assert _ended(proc, pid), "the command outlived its client"
    assert pid != proc.pid


def test_an_environment_that_imports_differently_gets_a_fresh_interpreter(fork_server):
    env = dict(os.environ, PYTHONWARNINGS="error::DeprecationWarning")
    proc = subprocess.Popen(HIL + ["--version"], stdout=subprocess.PIPE, text=True, env=env)
    pid = command_pid(proc)
    out, _ = proc.communicate(timeout=60)
    assert pid == proc.pid and out.startswith("hil ")
