"""What the command modules share: help formatting, the options of a run, small parsers."""

from __future__ import annotations

import argparse
import errno
import os
import re
import tempfile

from hil.errors import InputError, did_you_mean
from hil.options import add_options

ROBOT_HELP = ("robot: a shipped name (puma560, humanoid17, so101, so100, koch; see `hil robots`), a URDF file, or a robot "
              ".toml file (ours, or a side file naming a URDF: docs/robots.md)")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks and shows each option's default when it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("%(default)" not in text and "default" not in text and default not in (None, False, "", argparse.SUPPRESS)
                and not action.option_strings == [] and action.nargs != 0):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors add what the user may have meant: a mistyped command or
    choice, a mistyped option (also when it left a required one missing)."""

    argv: list[str] = []   # the command line being parsed (set by the CLI's main)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # a value, not an option: -1e-3 and -inf too (argparse's own takes -5 and -0.5 only, and says
        # `--stride: expected one argument` for the rest); no hil option looks like a number
        self._negative_number_matcher = re.compile(r"^-(\d+|\d*\.\d+|\d*\.?\d+[eE][-+]?\d+|inf|nan)$", re.I)

    def error(self, message: str):
        self.exit(2, f"{self.format_usage()}{self.prog}: error: {message}{self._suggestion(message)}\n")

    def _suggestion(self, message: str) -> str:
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        known = [o for o in self._option_string_actions if o.startswith("--")]
        typed = [t.split("=", 1)[0] for t in self.argv if t.startswith("--") and t.split("=", 1)[0] not in known]
        hints = [f"{t}: did you mean {m}?" for t in typed
                 for m in [did_you_mean(t, known, most=1).removeprefix(" (did you mean ").removesuffix("?)")] if m]
        return f" ({'; '.join(hints)})" if hints else ""


def add_command(sub, name: str, summary: str, description: str, examples: list[str]) -> argparse.ArgumentParser:
    """A subcommand with a one-line summary (in `hil --help`), a description and examples."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, allow_abbrev=False, help=summary,
                          description=f"{summary[0].upper()}{summary[1:]}. {description}",
                          epilog=epilog, formatter_class=HelpFormatter)


def add_run_target(s: argparse.ArgumentParser) -> None:
    """Where a planned motion runs (plan only when neither is given) and how the run is reported:
    the options `hil path`, `hil walk` and `hil play` share with `hil run` (RunRequest.RUN_TARGET)."""
    from hil.runtime.run_request import RunRequest

    add_options(s.add_mutually_exclusive_group(), RunRequest, ("dry_run", "port"))
    add_options(s, RunRequest, RunRequest.RUN_TARGET)


def dry_run_bus(model, dry_run: bool, bus: str | None, board_config: str | None, command: str) -> str | None:
    """--bus, as given; for a dry run of a robot with more joints than hil's own board carries (and
    no --bus or --board-config), the first servo bus's emulator with its generated map (said)."""
    from firmware_protocol import messages
    from firmware_protocol.buses import FIRST_BUS

    if not dry_run or bus or board_config or model.board != "servos" or model.n <= messages.MAX_JOINTS:
        return bus
    print(f"hil {command}: {model.name} has {model.n} joints, more than hil's own board carries "
          f"({messages.MAX_JOINTS}): the dry run goes over an emulated {FIRST_BUS} bus (--bus to choose another)")
    return FIRST_BUS


def set_dry_run_bus(args: argparse.Namespace, model, command: str) -> None:
    """`dry_run_bus` into the parsed options."""
    args.bus = dry_run_bus(model, getattr(args, "dry_run", False), args.bus, args.board_config, command)


def speed_of(args: argparse.Namespace) -> float:
    """--speed, checked: 0 < f ≤ 1."""
    speed = getattr(args, "speed", 1.0)
    if speed is None:
        return 1.0
    if not (0.0 < speed <= 1.0):   # also NaN
        raise InputError(f"--speed {speed:g}: a fraction of the written pace, more than 0 and at most 1 (e.g. 0.5)")
    return float(speed)


def add_run_options(s: argparse.ArgumentParser, *names: str) -> None:
    """Options of a run (RunRequest's fields by name), as `hil run` declares them, for a command
    that takes some of them (`hil replay`, `hil emulate`)."""
    from hil.runtime.run_request import RunRequest

    add_options(s, RunRequest, names)


def servo_for(args, model):
    """The servos a run drives, as a physics model: the board config's [servo] table over the
    robot's (hil.robots.servos), the robot's own without --bus/--board-config."""
    from hil import board_config

    bus = board_config.resolve(model, getattr(args, "bus", None), getattr(args, "board_config", None))
    return board_config.servos_of(model, bus)


