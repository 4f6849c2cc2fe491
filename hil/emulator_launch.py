"""Start the board emulator that matches a robot model (dry-run, tests, `hil emulate`).

The emulator itself lives in `firmware_protocol.emulator` and knows nothing of robot models; this
module turns a `RobotModel` into its command line: board kind, joint ranges, power-on pose and
speeds, plus the hidden calibration errors and faults a user asks for.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import firmware_protocol
from firmware_protocol import BOARD_IMPLEMENTATIONS
from firmware_protocol import board_kinds
from firmware_protocol import messages as M
from firmware_protocol.buses.emulator import parse_faults, parse_hands
from firmware_protocol.emulator.__main__ import Faults
from firmware_protocol.board_cpu import as_a_board_cpu
from firmware_protocol.buses import FIRST_BUS
from hil.board_config import emulated_servos
from hil.errors import InputError, did_you_mean
from hil.inputs import number



def board_kind(model) -> str:
    """Emulator kind for a model: the `board` its data file names ("puma6", "humanoid17", or "servos",
    sized to the robot: SPEC.md §9)."""
    if model.board == "servos" and model.n > M.MAX_JOINTS:
        raise InputError(f"robot {model.name!r} has {model.n} joints; our protocol carries up to {M.MAX_JOINTS} "
                         f"per board: dry-run it on a servo bus (--bus {FIRST_BUS}) or drive it from two boards")
    if model.board not in board_kinds.BY_NAME:
        raise InputError(f"robot {model.name!r} names no board the emulator has ([robot] board = "
                         f"{model.board!r}; boards: {', '.join(board_kinds.BY_NAME)})")
    return model.board


def parse_joint_values(model, text: str | None, what: str) -> np.ndarray | None:
    """"1.5,0,-2,..." (one per joint) or "l_knee=2.5,r_hip_pitch=-1" → array (n,), degrees as given."""
    if not text:
        return None
    out = np.zeros(model.n)
    items = [t for t in text.replace(" ", ",").split(",") if t]
    if all("=" in t for t in items):
        for t in items:
            name, val = t.split("=", 1)
            try:
                j = model.joint_index(name.strip())
            except (KeyError, ValueError, IndexError):
                raise InputError(f"{what}: {name.strip()!r} is not a joint of {model.name}"
                                 f"{did_you_mean(name.strip(), model.joint_names)} ({', '.join(model.joint_names)})") \
                    from None
            out[j] = number(val, f"{what}: {name.strip()}", -180, 180, "deg")
        return out
    try:
        vals = [float(t) for t in items]
    except ValueError:
        raise InputError(f"{what}: expected {model.n} numbers or joint=value pairs, got {text!r}") from None
    for v in vals:
        number(v, what, -180, 180, "deg")
    if len(vals) != model.n:
        raise InputError(f"{what}: {model.name} has {model.n} joints ({', '.join(model.joint_names)}), "
                         f"got {len(vals)} values")
    return np.array(vals)


def parse_joint_ranges(model, text: str | None, what: str) -> dict[str, tuple[float, float]]:
    """"l_knee=-5:120,r_knee=0:90" (degrees) → {joint name: (lo, hi) rad}."""
    out = {}
    for item in [t for t in (text or "").replace(" ", ",").split(",") if t]:
        name, _, span = item.partition("=")
        lo, sep, hi = span.partition(":")
        if name.strip() not in model.joint_names:
            raise InputError(f"{what}: {name.strip()!r} is not a joint of {model.name}"
                             f"{did_you_mean(name.strip(), model.joint_names)} ({', '.join(model.joint_names)})")
        if not sep:
            raise InputError(f"{what}: {item!r} is not JOINT=LO:HI (degrees, e.g. l_knee=-5:120)")
        a = number(lo, f"{what} {name.strip()} low", -360, 360, "deg")
        b = number(hi, f"{what} {name.strip()} high", -360, 360, "deg")
        if not a < b:
            raise InputError(f"{what}: {item!r}: LO must be below HI")
        out[name.strip()] = (math.radians(a), math.radians(b))
    return out


def parse_joint_list(model, text: str | None) -> list[int]:
    """"r_knee,3" → joint indices."""
    if not text:
        return []
    out = []
    for tok in text.replace(" ", ",").split(","):
        if tok:
            try:
                out.append(model.joint_index(int(tok) if tok.isdigit() else tok))
            except (KeyError, ValueError, IndexError):
                raise InputError(f"--reverse: {tok!r} is not a joint of {model.name}"
                                 f"{did_you_mean(tok, model.joint_names)} (names or indices 0…{model.n - 1})") from None
    return out


def check_emulator_options(uid: str | None, link: str | None, baud, latency_ms, noise_deg) -> None:
    """The emulator's own options, refused with a message before it starts."""
    if uid is not None and (len(uid) != 24 or any(c not in "0123456789abcdefABCDEF" for c in uid)):
        raise InputError(f"--uid {uid!r}: a board id is 24 hex digits (12 bytes), e.g. 0123456789ABCDEF01234567")
    if link is not None:
        folder = os.path.dirname(os.path.abspath(link))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise InputError(f"--link {link}: cannot make a symlink there (the folder {folder} does not exist or "
                             "is not writable)")
    if baud is not None:
        number(baud, "--baud", 300, 2e7, "baud")
    if latency_ms is not None:
        number(latency_ms, "--latency-ms", 0, 10_000, "ms")
    if noise_deg is not None:
        number(noise_deg, "--noise-deg", 0, 10, "deg")


