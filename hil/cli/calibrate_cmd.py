"""`hil calibrate`: joint offsets and directions, saved for the board (calibration/)."""

from __future__ import annotations

from hil.cli.common import add_command
from hil.cli.running import twin_beside_a_run


def register(sub) -> None:
    from calibration.calibrate_command import add_arguments

    s = add_command(sub, "calibrate", "calibrate joint offsets and directions, save the board's file",
                    "Methods: directions — jogs every joint ±5° and checks that it moves the commanded way and "
                    "amount (saves the signs); reference — with the robot held in a known pose, averages the "
                    "readings (saves the offsets); poses — fits the PUMA's offsets to tool points measured in "
                    "several poses (a CSV from a touch probe or tracker). The file is saved under "
                    "~/.config/hil/calibration/<board id>.toml and applied at every connect. On a servo bus "
                    "(--bus) the result is a board config (--out): directions and range are shown by hand with "
                    "the torque off; PWM servos, which cannot say where they stand, are calibrated by eye "
                    "(eye — driven to the reference pose, each joint nudged until the robot looks like the "
                    "twin; an estimate).",
                    ["hil calibrate --robot humanoid17 --port /dev/ttyACM0 --method directions",
                     "hil calibrate --robot humanoid17 --port /dev/ttyACM0 --method reference",
                     "hil calibrate --robot puma560 --method poses --poses probe.csv --out puma.toml"])
    add_arguments(s)
    s.set_defaults(func=run)


def run(args) -> int:
    from calibration.calibrate_command import main

    args.start_twin = twin_beside_a_run()
    return main(args)
