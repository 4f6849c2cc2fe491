"""What `hil teleop` is asked: `TeleopRequest`, its options declared once (hil.options) for its
parser, its checks and the run it starts; light to import, as the command line builds its parser
from it before it knows which command runs. Units SI."""

from __future__ import annotations

import os
from dataclasses import dataclass

from firmware_protocol.messages import CMD_TIMEOUT_MS_MAX, CMD_TIMEOUT_MS_MIN
from hil.errors import InputError
from hil.options import LOOP_RATE_RANGE_HZ, check_options, option

_RATES = f"{LOOP_RATE_RANGE_HZ[0]:g} … {LOOP_RATE_RANGE_HZ[1]:g}"


@dataclass(frozen=True)
class TeleopRequest:
    """What `hil teleop` is asked: its options, declared once (hil.options) for its parser, its checks
    and the run it starts. Units SI."""

    robot: str
    leader: str | None = option(None, "--leader", "the leader arm's port", metavar="PORT")
    follower: str | None = option(None, "--follower", "the follower arm's port", metavar="PORT")
    dry_run: bool = option(False, "--dry-run", "both arms emulated; the leader moved by a scripted hand (--hand, "
                                               "default: each joint round its home pose)")
    hands: tuple[str, ...] = option(
        (), "--hand", "with --dry-run: a hand turns the leader's servo ID to tick A, then B, from T0 to T1 s after it "
                      "is first read (* repeats); once per servo", metavar="ID:A:B@T0-T1[*]", repeated=True)
    leader_faults: tuple[str, ...] = option(
        (), "--leader-fault", "with --dry-run: a fault of the emulated leader, as `hil run --fault` takes them for a "
                              "bus (disconnect@T: its cable pulled T s after start; silent:ID@T: one servo silent)",
        metavar="SPEC", repeated=True)
    faults: tuple[str, ...] = option((), "--fault", "with --dry-run: a fault of the emulated follower (as `hil run "
                                                    "--fault`)", metavar="SPEC", repeated=True)
    bus: str | None = option(None, "--bus", "the arms' servo bus (default: the one the robot's kit ships a map for; "
                                            "`hil ports --probe` says which answers)")
    board_config: str | None = option(None, "--board-config", "the follower's servo map (default: the kit's shipped "
                                                              "one)", metavar="FILE")
    leader_config: str | None = option(None, "--leader-config", "the leader's servo map (default: the kit's shipped "
                                                                "leader, e.g. so101-leader-feetech)", metavar="FILE")
    record: str | None = option(
        None, "--record", "add the run to this LeRobot dataset as an episode (a new or empty folder starts one); a "
                          "FILE.npy instead: hil's own recording of every cycle, as `hil run --record`", metavar="DIR")
    task: str = option("", "--task", "what the episode does, in words (LeRobot's task)", quote_default=False)
    fps: int = option(30, "--fps", "the episode's frames per second", unit="fps", lo=1, hi=1000)
    degrees: bool = option(False, "--degrees", "body joints in degrees (LeRobot's use_degrees), not -100 … 100")
    duration_s: float | None = option(None, "--duration", "stop after this many seconds (default: until Ctrl-C)",
                                      unit="s", lo=0.001, hi=1e7)
    headless: bool = option(False, "--headless", "no twin window; print a live status line")
    rate_hz: float | None = option(None, "--rate", f"the follower's loop rate, {_RATES} Hz (default: the robot's, no "
                                                   "faster than its bus)", unit="Hz", lo=LOOP_RATE_RANGE_HZ[0], hi=LOOP_RATE_RANGE_HZ[1])
    watchdog_ms: float | None = option(
        None, "--watchdog-ms", f"the follower's command watchdog ({CMD_TIMEOUT_MS_MIN} … {CMD_TIMEOUT_MS_MAX} ms; "
                               "default: its bus config's; or the environment's HIL_WATCHDOG_MS)", unit="ms",
        metavar="MS", lo=CMD_TIMEOUT_MS_MIN, hi=CMD_TIMEOUT_MS_MAX)


def check_request(req: TeleopRequest) -> None:
    """What needs no robot model: each option against its declaration, the ports asked for, the
    emulated arms' hands and faults. The command checks this before its loop starts, the run again."""
    check_options(req)
    if req.dry_run and (req.leader or req.follower):
        raise InputError("--dry-run emulates both arms: leave out --leader and --follower")
    if not req.dry_run:
        if not (req.leader and req.follower):
            raise InputError("hil teleop needs --leader PORT and --follower PORT (see `hil ports --probe`), or "
                             "--dry-run")
        if os.path.realpath(req.leader) == os.path.realpath(req.follower):
            raise InputError(f"--leader and --follower are the same port ({req.leader}): each arm has its own")
    if (req.hands or req.leader_faults or req.faults) and not req.dry_run:
        raise InputError("--hand, --leader-fault and --fault act on the emulated arms: use them with --dry-run")
    from hil import emulator_launch   # lazy: NumPy, only once the options have passed

    for h in req.hands:
        emulator_launch.check_hand(h)
    for f in req.leader_faults + req.faults:
        emulator_launch.check_bus_fault(f)