def emulator_args(model, offsets_deg=None, reverse=(), faults=(), uid: str | None = None,
                  link: str | None = None, baud: float | None = None, latency_ms: float | None = None,
                  noise_deg: float | None = None, initial=None, seed: int | None = None,
                  parent_pid: int | None = None, watchdog_ms: float | None = None) -> list[str]:
    """The options of `python -m firmware_protocol.emulator` for this model (see `emulator_argv`)."""
    init = model.home if initial is None else np.asarray(initial, float)
    config = {"lower_deg": np.degrees(model.lower).tolist(), "upper_deg": np.degrees(model.upper).tolist(),
              "initial_deg": np.degrees(init).tolist(),
              "vmax_deg_s": np.degrees(model.velocity_limit).tolist()}
    argv = ["--kind", board_kind(model), "--config", json.dumps(config)]
    if offsets_deg is not None:
        argv += ["--offsets-deg", ",".join(f"{v:.6f}" for v in offsets_deg)]
    if reverse:
        argv += ["--reverse", ",".join(str(j) for j in reverse)]
    for f in faults:
        argv += ["--fault", f]
    for flag, value in (("--uid", uid), ("--link", link), ("--baud", baud), ("--latency-ms", latency_ms),
                        ("--noise-deg", noise_deg), ("--seed", seed), ("--parent-pid", parent_pid),
                        ("--watchdog-ms", watchdog_ms)):
        if value is not None:
            argv += [flag, str(value)]
    return argv


C_SOURCES = Path(firmware_protocol.__file__).resolve().parent / "c"


def c_build_dir() -> Path:
    """Where the C firmware's host build goes: a user cache (the installed package may be read-only),
    one folder per source tree (two checkouts must not rebuild each other's)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tree = hashlib.sha1(str(C_SOURCES).encode()).hexdigest()[:10]
    return Path(base) / "hil" / f"c-firmware-{tree}"


def _c_build(target: str, product: Path, needs: tuple[str, ...], install: str) -> str:
    """`make TARGET` of the C firmware into the build cache, on first use and again when a source
    is newer than its product; two commands starting at once build one after the other."""
    sources = [p for p in C_SOURCES.rglob("*") if p.suffix in (".c", ".h", ".ld") or p.name == "Makefile"]
    if not sources:
        raise InputError(f"the C firmware sources are not in {C_SOURCES}: reinstall hil from its repository")

    def fresh() -> bool:
        return product.exists() and product.stat().st_mtime >= max(p.stat().st_mtime for p in sources)

    if fresh():
        return str(product)
    missing = [tool for tool in needs if shutil.which(tool) is None]
    if missing:
        raise InputError(f"the C firmware's {target} build needs {', '.join(missing)} ({install})")
    c_build_dir().mkdir(parents=True, exist_ok=True)
    with open(c_build_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if fresh():
            return str(product)
        r = subprocess.run(["make", "-s", "-C", str(C_SOURCES), target, f"BUILD={c_build_dir()}",
                            f"PYTHON={sys.executable}"], capture_output=True, text=True)
    if r.returncode != 0 or not product.exists():
        raise InputError(f"building the C firmware failed (make -C {C_SOURCES} {target}):\n{r.stderr.strip()[-2000:]}")
    return str(product)


def c_emulator_binary() -> str:
    """The host build of the C firmware (`make host`)."""
    return _c_build("host", c_build_dir() / "hil-board-host", ("make", os.environ.get("CC", "gcc")),
                    "Debian: apt-get install -y make gcc")


QEMU_IMAGE = "hil-qemu-stm32f405.elf"
# QEMU 7.2's STM32 USART takes a byte from the host only once the firmware has read the last one, one
# pass of QEMU's main loop each (benchmarks/README.md: about 150 humanoid17 exchanges a second): a
# loop on the QEMU image runs at this rate unless --rate says otherwise
QEMU_RATE_HZ = 100.0


def qemu_image() -> str:
    """The ARM image for QEMU's STM32F405 (`make qemu`), and QEMU there to run it."""
    if shutil.which("qemu-system-arm") is None:
        raise InputError("--impl/--emulator qemu runs the ARM firmware in qemu-system-arm, which is not installed "
                         "(Debian: apt-get install -y qemu-system-arm)")
    return _c_build("qemu", c_build_dir() / QEMU_IMAGE, ("make", "arm-none-eabi-gcc"),
                    "Debian: apt-get install -y make gcc-arm-none-eabi libnewlib-arm-none-eabi")