def floats(text: str, n: int, what: str) -> list[float]:
    """`n` comma-separated finite numbers from `text`."""
    try:
        vals = [float(v) for v in text.replace(" ", ",").split(",") if v]
    except ValueError:
        raise InputError(f"{what}: expected {n} comma-separated numbers, got {text!r}") from None
    if len(vals) != n:
        raise InputError(f"{what}: expected {n} comma-separated numbers, got {len(vals)}")
    if not all(abs(v) < 1e9 for v in vals):
        raise InputError(f"{what}: the numbers must be finite and of a sensible size, got {text!r}")
    return vals


def trajectory_out(args: argparse.Namespace, prefix: str, filename: str) -> str | None:
    """Where a planned trajectory is saved: --out, else a fresh temporary file when it is about to
    run on a robot (the loop process reads it from disk; `run_planned` removes it after the run),
    else nowhere."""
    if args.out is None and (args.dry_run or args.port):
        return os.path.join(tempfile.mkdtemp(prefix=prefix), filename)
    return args.out


def add_predict_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--predict", type=int, metavar="N",
                   help="before anything moves, roll the motion out N times in physics (MuJoCo) on robots varied "
                        "within stated bounds (servo stiffness, masses, floor friction, latency), on every CPU "
                        "core, and say how many stay up and the worst margin; a motion that falls in more than "
                        "--predict-falls of them does not run (robots that can fall; pip install mujoco)")
    s.add_argument("--predict-falls", type=float, metavar="PCT",
                   help="with --predict: the share of rollouts that may fall (default 10 %%)")


def check_predict_options(args: argparse.Namespace, model) -> None:
    """--predict's arguments, and that it applies, before any planning."""
    from hil.inputs import number

    if getattr(args, "predict", None) is None:
        if getattr(args, "predict_falls", None) is not None:
            raise InputError("--predict-falls: only with --predict N")
        return
    from hil.physics import predict

    number(args.predict, "--predict", 1, 10000, "rollouts")
    predict.max_fall_share(args.predict_falls)
    predict.check_can_fall(model)
    import importlib.util

    if importlib.util.find_spec("mujoco") is None:
        raise InputError("--predict needs MuJoCo: pip install mujoco (or pip install -e '.[physics]')")


PREDICT_TRIES = 3        # with --predict: the plan, then up to two slower ones if it falls
PREDICT_SLOWER = 0.75    # each try's pace, of the try before


def predicted(args: argparse.Namespace, model, servo, rate_hz: float, what: str, plan_at):
    """The plan to run: `plan_at(pace)` → (plan, t, q, planned travel or None) at a share of its
    written pace. With --predict N the plan's commands are rolled out in physics
    (hil.physics.predict) and said; if more fall than --predict-falls allows, it is planned again
    slower (said) and rolled out again, up to PREDICT_TRIES plans in all — never with --strict —
    and refused (an InputError) if the slowest falls too. Returns (plan, pace)."""
    pace = 1.0
    plan, t, q, travel = plan_at(pace)
    if getattr(args, "predict", None) is None:
        return plan, pace
    from hil.physics import predict

    limit = predict.max_fall_share(args.predict_falls)
    paces = []
    while True:
        paces.append(pace)
        pred = _rolled_out(args, model, t, q, servo, rate_hz, what, travel)
        if pred.fall_share <= limit + 1e-12 or getattr(args, "strict", False) or len(paces) == PREDICT_TRIES:
            slower = [f"{100 * p:.0f} %" for p in paces[1:]]
            predict.refuse_if_it_falls(pred, limit, what, ("also at " + " and ".join(slower) + " of its pace")
                                       if slower else "")
            return plan, pace
        pace *= PREDICT_SLOWER
        print(f"predict: {what} falls in {pred.fell} of {len(pred.rollouts)} rollouts (more than the "
              f"{100 * limit:g} % allowed): planned again at {100 * pace:.0f} % of its pace", flush=True)
        plan, t, q, travel = plan_at(pace)


def _rolled_out(args: argparse.Namespace, model, t, q, servo, rate_hz: float, what: str, planned_travel):
    """The motion's commands rolled out --predict times in physics, said."""
    import time

    from hil.physics import predict

    t0, last = time.monotonic(), [time.monotonic()]

    def progress(done: int, n: int) -> None:
        if time.monotonic() - last[0] >= PLANNING_TICK_S and done < n:
            last[0] = time.monotonic()
            print(f"predict: {done} of {n} rollouts done, {last[0] - t0:.0f} s so far …", flush=True)
    print(f"predict: {what} rolled out {args.predict} times in physics on {min(os.cpu_count() or 1, args.predict)} "
          "process(es) …", flush=True)
    pred = predict.predict(model, t, q, int(args.predict), servo=servo, rate_hz=rate_hz,
                           planned_travel_m=planned_travel, progress=progress)
    print(pred.summary(), flush=True)
    return pred


