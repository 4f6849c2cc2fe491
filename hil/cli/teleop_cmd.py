"""`hil teleop`: a leader arm moves the follower, through hil's loop and its safety layers."""

from __future__ import annotations

from hil.cli.common import ROBOT_HELP, add_command
from hil.cli.running import twin_beside_a_run


def register(sub) -> None:
    s = add_command(sub, "teleop", "leader–follower teleoperation: move the leader arm, the follower follows",
                    "The leader is read with its torque off, as fast as its bus goes; the follower follows it "
                    "through the real-time loop with every safety layer of a run: its ranges (a leader pose past "
                    "them is clamped and said, never sent), speed and acceleration limits, self-collision, the ramp "
                    "in from where it stands, the watchdogs. A leader that can no longer be read (its cable out, "
                    "its servos silent) stops the follower where it is and ends the run, saying why. --record adds "
                    "the run to a LeRobot dataset (v3.0) as an episode: observation.state what the follower's servos "
                    "read, action the goal asked of them (the leader's pose within the follower's ranges), in "
                    "LeRobot's units; `hil replay DIR --episode N` plays it back. The kit's shipped maps are used "
                    "unless given (`hil ports --probe` tells a leader from a follower).",
                    ["hil teleop --robot so101 --dry-run --headless --duration 20",
                     "hil teleop --robot so101 --leader /dev/ttyACM1 --follower /dev/ttyACM0",
                     "hil teleop --robot koch --leader /dev/ttyUSB1 --follower /dev/ttyUSB0 --record ~/datasets/koch_pick "
                     "--task 'pick up the cube'"])
    s.add_argument("--robot", required=True, help=ROBOT_HELP)
    s.add_argument("--leader", metavar="PORT", help="the leader arm's port")
    s.add_argument("--follower", metavar="PORT", help="the follower arm's port")
    s.add_argument("--dry-run", action="store_true", help="both arms emulated; the leader moved by a scripted hand "
                                                          "(--hand, default: each joint round its home pose)")
    s.add_argument("--hand", action="append", default=[], metavar="ID:A:B@T0-T1[*]",
                   help="with --dry-run: a hand turns the leader's servo ID to tick A, then B, from T0 to T1 s after "
                        "it is first read (* repeats); once per servo")
    s.add_argument("--leader-fault", action="append", default=[], metavar="SPEC",
                   help="with --dry-run: a fault of the emulated leader, as `hil run --fault` takes them for a bus "
                        "(disconnect@T: its cable pulled T s after start; silent:ID@T: one servo silent)")
    s.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="with --dry-run: a fault of the emulated follower (as `hil run --fault`)")
    s.add_argument("--bus", help="the arms' servo bus (default: the one the robot's kit ships a map for; "
                                 "`hil ports --probe` says which answers)")
    s.add_argument("--board-config", metavar="FILE", help="the follower's servo map (default: the kit's shipped one)")
    s.add_argument("--leader-config", metavar="FILE", help="the leader's servo map (default: the kit's shipped "
                                                           "leader, e.g. so101-leader-feetech)")
    s.add_argument("--record", metavar="DIR", help="add the run to this LeRobot dataset as an episode (a new or "
                                                   "empty folder starts one); a FILE.npy instead: hil's own "
                                                   "recording of every cycle, as `hil run --record`")
    s.add_argument("--task", default="", help="what the episode does, in words (LeRobot's task)")
    s.add_argument("--fps", type=int, default=30, help="the episode's frames per second")
    s.add_argument("--degrees", action="store_true", help="body joints in degrees (LeRobot's use_degrees), not "
                                                          "-100 … 100")
    s.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    s.add_argument("--rate", type=float, help="the follower's loop rate, Hz (default: the robot's, no faster than "
                                              "its bus)")
    s.add_argument("--headless", action="store_true", help="no twin window; print a live status line")
    s.add_argument("--watchdog-ms", type=float, metavar="MS", help="the follower's command watchdog (10 … 1000 ms)")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil.inputs import number
    from hil.runtime.teleop import TeleopRequest, run as teleop

    fps = int(number(args.fps, "--fps", 1, 1000, "fps"))
    return teleop(TeleopRequest(robot=args.robot, leader=args.leader, follower=args.follower, dry_run=args.dry_run,
                                bus=args.bus, board_config=args.board_config, leader_config=args.leader_config,
                                hands=tuple(args.hand), leader_faults=tuple(args.leader_fault),
                                faults=tuple(args.fault), record=args.record, task=args.task, fps=fps,
                                degrees=args.degrees, duration_s=args.duration, headless=args.headless,
                                rate_hz=args.rate, watchdog_ms=args.watchdog_ms), twin=twin_beside_a_run())