def physics_prefix(model, bus_config=None, truth: str | None = None, world: str | None = None) -> list[str]:
    """The start of an emulator command line with the robot in physics behind it (hil.physics.emulate);
    the emulator's own options follow. `truth`: where it writes what the robot did, at its exit;
    `world`: where it publishes the body's pose and floor contacts while it runs."""
    check_physics()
    argv = [sys.executable, "-P", "-m", "hil.physics.emulate", "--robot", model.spec]
    for flag, value in (("--truth", truth), ("--world", world)):
        if value:
            argv += [flag, value]
    if bus_config is not None:
        argv += ["--bus", bus_config.bus]
        if not bus_config.shipped:
            argv += ["--board-config", bus_config.source]
    return argv + ["--"]


def check_physics(option: str = "--physics") -> None:
    """InputError, naming the option that asked for it and saying what to install, when MuJoCo is
    not there."""
    try:
        import mujoco  # noqa: F401 - lazy: an optional extra, asked for only by --physics and --shadow
    except ImportError:
        raise InputError(f"{option} needs MuJoCo, which is not installed: pip install -e '.[physics]' "
                         "(or pip install mujoco)") from None


def emulator_argv(model, impl: str = "python", physics: bool = False, truth: str | None = None,
                  world: str | None = None, **options) -> list[str]:
    """The whole command line that starts the emulator for this model: the Python board model, or
    the C firmware's host build (`impl="c"`), which take the same options; with `physics` the Python
    board model with the robot in MuJoCo behind it. -P: the current folder (a hil checkout, say)
    must not shadow the installed package."""
    if physics:
        if impl != "python":
            raise InputError(f"--physics runs the Python board model with MuJoCo behind it; leave out --emulator {impl}")
        return [*physics_prefix(model, truth=truth, world=world), *emulator_args(model, **options)]
    if impl == "c":
        if not board_kinds.BY_NAME[board_kind(model)].n_joints:
            fixed = ", ".join(k.name for k in board_kinds.KINDS if k.n_joints)
            raise InputError(f"{model.name}: the C firmware's host build has the {fixed} boards; a robot "
                             "sized from its URDF runs on the Python emulator (leave out --impl c / --emulator c)")
        return [c_emulator_binary(), *emulator_args(model, **options)]
    if impl == "qemu":   # the ARM image; its launcher takes the same options
        return [sys.executable, "-P", "-m", "firmware_protocol.qemu_board", "--elf", qemu_image(),
                *emulator_args(model, **options)]
    if impl != "python":
        raise InputError(f"--emulator {impl!r}: emulators are {', '.join(BOARD_IMPLEMENTATIONS)}")
    return [sys.executable, "-P", "-m", "firmware_protocol.emulator", *emulator_args(model, **options)]


@dataclass
class EmulatorHandle:
    """A running emulator process and the pty path it serves."""

    path: str
    proc: subprocess.Popen

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 3.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _spawn(argv: list[str], what: str) -> EmulatorHandle:
    """An emulator in its own process; returns once it has printed its pty path."""
    # its own session: a Ctrl-C in the terminal must reach the loop (which sends ESTOP), not kill the board
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    as_a_board_cpu(proc.pid)
    path = proc.stdout.readline().strip()
    if not path.startswith("/dev/"):
        proc.kill()
        proc.wait()
        raise InputError(f"the {what} did not start (exit code {proc.returncode})")
    return EmulatorHandle(path, proc)