PLANNING_TICK_S = 5.0   # a plan that takes longer says it is still at work this often


class planning:
    """`with planning("wave.toml"):` — says a plan has begun and, every PLANNING_TICK_S while it
    runs, that it still does, for how long and what it is at (hil.motion.progress: the stage and
    how far through it): no silent minute before a long motion."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self):
        import threading
        import time

        from hil.motion.progress import listening

        self._t0 = time.monotonic()
        self._done = threading.Event()
        self._listening = listening()
        progress = self._listening.__enter__()   # the planners' reports, read by the ticking thread
        print(f"planning {self.what} …", flush=True)

        def tick() -> None:
            while not self._done.wait(PLANNING_TICK_S):
                at = progress.text()
                print(f"planning {self.what}: {time.monotonic() - self._t0:.0f} s so far"
                      + (f", {at}" if at else "") + " …", flush=True)
        self._thread = threading.Thread(target=tick, name="hil-planning", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self._listening.__exit__(*exc)


# commands that may compile kernels on a machine's first run (a minute of silence otherwise)
COMPILING_COMMANDS = {"run", "path", "walk", "play", "teleop", "replay", "calibrate", "fk"}
# commands that run the real-time loop when given a port or --dry-run
LOOP_COMMANDS = {"run", "path", "walk", "play", "replay"}
# commands that start a loop or find one in the runtime folder: a folder they cannot use is said first,
# not after a minute of planning
RUNTIME_COMMANDS = {"run", "ctl", "twin", "path", "walk", "play", "teleop", "replay", "calibrate", "rt-check"}


# errors of a write that found no room for it
OUT_OF_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def run_command(command: str, func, args: argparse.Namespace) -> int:
    """Run one command's `run(args)` as every `hil` command runs: its runtime folder checked and
    its kernels compiled (said) first; an expected error one line naming the command, never a
    traceback; Ctrl-C 130; a reader gone away (`| head`) quiet."""
    import sys

    from hil.errors import EXPECTED, message

    try:
        if hasattr(args, "watchdog_ms"):   # the option, else the environment's standing margin
            from hil.inputs import watchdog_ms_or_env

            args.watchdog_ms = watchdog_ms_or_env(args.watchdog_ms)
        if command in RUNTIME_COMMANDS:
            from hil.runtime.shared import runtime_dir

            runtime_dir()
        check = getattr(args, "check_before_loading", None)
        if check is not None:   # what needs no robot model is refused before the loop's start (a second of CPU)
            check(args)
        if command in COMPILING_COMMANDS:
            from hil.warmup import warm_if_cold

            warm_if_cold()
        if _runs_a_loop(command, args):   # its start overlaps the command's loading, checking and planning
            import importlib

            from hil.runtime import loop_process

            # the loop is imported before the fork: the command needs it (and Numba's start, most
            # of a second of CPU) anyway, and the loop's process then inherits both instead of
            # doing them again; nothing imported by then starts a thread
            importlib.import_module("hil.runtime.loop")
            loop_process.start_early()
        return int(func(args) or 0)
    except EXPECTED as e:
        # their message names what and where, a traceback would only bury it
        print(f"hil {command}: error: {message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hil {command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`hil robots | head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:
        if e.errno not in OUT_OF_ROOM:
            raise
        # a write no command names itself failed for want of room: its output (a full disk under a
        # redirect) or a file it writes; said once, instead of a traceback
        where = f"{e.filename}" if e.filename else "its output"
        print(f"hil {command}: error: cannot write {where}: {e.strerror}; free some space on that disk or write "
              "elsewhere", file=sys.stderr)
        return 1
    finally:
        if "hil.runtime.loop_process" in sys.modules:   # a loop process started early and never given a run
            sys.modules["hil.runtime.loop_process"].cancel_early()


def _runs_a_loop(command: str, args: argparse.Namespace) -> bool:
    """Whether the command, given these arguments, will run the real-time loop (a board's port, or
    the emulator: `hil walk` without either only plans)."""
    if command == "teleop":
        return True
    return command in LOOP_COMMANDS and bool(getattr(args, "dry_run", False) or getattr(args, "port", None))
