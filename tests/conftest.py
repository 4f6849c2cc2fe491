"""Shared test setup: a writable Numba cache before anything imports numba; a loop folder of this
test process's own; kernels and bytecode made once before the tests (and their workers) start."""

from __future__ import annotations

import gc
import os
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".numba_cache"))
# the loops a test starts are found only by this process's tests and their children: the test
# workers (pytest -n 3) each see one loop where a test expects one, and a user's own loops on this
# machine are neither seen nor touched
from hil.runtime.realtime import memory_folder  # noqa: E402 - imports nothing of numba

os.environ["HIL_RUNTIME_DIR"] = os.path.join(memory_folder(), f"hil-{os.getuid()}-pytest-{os.getpid()}")

# the runs the tests start are real-time runs on whatever machine runs them: a virtual machine's
# hypervisor can take a CPU away for longer than the board's own 50 ms command watchdog, which then
# latches (as it must on a real robot) in a test about something else. Runs that name no watchdog
# get a busy machine's margin; the tests of the watchdog name theirs (--watchdog-ms 50).
os.environ.setdefault("HIL_WATCHDOG_MS", "1000")

import contextlib  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

# pytest keeps each test module as it rewrote its asserts (tests/**/__pycache__, as by default):
# where PYTHONDONTWRITEBYTECODE is set, each worker would rewrite all of them again at every start
# (a CPU-second each); `_write_bytecode` writes the project's own .pyc files the same way
sys.dont_write_bytecode = False


