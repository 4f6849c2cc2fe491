"""What a run is asked to do: `RunRequest`, whose fields are the options of `hil run` and of the
commands that plan a motion and run it (`hil path`, `walk`, `play`, `replay`), declared once —
flag, help, unit, range — with `hil.options`: the parsers are built from it, a parse becomes it,
and the loop's configuration is made from it (`LoopConfig.from_request`). Units SI."""

from __future__ import annotations

from dataclasses import dataclass

from firmware_protocol import BOARD_IMPLEMENTATIONS
from firmware_protocol.buses import bus_list
from firmware_protocol.messages import CMD_TIMEOUT_MS_DEFAULT, CMD_TIMEOUT_MS_MAX, CMD_TIMEOUT_MS_MIN
from hil.options import LOOP_RATE_RANGE_HZ, option
from hil.runtime.realtime import DRY_RUN_SPIN_S, SPIN_MAX_S, SPIN_MIN_S

_RATES = f"{LOOP_RATE_RANGE_HZ[0]:g} … {LOOP_RATE_RANGE_HZ[1]:g}"

RECORD_ERRORS = ("stop", "continue")
PORT_IO = ("process", "thread", "inline")   # the first is the default
VIEWS = ("front", "side", "top", "iso")


@dataclass(frozen=True)
class RunRequest:
    robot: str
    port: str | None = option(None, "--port", "the board's serial port or pyserial URL (see `hil ports`)")
    dry_run: bool = option(False, "--dry-run", "start the built-in board emulator on a pty and use it")
    rate_hz: float | None = option(
        None, "--rate", f"the loop's rate (a planned motion's sample rate too), {_RATES} Hz (default: the robot's "
                        "own, which `hil robots` shows)", unit="Hz",
        lo=LOOP_RATE_RANGE_HZ[0], hi=LOOP_RATE_RANGE_HZ[1])
    duration_s: float | None = option(
        None, "--duration", "stop after this many seconds of the control loop, counted from its first cycle "
                            "(default: run until stopped)", unit="s", lo=0.001, hi=1e7)
    headless: bool = option(False, "--headless", "no twin window; print a live status line")
    record: str | None = option(None, "--record", "record every cycle to FILE (.npy, numpy.load reads it; see the "
                                                  "README)", metavar="FILE")
    record_errors: str = option(
        "stop", "--on-record-error", "when the recording cannot be written (a full disk): stop the run safely, or "
                                     "go on without recording (said); either way the run exits non-zero and says how "
                                     "many rows the file keeps", choices=RECORD_ERRORS)
    stats_json: str | None = option(None, "--stats-json", "write timing statistics to FILE at exit", metavar="FILE")
    motion: str | None = option(
        None, "--motion", "hold (default; jogs from the twin or `hil ctl jog` are followed with any motion), demo, a "
                          "motion file (.toml/.json, see `hil play`) or a trajectory .npz (t, q); started by Start in "
                          "the twin, or by --enable")
    enable: bool = option(False, "--enable", "enable the board at start and start the motion once ramped in (once; "
                                             "otherwise nothing moves until you enable in the twin or with `hil ctl "
                                             "enable`)")
    exit_when_done: bool = option(
        False, "--exit-when-done", "stop when the motion is finished (a motion file or trajectory: hold and demo "
                                   "never finish); headless, also (exit code 1) when it can no longer finish (fault, "
                                   "e-stop, link lost, held more than 3 s)")
    realtime: bool = option(True, "--no-realtime", "do not ask for SCHED_FIFO and CPU pinning", negated=True)
    keep_cpu_awake: bool = option(
        True, "--allow-cpu-idle", "let the CPUs enter idle states between cycles (saves power; each wake-up then "
                                  "pays the idle state's exit latency; default: kept awake where permitted)",
        negated=True)
    spin_us: float | None = option(
        None, "--spin-us", "busy-wait this long before each deadline instead of sleeping (less saves CPU, more "
                           "absorbs late wake-ups; at most one cycle; default: sized as the loop runs to how late "
                           f"its sleeps end, {SPIN_MIN_S * 1e6:g} … {SPIN_MAX_S * 1e6:g} µs; in a dry run "
                           f"{DRY_RUN_SPIN_S * 1e6:g} µs)", unit="µs")
    port_io: str = option(
        PORT_IO[0], "--port-io", "where the serial port's reads and writes run: a process of their own (the loop "
                                 "shares no GIL with them), a thread of the loop's process, or the loop itself",
        choices=PORT_IO)
    calibration: str | None = option(None, "--calibration", "calibration file (default: the board's own, by id)",
                                     metavar="FILE")
    faults: tuple[str, ...] = option((), "--fault", "dry-run only: inject emulator faults (see `hil emulate`)",
                                     repeated=True)
    path_file: str | None = None       # a planned path to show in the twin
    view: str | None = option(
        None, "--view", "the twin's camera: front (from +x, y to the right), side (from −y, x to the right), top "
                        "(down z) — drawn as orthographic views — or iso; the robot fitted in it (keys: F fits "
                        "again, R resets)", choices=VIEWS)
    shadow: bool = option(
        False, "--shadow", "a shadow twin: the robot in physics (MuJoCo) driven with the same commands, beside the "
                           "run; the residual measured − predicted per joint in the twin and the run's lines (with "
                           "--record, FILE.shadow.npy), flagged where it points to an offset, a reversed joint, "
                           "backlash or a stall (pip install -e '.[physics]')")
    bus: str | None = option(None, "--bus", f"drive a servo bus instead of a hil board: {bus_list()} (with "
                                            "--dry-run: its emulator, with the shipped config for that bus)")
    board_config: str | None = option(
        None, "--board-config", "the robot ↔ servo mapping (TOML: bus, baud, per joint servo id, servo model, zero "
                                "tick, direction, limits; default: the one shipped for --bus, see docs/buses.md)",
        metavar="FILE")
    emulator: str = option(
        "python", "--emulator", "with --dry-run: the Python board model, the C reference firmware's host build "
                                "(built with make and gcc on first use), or its ARM image on QEMU's STM32F405 "
                                "(qemu-system-arm and arm-none-eabi-gcc)", choices=BOARD_IMPLEMENTATIONS)
    physics: bool = option(
        False, "--physics", "with --dry-run: the robot in rigid-body physics behind the emulator (MuJoCo: gravity, "
                            "contacts, servos that sag, a humanoid that can fall; pip install -e '.[physics]')")
    compensate: bool = option(
        True, "--no-compensation", "send the planned joint angles as they are: no compliance compensation (by "
                                   "default the commands add what soft servos sag under the torques the motion "
                                   "needs, where the robot's servos declare a stiffness: docs/physics.md)",
        negated=True)
    speed: float = option(
        1.0, "--speed", "run the motion at this fraction of its written pace (0 < f ≤ 1): a walk's steps, a "
                        "program's feeds, a motion file's times stretched — to try a motion slowly on a new robot",
        metavar="FRACTION")
    strict: bool = option(False, "--strict", "refuse a motion its joints or servos cannot follow instead of "
                                             "slowing it down")
    stabilise: bool = option(
        True, "--no-stabiliser", "a humanoid's motions without the balance stabiliser (by default, where the board "
                                 "has an IMU, the ankles lean the body back toward the attitude the motion plans)",
        negated=True)
    watchdog_ms: float | None = option(
        None, "--watchdog-ms", f"the board's command watchdog: with no command for this long, the board holds or "
                               f"relaxes the robot and latches a fault ({CMD_TIMEOUT_MS_MIN} … {CMD_TIMEOUT_MS_MAX} "
                               f"ms; default: the board's own, {CMD_TIMEOUT_MS_DEFAULT} ms on hil's boards, a bus config's "
                               "command_timeout_ms; or the environment's HIL_WATCHDOG_MS). Raise it on a machine "
                               "busy with other work; see docs/lifecycle.md", unit="ms", metavar="MS",
        lo=CMD_TIMEOUT_MS_MIN, hi=CMD_TIMEOUT_MS_MAX)
    bring_in: bool = option(
        False, "--bring-in", "a joint that stands outside its range when enabled is brought in slowly from where it "
                             "stands (at the ramp-in speed, never further out), instead of the enable being refused")
    zenoh: bool = option(
        False, "--zenoh", "start a bridge process that publishes the loop's state under hil/<board id>/… (read-only: "
                          "remote e-stop only); `hil twin --zenoh` and `hil robots --zenoh` elsewhere")
    zenoh_config: str | None = option(
        None, "--zenoh-config", "Zenoh's own config file (JSON5: mode, endpoints, TLS, access control); default: "
                                "peer mode, multicast scouting", metavar="FILE")
    zenoh_rate_hz: float = option(100.0, "--zenoh-rate", "joint states published per second", unit="Hz",
                                  lo=1, hi=1000)
    zenoh_control: bool = option(
        False, "--zenoh-control", "accept remote jog, enable, start … too; needs --zenoh-config with access control "
                                  "or TLS")
    command: str = "run"               # the hil command that asked (its lines are said as `hil COMMAND: …`)

    # the options a command that plans a motion and runs it shares with `hil run` (add_run_target)
    RUN_TARGET = ("headless", "record", "record_errors", "stats_json", "stabilise", "compensate", "speed", "strict",
                  "bus", "board_config", "watchdog_ms", "bring_in", "emulator", "physics")
