"""`hil calibrate --method eye`: zeros for servos that cannot say where they stand (SSC-32, Maestro).

A PWM servo reports only the pulse it is sent, so no reading shows where its horn is. Instead the
servos are driven to the reference pose as the board config places it, the twin draws that pose,
and the user nudges each joint until the robot looks like the twin; the pulse a joint then holds
becomes its zero. The result is only as good as the eye, so it is printed and saved as an estimate.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import sys
import threading

import numpy as np

from calibration import procedures as P
from firmware_protocol import messages as M
from hil import board_config
from hil.errors import HilError, InputError

NUDGE_MAX_DEG = 30.0   # more than this from the config's zero: a horn on the wrong spline, or the wrong config
HOLD_HZ = 50.0         # commands while waiting for the user: the board's watchdog wants them
HELP = ("type `JOINT DEG` to nudge a joint (e.g. `l_knee +2.5`), `list` for the nudges so far, `done` to "
        "save, `quit` to leave without saving")


@dataclasses.dataclass
class Nudges:
    """Each joint's correction (rad) to the config's zero so far, and the limits a nudged joint must keep."""
    model: object
    q_ref: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        self.rad = np.zeros(self.model.n)

    def target(self) -> np.ndarray:
        """Where the servos are sent: the reference pose plus the nudges (in the config's radians)."""
        return self.q_ref + self.rad

    def add(self, joint: int, delta_rad: float) -> str | None:
        """Add a nudge; the reason it is refused (None: taken)."""
        name = self.model.joint_names[joint]
        total = self.rad[joint] + delta_rad
        if abs(total) > math.radians(NUDGE_MAX_DEG):
            return (f"{name}: {math.degrees(total):+.1f}° in all is more than {NUDGE_MAX_DEG:g}° from the config's "
                    "zero: check the servo horn's spline position (or the joint's servo id) first")
        q = self.q_ref[joint] + total
        if not self.lower[joint] <= q <= self.upper[joint]:
            return (f"{name}: {math.degrees(q):+.1f}° is outside its limits [{math.degrees(self.lower[joint]):+.1f}, "
                    f"{math.degrees(self.upper[joint]):+.1f}]° in the config: the reference pose cannot be reached "
                    "there (choose another --pose)")
        self.rad[joint] = total
        return None

    def check(self, first: np.ndarray | None) -> None:
        """Nudges given up front (--nudge-deg, rad) that would be refused: InputError before anything
        connects, naming each."""
        if first is None:
            return
        trial = Nudges(self.model, self.q_ref, self.lower, self.upper)
        refused = [r for i in np.flatnonzero(first) if (r := trial.add(int(i), float(first[i])))]
        if refused:
            raise InputError("--nudge-deg: " + "; ".join(refused))

    def lines(self) -> list[str]:
        return [f"  {name:<18} {math.degrees(r):+7.2f}°" for name, r in zip(self.model.joint_names, self.rad) if r]


def parse_command(model, line: str) -> tuple[str, int | None, float]:
    """A user's line: ("nudge", joint, rad), ("done"|"quit"|"list"|"help", None, 0); InputError says what is wrong."""
    words = line.replace("=", " ").split()
    if not words:
        return "help", None, 0.0
    if len(words) == 1 and words[0].lower() in ("done", "quit", "list", "help", "?"):
        return ("help" if words[0] == "?" else words[0].lower()), None, 0.0
    if len(words) != 2:
        raise InputError(f"{line.strip()!r}: {HELP}")
    try:
        joint = model.joint_index(words[0])
    except (KeyError, ValueError, IndexError):
        raise InputError(f"{words[0]!r} is not a joint of {model.name} ({', '.join(model.joint_names)})") from None
    try:
        deg = float(words[1])
    except ValueError:
        deg = math.nan
    if not math.isfinite(deg) or abs(deg) > NUDGE_MAX_DEG:
        raise InputError(f"{words[1]!r}: a nudge is a number of degrees within ±{NUDGE_MAX_DEG:g}")
    return "nudge", joint, math.radians(deg)


def zeroed_config(bus, nudges: Nudges, goal_range: tuple[int, int] | None):
    """The config whose zero puts each joint's reference angle at the pulse it holds now, and one
    line for each joint whose limits were narrowed to the pulses the controller can send (a limit
    past them would be a goal the servo never reaches)."""
    joints, narrowed = [], []
    for j, d in zip(bus.joints, nudges.rad):
        if not d:
            joints.append(j)
            continue
        new = board_config.remapped(j, zero_tick=j.zero_tick + j.direction * float(d) * j.ticks_per_rad)
        if goal_range is not None:
            # a hair inside, so that the ends round to pulses the controller sends
            ends = sorted((new.rad(goal_range[0] + 0.5), new.rad(goal_range[1] - 0.5)))
            lo, hi = max(new.min_rad, ends[0]), min(new.max_rad, ends[1])
            if (lo, hi) != (new.min_rad, new.max_rad):
                narrowed.append(f"{j.name}: limits narrowed from [{math.degrees(j.min_rad):+.1f}, "
                                f"{math.degrees(j.max_rad):+.1f}]° to [{math.degrees(lo):+.1f}, {math.degrees(hi):+.1f}]° "
                                f"(the controller's pulses end at {goal_range[0]} and {goal_range[1]} µs)")
                new = dataclasses.replace(new, min_rad=lo, max_rad=hi)
        joints.append(new)
    return dataclasses.replace(bus, joints=tuple(joints), shipped=False), narrowed


class Lines:
    """The user's lines, read on a thread of their own: the servos must be held (commands streamed)
    while the user thinks, and a pipe works as well as a terminal."""

    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in sys.stdin:
                self.q.put(line)
        except (OSError, ValueError):
            pass
        self.q.put(None)   # end of input

    def next(self, hold) -> str | None:
        """The next line (None at the end of input), calling `hold()` while none has come."""
        while True:
            try:
                return self.q.get(timeout=1.0 / HOLD_HZ)
            except queue.Empty:
                hold()


def _ramp(link, q_from: np.ndarray, q_to: np.ndarray, speed: float) -> None:
    """A PWM servo follows its pulse as fast as it can, so the pulse itself is ramped (each command
    checked by `hold`)."""
    P.stream_to(link, q_from, q_to, speed, HOLD_HZ, send=lambda q: hold(link, q))


def hold(link, q: np.ndarray) -> None:
    """Send q; HilError once the board has left ENABLED (its watchdog, a fault, an e-stop): the
    servos no longer follow, and a zero taken from where they were sent would be wrong."""
    s = link.latest()
    if s is not None and s.state != M.BoardState.ENABLED:
        raise HilError(f"the board left ENABLED (now {M.BoardState(s.state).name}: {M.fault_names(s.faults)}); "
                       "nothing was saved. Check power and cable (on a busy machine, give the board's watchdog "
                       "more time with --watchdog-ms), then calibrate again")
    link.send_positions(q)


def session(link, model, nudges: Nudges, first: np.ndarray | None, speed: float, interactive: bool, view) -> bool:
    """Drive the servos to the reference pose, take the nudges (`first`, then the user's lines);
    True when the user said `done` (or there was nothing to ask), False on `quit` or end of input."""
    q_now = P.read_samples(link, 5)[-1]          # the pulses the servos were enabled at
    view.show(nudges.q_ref, nudges.target(), "calibration by eye: make the robot look like the twin (solid)")
    _ramp(link, q_now, nudges.target(), speed)
    if first is not None:
        for i in np.flatnonzero(first):
            _nudge(link, model, nudges, int(i), float(first[i]), speed, view)
    if not interactive:
        return True
    lines = Lines()
    print(HELP)
    while True:
        line = lines.next(lambda: hold(link, nudges.target()))
        if line is None:
            print("input ended before `done`: nothing saved")
            return False
        try:
            what, joint, rad = parse_command(model, line)
        except InputError as e:
            print(f"error: {e}")
            continue
        if what in ("done", "quit"):
            return what == "done"
        if what == "list":
            print("\n".join(nudges.lines()) or "  no nudges yet")
        elif what == "help":
            print(HELP)
        else:
            _nudge(link, model, nudges, joint, rad, speed, view)


def _nudge(link, model, nudges: Nudges, joint: int, rad: float, speed: float, view) -> None:
    before = nudges.target()
    refused = nudges.add(joint, rad)
    if refused:
        print(f"error: {refused}")
        return
    _ramp(link, before, nudges.target(), speed)
    view.show(nudges.q_ref, nudges.target(), "")
    print(f"{model.joint_names[joint]}: {math.degrees(nudges.rad[joint]):+.2f}° from the config's zero")