def start_emulator(model, **kwargs) -> EmulatorHandle:
    """Start the matching board emulator; returns once its pty path is known."""
    return _spawn(emulator_argv(model, **kwargs), "board emulator")


def check_fault(spec: str) -> None:
    """A `--fault` spec the emulator accepts, or InputError with the emulator's own explanation."""

    try:
        Faults.parse([spec])
    except SystemExit as e:
        raise InputError(f"--fault: {str(e.code).removeprefix('emulator: ')}") from None


def bus_emulator_argv(config, model, faults=(), echo: bool | None = None, baud: float | None = None,
                      return_delay_us: float | None = None, link: str | None = None,
                      parent_pid: int | None = None, physics: bool = False, truth: str | None = None,
                      world: str | None = None, hands=(), factory: bool = False, eeprom: str | None = None) -> list[str]:
    """The command line of the servo bus emulator for a board config (`firmware_protocol.buses.emulator`):
    its servos at the robot's home pose, at the config's baud rate, echoing if the config says so;
    with `physics` the servos' joints in MuJoCo (hil.physics.emulate); `hands`: its --hand specs."""

    head = physics_prefix(model, config, truth, world) if physics else \
        [sys.executable, "-P", "-m", "firmware_protocol.buses.emulator"]
    argv = [*head, "--bus", config.bus,
            "--servos", json.dumps(emulated_servos(config, model)), "--baud", str(config.baud if baud is None else baud)]
    if echo if echo is not None else bool(config.echo):
        argv.append("--echo")
    for flag, value in (("--return-delay-us", return_delay_us), ("--link", link), ("--parent-pid", parent_pid)):
        if value is not None:
            argv += [flag, str(value)]
    for f in faults:
        argv += ["--fault", f]
    for h in hands:
        argv += ["--hand", h]
    if factory:
        argv.append("--factory")
    if eeprom is not None:
        argv += ["--eeprom", eeprom]
    return argv


SWEEP_S = 6.0   # a sweeping hand's round trip through a joint's range


def sweeping_hands(config) -> list[str]:
    """--hand specs that turn every joint's servo through most of its range and back, again and
    again, starting a second after the host first speaks to it (torque off only)."""
    out = []
    for j in config.joints:
        a, b = sorted((j.ticks(j.min_rad), j.ticks(j.max_rad)))
        margin = 0.05 * (b - a)
        out.append(f"{j.servo_id}:{a + margin:.0f}:{b - margin:.0f}@1-{1 + SWEEP_S:g}*")
    return out


TELEOP_SHARE = 0.15   # a teleop dry run's hand: each joint this share of its range either side of home


def teleop_hands(config, model) -> list[str]:
    """--hand specs for an emulated leader in a teleop dry run: each joint round its home pose and
    back, 15 % of its range either way, each at its own pace (5 s, 6 s, …), so the follower
    has something to follow that stays inside its ranges."""
    out = []
    for k, j in enumerate(config.joints):
        lo, hi = max(j.min_rad, float(model.lower[k])), min(j.max_rad, float(model.upper[k]))
        home = min(hi, max(lo, float(model.home[k])))
        swing = TELEOP_SHARE * (hi - lo)
        a, b = j.ticks(max(lo, home - swing)), j.ticks(min(hi, home + swing))
        out.append(f"{j.servo_id}:{a}:{b}@0.5-{5.5 + k:g}*")
    return out


def check_hand(spec: str) -> str:
    """A --hand spec the emulator accepts, or InputError with its own explanation."""
    try:
        parse_hands([spec])
    except SystemExit as e:
        raise InputError(f"--hand: {str(e.code).removeprefix('emulator: ')}") from None
    return spec


def check_bus_fault(spec: str) -> None:

    try:
        parse_faults([spec])
    except SystemExit as e:
        raise InputError(f"--fault: {str(e.code).removeprefix('emulator: ')}") from None


def start_bus_emulator(config, model, **kwargs) -> EmulatorHandle:
    """Start the servo bus emulator for `config`; returns once its pty path is known."""
    return _spawn(bus_emulator_argv(config, model, **kwargs), "servo bus emulator")