class EmulatorProcess:
    """A board emulator in its own process on a pty (python -m firmware_protocol.emulator, or
    another emulator `module` with the same conventions: the pty path first on stdout)."""

    def __init__(self, *args: str, module: str = "firmware_protocol.emulator", argv0: list[str] | None = None) -> None:
        self.args = list(args)
        # a session of its own, as `hil run --dry-run` starts its own
        self.proc = subprocess.Popen([*(argv0 or [sys.executable, "-m", module]), *self.args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        from firmware_protocol.board_cpu import as_a_board_cpu

        as_a_board_cpu(self.proc.pid)
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


@pytest.fixture
def own_robot_cache(tmp_path, monkeypatch):
    """A robot cache of the test's own, and none in memory: what it checks is built from the file,
    not found built (a cached model would hide a builder's bug). `pytestmark =
    pytest.mark.usefixtures("own_robot_cache")` in a file of such tests."""
    from hil import robots

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    robots._cache.clear()
    yield
    robots._cache.clear()


_PYTHON_GC_THRESHOLD: list[int] = []


def pytest_collection_finish(session):
    if _PYTHON_GC_THRESHOLD:
        gc.set_threshold(*_PYTHON_GC_THRESHOLD)
    _start_fork_server()


def pytest_configure(config):
    """Once, in the process that starts the test workers (or runs the tests itself): compile every
    kernel before any test starts `hil` subprocesses (on a fresh machine the cache is empty and a
    subprocess compiling it would outlast the tests' waits), write the bytecode, build the C
    firmware's host programs. In every process, workers too: a command's rarer garbage collections
    while the test modules are imported (with them as much as a command imports), Python's own
    again for the tests (`pytest_collection_finish`: some drive a bus from this process, on time)."""
    from hil.process_life import start_command_process

    _PYTHON_GC_THRESHOLD[:] = gc.get_threshold()
    start_command_process()
    if os.environ.get("HIL_TESTS_NO_WARMUP"):
        return   # a mutation pass's runner (tests/mutation), whose tests start no processes
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _name_fork_server()
        return
    os.environ[LOOP_SLOTS_ENV] = os.environ["HIL_RUNTIME_DIR"] + "-loop-slots"
    os.makedirs(os.environ[LOOP_SLOTS_ENV], mode=0o700, exist_ok=True)
    from hil.emulator_launch import c_emulator_binary
    from hil.warmup import compile_all

    _write_bytecode()
    compile_all()
    if HAVE_C_TOOLS:
        try:
            c_emulator_binary()
        except Exception:
            pass   # the tests of the C board report the build's error themselves
    if not config.getoption("numprocesses", None):
        _name_fork_server()   # the tests run in this process


_FORK_SERVER: list[subprocess.Popen] = []


def _name_fork_server() -> None:
    """Where this process's fork server (tests/fork_server.py) will listen: named before the test
    modules are imported (tests/launch.py decides how they start `hil` then), started once they
    are (its imports would slow the collection down; the commands started before it listens run
    in fresh interpreters)."""
    from tests.fork_client import SOCKET_ENV

    if os.environ.get("HIL_TESTS_FRESH_COMMANDS"):
        return   # every command in a fresh interpreter, as a user starts it (and to compare)
    folder = os.environ["HIL_RUNTIME_DIR"] + "-fork"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.environ[SOCKET_ENV] = os.path.join(folder, "server")


def _start_fork_server() -> None:
    from tests.fork_client import SOCKET_ENV

    if os.environ.get(SOCKET_ENV) is None or _FORK_SERVER:
        return
    # in the worker's session, as a command the worker started itself: the kernel shares the CPUs
    # out by session (autogroups), and a session of its own would give its commands a share of
    # their own beside the board emulators (which take a raised one: firmware_protocol.board_cpu)
    _FORK_SERVER.append(subprocess.Popen([sys.executable, "-m", "tests.fork_server", os.environ[SOCKET_ENV]],
                                         cwd=Path(__file__).resolve().parent.parent,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))


# test files whose tests start real-time loops (`hil run`, `play`, `walk`, `rt-check`, port
# processes, a run after a calibration, a twin beside a loop), and --predict's rollouts, which take
# every CPU; the rest run beside them. Each file is in one of two chains (about equal in time: the
# figures of `pytest --durations=0`): a chain's files run on one worker, one test after another
LOOP_CHAINS = (
    ("test_bus_runs", "test_teleop", "test_physics_runs", "test_urdf_runs", "test_calibration_runs",
     "test_qemu_firmware", "test_rtcheck", "test_readme", "test_c_board_runs", "test_servo_mix"),
    ("test_runtime", "test_twin_live", "test_lifecycle_runs", "test_ctl", "test_export", "test_recorder_runs",
     "test_predict", "test_kits", "test_rocking_physics", "test_port_process", "test_loop_cpu", "test_zenoh"),
)
LOOP_MODULES = {m for chain in LOOP_CHAINS for m in chain}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Test workers (pytest -n 3) take one test file at a time, except that the files of each of
    LOOP_CHAINS go to one worker together, one test after another; the rest runs beside them. At
    most as many loop tests run at once as there are CPUs to pin loops to (`loop_cpus`)."""
    from xdist.scheduler import LoadScopeScheduling

    chain_of = {m: i for i, chain in enumerate(LOOP_CHAINS) for m in chain}

    class LoopsInChains(LoadScopeScheduling):
        def _assign_work_unit(self, node) -> None:
            # a chain first, while one waits: each is its worker's first work (the longest path of
            # the run), not taken up after a unit test file the size of the queue put before it
            chain = next((scope for scope in self.workqueue if scope.startswith("loops-")), None)
            if chain is not None:
                self.workqueue.move_to_end(chain, last=False)
            super()._assign_work_unit(node)

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if "hardware/" in path:   # the hardware tests share one real board: one after another
                return "hardware"
            m = _module_of(nodeid)
            return f"loops-{chain_of[m]}" if m in chain_of else path

    return LoopsInChains(config, log)


# A loop pins itself to a CPU no other hil loop has (hil.runtime.realtime) and refuses to start
# when there is none, as it must on a robot's machine; the tests' loops take turns for the CPUs
# the same way: a loop test holds one of as many slots as there are CPUs (an flock shared by every
# test worker), one marked `every_loop_cpu` (it takes the CPUs itself) holds them all, a module
# fixture that runs a loop holds one while its loop runs (`loop_slot`); each then waits for a loop
# that just ended to be gone.
LOOP_SLOTS_ENV = "HIL_TEST_LOOP_SLOTS"


def _wait_for_free_loop_cpus(every: bool, timeout_s: float = 30.0) -> None:
    """Until a CPU (`every`: each CPU) has no hil loop's reservation (an flock, seen in /proc/locks
    without taking it): the loop of a test that just ended may still be on its way out, a busy
    machine slows that down. Locks are matched by device and inode: a lock on another file with
    the same inode number (a pty's) is no loop's."""
    from firmware_protocol.serial_port import flock_holders
    from hil.runtime.realtime import _lock_path, _loop_cpus

    cpus = _loop_cpus()
    deadline = time.monotonic() + timeout_s
    while cpus and time.monotonic() < deadline:
        held = sum(1 for cpu in cpus if flock_holders(_lock_path(cpu)))
        if len(cpus) - held >= (len(cpus) if every else 1):
            return
        time.sleep(0.05)


def _loop_slot_count() -> int:
    return max(len(os.sched_getaffinity(0)), 1)


# module fixtures that run a loop (a bridge's run across its tests, a recording made before them)
# hold a slot themselves (`loop_slot`); a test that uses one starts no loop of its own and takes none
MODULE_LOOP_FIXTURES = {"remote_run", "walk_recording", "all_loop_cpus"}


def _slots(n: int) -> list[int]:
    folder = os.environ[LOOP_SLOTS_ENV]
    return [os.open(os.path.join(folder, f"slot{i}"), os.O_RDWR | os.O_CREAT, 0o600) for i in range(n)]


def _take_slots(fds: list[int], every: bool) -> None:
    """Lock one of `fds` (`every`: all of them at once), waiting as long as it takes. Never holds
    some while waiting for the others: two tests that each hold one and want another would wait
    for each other for ever. Nobody waits here holding a slot (a test whose module fixture holds
    one takes none), so the waiter whose turn it is waits only for loops that end."""
    import fcntl

    # one waiter at a time, in turn: a worker that ends a loop test and starts the next would
    # otherwise take the slot it just let go again and again while another waits for it
    turn = os.open(os.path.join(os.environ[LOOP_SLOTS_ENV], "turn"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)
        _poll_slots(fds, every)
    finally:
        os.close(turn)   # closing drops its lock


def _poll_slots(fds: list[int], every: bool) -> None:
    import fcntl

    while True:
        held = []
        for fd in fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if every:
                    break
                continue
            held.append(fd)
            if not every:
                return
        if every and len(held) == len(fds):
            return
        for fd in held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        time.sleep(0.05)


@contextlib.contextmanager
def loop_slot(every: bool = False):
    """One loop slot (`every`: all of them) while the block runs; nothing outside a test run's
    workers (the slots' folder unset)."""
    if os.environ.get(LOOP_SLOTS_ENV) is None:
        yield
        return
    n = _loop_slot_count()
    fds = _slots(n)
    try:
        _take_slots(fds, every or n == 1)
        _wait_for_free_loop_cpus(every or n == 1)
        yield
    finally:
        for fd in fds:
            os.close(fd)   # closing drops its lock


@pytest.fixture(scope="module")
def all_loop_cpus():
    """Every loop slot, held once across a module whose tests each need every loop CPU: taken test
    by test, each waited for the other chain's test of the moment to end (seen: 6–12 s each)."""
    with loop_slot(every=True):
        yield


@pytest.fixture(autouse=True)
def loop_cpus(request):
    if _module_of(request.node.nodeid) not in LOOP_MODULES or MODULE_LOOP_FIXTURES & set(request.fixturenames):
        if "all_loop_cpus" in request.fixturenames and os.environ.get(LOOP_SLOTS_ENV) is not None:
            _wait_for_free_loop_cpus(True)   # the test before's loops on their way out
        yield
        return
    with loop_slot(every=request.node.get_closest_marker("every_loop_cpu") is not None):
        yield


# a loop test's run is also a real-time run on whatever machine runs the tests: a virtual machine's
# hypervisor takes a CPU away for tens to hundreds of milliseconds (CI runs have shown 16–33 % steal),
# and the loop then does what it must on a real robot — holds after missed deadlines, disables after
# more, faults a servo that a starved emulator left silent. That is right, and other tests check it;
# here it is not what the test is about, so such a test runs again, up to three times. A broken
# feature fails all four runs; `-p no:rerunfailures` (or `--reruns 0`) shows every first failure.
LOOP_TEST_RERUNS = 3
LOOP_TEST_RERUN_DELAY_S = 5   # a noisy spell of the host passes: the next run starts after it
# tests outside the loop files whose subject is timing a busy host also upsets: the board emulator
# stopped 30 ms by the test, which beside CPU-bound jobs the scheduler also stops at moments the
# test does not choose (once in about 90 runs, two STATEs dropped); an emulator that drops STATEs
# after a stop fails every run; and a thousand commands a millisecond apart, each answered with a STATE
# (beside two CPU-bound jobs the emulator was once not scheduled long enough to answer 18 of them; one
# that drops STATEs fails every run)
TIMING_TESTS = {"test_a_board_emulator_that_was_not_scheduled_still_answers_every_command",
                "test_thousand_command_state_cycles"}


def pytest_collection_modifyitems(config, items):
    # the tests that need every loop CPU first: each of their chains starts with them, before the
    # other chain holds a CPU they would wait for (seen: 15 s each, in the middle of a run)
    items.sort(key=lambda item: item.get_closest_marker("every_loop_cpu") is None)
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        if _module_of(item.nodeid) in LOOP_MODULES or item.originalname in TIMING_TESTS:
            item.add_marker(pytest.mark.flaky(reruns=LOOP_TEST_RERUNS, reruns_delay=LOOP_TEST_RERUN_DELAY_S))


def pytest_runtest_logreport(report):
    """With HIL_TEST_RERUN_LOG=FILE, each failure that was run again is appended to FILE whole: the
    terminal names a rerun but keeps no trace of why (a test's flakiness has a cause to find)."""
    path = os.environ.get("HIL_TEST_RERUN_LOG")
    # where the test ran (a worker, or a run without workers), not again where xdist relays it
    if path and report.outcome == "rerun" and getattr(report, "node", None) is None:
        with open(path, "a") as f:
            f.write(f"===== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def pytest_unconfigure(config):
    for server in _FORK_SERVER:
        server.kill()
        server.wait()
    shutil.rmtree(os.environ["HIL_RUNTIME_DIR"], ignore_errors=True)
    shutil.rmtree(os.environ["HIL_RUNTIME_DIR"] + "-fork", ignore_errors=True)
    if not os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(LOOP_SLOTS_ENV):
        shutil.rmtree(os.environ[LOOP_SLOTS_ENV], ignore_errors=True)


def _write_bytecode() -> None:
    """The project's .pyc files, written once: the tests start a few hundred `hil` processes, and
    where PYTHONDONTWRITEBYTECODE is set (as on CI machines) each of them would otherwise compile
    every module it imports from source again (a third of a second per process)."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("hil", "firmware_protocol", "twin", "calibration", "tests"):
        compileall.compile_dir(str(root / package), quiet=2, workers=1)


HAVE_C_TOOLS = shutil.which("make") is not None and shutil.which(os.environ.get("CC", "gcc")) is not None
HAVE_QEMU_TOOLS = HAVE_C_TOOLS and shutil.which("arm-none-eabi-gcc") is not None \
    and shutil.which("qemu-system-arm") is not None

# the tests of the board itself (the link, calibration, the runtime against a board) run against
# every implementation: the Python board model, the C firmware's host build and its ARM image on
# QEMU; the others test the host side and take the Python board only
# (the ARM image on QEMU for the board's own behaviour, the link's; its runs of hil are in
# test_qemu_firmware: QEMU's processor is one more CPU-bound job beside the loops)
EVERY_BOARD = {"tests.integration.test_link_emulator": ("python", "c", "qemu"),
               "tests.integration.test_calibration": ("python", "c"),
               "tests.integration.test_runtime": ("python", "c")}


def pytest_generate_tests(metafunc):
    if "emulator" in metafunc.fixturenames:
        metafunc.parametrize("emulator_impl", EVERY_BOARD.get(metafunc.module.__name__, ("python",)))


@pytest.fixture
def emulator(emulator_impl):
    """Factory: emulator(*args) starts a board emulator process — the Python board model, and (more
    runs of the test, in the modules of EVERY_BOARD) the C firmware's host build and its ARM image on
    QEMU, which take the same options; all are killed at teardown. `emulator.impl` says which."""
    started: list[EmulatorProcess] = []
    argv0 = None
    if emulator_impl == "c":
        from hil.emulator_launch import c_emulator_binary

        if not HAVE_C_TOOLS:
            pytest.skip("the C firmware's host build needs make and gcc (apt-get install -y make gcc)")
        argv0 = [c_emulator_binary()]
    elif emulator_impl == "qemu":
        from hil.emulator_launch import qemu_image

        if not HAVE_QEMU_TOOLS:
            pytest.skip("the ARM image needs arm-none-eabi-gcc and qemu-system-arm (apt-get install -y "
                        "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)")
        argv0 = [sys.executable, "-m", "firmware_protocol.qemu_board", "--elf", qemu_image()]

    def start(*args: str) -> EmulatorProcess:
        e = EmulatorProcess(*args, argv0=argv0)
        started.append(e)
        return e

    start.impl = emulator_impl

    yield start
    for e in started:
        e.kill()


def dma_latency_holders() -> set[int]:
    """Pids of the processes that hold /dev/cpu_dma_latency open."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/cpu_dma_latency"
                   for fd in os.listdir(f"/proc/{pid}/fd")):
                out.add(int(pid))
        except OSError:
            pass
    return out


def process_tree(pid: int) -> set[int]:
    """`pid` and every process below it, now."""
    parent = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat") as f:
                parent[int(p)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            pass
    found, todo = {pid}, [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parent.items() if pp == p} - found
        found |= kids
        todo.extend(kids)
    return found


def dma_latency_before():
    """The kernel's cpu_dma_latency now, or None if some loop (another test worker's) holds it."""
    from hil.runtime import cpu_idle

    return None if dma_latency_holders() else cpu_idle.dma_latency_us()


def dma_latency_given_back(run_pids: set[int], before) -> bool:
    """No process of a run holds the latency request any more, and, unless a loop of someone
    else's (another test worker) held one at the start or holds one now, the kernel's value is
    what it was before (`before` None: unknown)."""
    from hil.runtime import cpu_idle

    holders = dma_latency_holders()
    return not holders & run_pids and (bool(holders) or before is None or cpu_idle.dma_latency_us() == before)


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

    from hil.display import display_available

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


def motion_clock(data, rate_hz: float):
    """The motion's own time at each recorded cycle (s; NaN before the motion started; after it
    ended, its end).

    The loop advances it one period per cycle that runs the motion and holds it still through
    holds and skipped deadlines, so on a busy machine it falls behind the wall clock: where the
    motion was at a cycle is found on this clock, not at the wall time since it started."""
    import numpy as np

    moving = (data["loop_flags"] & 4) != 0
    t = (np.cumsum(moving) - 1) / rate_hz
    return np.where(np.cumsum(moving) > 0, t, np.nan)


def played_motion(path: str, model, servo=None):
    """A keyframe motion as the loop plays it: slowed as `make_motion` slows it to keep the joints'
    speed, acceleration and torque limits (keyframe times scaled), each keyframe's angles as the
    servos are told them (with the compliance compensation). `servo`: the run's servo table (a bus
    config's; default the robot's)."""
    import dataclasses

    from hil.motion.keyframes import load_motion
    from hil.runtime.motion_sources import make_motion

    traj = make_motion(path, model, servo)
    motion = load_motion(path, model).time_scaled(traj.time_scale)
    motion.keyframes = [dataclasses.replace(k, q=traj.target(k.time_s).copy()) for k in motion.keyframes]
    return motion


@pytest.fixture(scope="module")
def standin_duck(tmp_path_factory):
    """The Open Duck Mini v2's side file (examples/robots/open_duck_mini_v2.toml) over the tests'
    stand-in for its makers' MJCF (tests/unit/mjcf/ducklike.xml), loaded: the makers' files are
    not ours to ship."""
    pytest.importorskip("mujoco")
    import hil.robots as robots

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path_factory.mktemp("duck")
    xmls = folder / "open_duck_mini_v2" / "xmls"
    xmls.mkdir(parents=True)
    shutil.copy(root / "tests" / "unit" / "mjcf" / "ducklike.xml", xmls / "scene_flat_terrain.xml")
    shutil.copy(root / "examples" / "robots" / "open_duck_mini_v2.toml", folder / "duck.toml")
    return robots.load(str(folder / "duck.toml"))
