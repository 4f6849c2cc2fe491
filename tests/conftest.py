"""Shared test setup: a writable Numba cache before anything imports numba."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".numba_cache"))

import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402


class EmulatorProcess:
    """A board emulator in its own process on a pty (python -m firmware_protocol.emulator, or
    another emulator `module` with the same conventions: the pty path first on stdout)."""

    def __init__(self, *args: str, module: str = "firmware_protocol.emulator", argv0: list[str] | None = None) -> None:
        self.args = list(args)
        self.proc = subprocess.Popen([*(argv0 or [sys.executable, "-m", module]), *self.args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("/dev/"):
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.kill()
            raise RuntimeError(f"emulator did not start: {line!r} {err}")
        self.path = line

    def _close_pipes(self) -> None:
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None and not f.closed:
                f.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        self._close_pipes()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=5)
        self._close_pipes()
        return code


def bus_emulator(bus: str, servos: list[dict], *args: str) -> EmulatorProcess:
    """A servo bus emulator (firmware_protocol.buses.emulator) with these servos."""
    import json

    return EmulatorProcess("--bus", bus, "--servos", json.dumps(servos), *args, module="firmware_protocol.buses.emulator")


def pytest_addoption(parser):
    parser.addoption("--port", default=os.environ.get("HIL_TEST_PORT"),
                     help="a real board (or `hil emulate`'s pty) for the tests marked hardware; they skip without it")


@pytest.fixture
def board_port(request):
    """The serial port of the board under test (`pytest --port /dev/ttyACM0 -m hardware`)."""
    port = request.config.getoption("--port")
    if not port:
        pytest.skip("needs a board: run with --port PORT (or HIL_TEST_PORT)")
    return port


@pytest.fixture(scope="session", autouse=True)
def numba_cache_warm():
    """Compile every kernel once, in this process, before any test starts `hil` subprocesses: on a
    fresh machine the cache is empty and a subprocess compiling it would outlast the tests' waits."""
    from hil.warmup import compile_all

    _write_bytecode()
    compile_all()
    yield


def _write_bytecode() -> None:
    """The project's .pyc files, written once: the tests start a few hundred `hil` processes, and
    where PYTHONDONTWRITEBYTECODE is set (as on CI machines) each of them would otherwise compile
    every module it imports from source again (a third of a second per process)."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("hil", "firmware_protocol", "twin", "calibration", "tests"):
        compileall.compile_dir(str(root / package), quiet=2, workers=1)


HAVE_C_TOOLS = shutil.which("make") is not None and shutil.which(os.environ.get("CC", "gcc")) is not None

# the tests of the board itself (the link, calibration, the runtime against a board) run against
# both implementations; the others test the host side and take the Python board only
BOTH_BOARDS = {"tests.integration.test_link_emulator", "tests.integration.test_calibration",
               "tests.integration.test_runtime"}


def pytest_generate_tests(metafunc):
    if "emulator" in metafunc.fixturenames:
        both = metafunc.module.__name__ in BOTH_BOARDS
        metafunc.parametrize("emulator_impl", ["python", "c"] if both else ["python"])


@pytest.fixture
def emulator(emulator_impl):
    """Factory: emulator(*args) starts a board emulator process — the Python board model, and (a
    second run of the test, in the modules of BOTH_BOARDS) the C firmware's host build, which take
    the same options; all are killed at teardown. `emulator.impl` says which."""
    started: list[EmulatorProcess] = []
    argv0 = None
    if emulator_impl == "c":
        from hil.emulator_launch import c_emulator_binary

        if not HAVE_C_TOOLS:
            pytest.skip("the C firmware's host build needs make and gcc (apt-get install -y make gcc)")
        argv0 = [c_emulator_binary()]

    def start(*args: str) -> EmulatorProcess:
        e = EmulatorProcess(*args, argv0=argv0)
        started.append(e)
        return e

    start.impl = emulator_impl

    yield start
    for e in started:
        e.kill()


def wait_for(predicate, timeout_s: float = 2.0, step_s: float = 0.005):
    """Poll until predicate() is truthy; returns its value or None after the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(step_s)
    return None


@pytest.fixture(scope="session")
def xdisplay():
    """An X display: the existing one, or an Xvfb started here (-displayfd picks a free number);
    skips when there is neither. DearPyGui itself only ever runs in child processes."""
    import shutil

    from hil.runtime.supervisor import display_available

    if display_available():
        yield os.environ["DISPLAY"]
        return
    xvfb = shutil.which("Xvfb")
    if not xvfb:
        pytest.skip("no X display and no Xvfb (apt-get install -y xvfb)")
    r, w = os.pipe()
    proc = subprocess.Popen([xvfb, "-displayfd", str(w), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    buf = b""
    deadline = time.monotonic() + 10
    while not buf.endswith(b"\n") and time.monotonic() < deadline:
        chunk = os.read(r, 16)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    if not buf.strip():
        proc.kill()
        pytest.skip("Xvfb did not start")
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = ":" + buf.decode().strip()
    os.environ.setdefault("LIBGL_ALWAYS_SOFTWARE", "1")
    try:
        yield os.environ["DISPLAY"]
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old


def played_motion(path: str, model):
    """A keyframe motion as the loop plays it: slowed as `make_motion` slows it to keep the joints'
    speed and acceleration limits (keyframe times scaled)."""
    from hil.motion.keyframes import load_motion
    from hil.runtime.motion_sources import make_motion

    return load_motion(path, model).time_scaled(make_motion(path, model).time_scale)
