"""`hil teleop`: a leader arm moves the follower, through hil's loop and its safety layers."""

from __future__ import annotations

from hil.cli.common import ROBOT_HELP, add_command
from hil.cli.running import twin_beside_a_run
from hil.options import add_options, declared, from_args
from hil.runtime.teleop_request import TeleopRequest, check_request


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
    add_options(s, TeleopRequest, [name for name in declared(TeleopRequest)])
    s.set_defaults(func=run, check_before_loading=lambda args: check_request(from_args(TeleopRequest, args)))


def run(args) -> int:
    from hil.runtime.teleop import run as teleop

    return teleop(from_args(TeleopRequest, args), twin=twin_beside_a_run())
