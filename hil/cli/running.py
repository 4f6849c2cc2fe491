"""Running a planned motion through the loop, with the twin beside it: what `hil play`, `walk`,
`path`, `replay` and `run` share above `hil.cli.common`'s parsing helpers."""

from __future__ import annotations

import argparse
import os
import shutil


def twin_beside_a_run():
    """The twin as a run (or a replay, or a calibration) starts it: `hil twin --attach NAME`, this
    CLI's own main called in a process of its own (hil.runtime.helpers)."""
    from hil.cli.twin_cmd import main
    from hil.runtime.helpers import twin_starter

    return twin_starter(main)


def run_planned(args: argparse.Namespace, robot: str, motion_path: str, rate: float | None = None,
                path_file: str | None = None, speed: float = 1.0) -> int:
    """Run a planned motion through the loop: enable, ramp in, play it, stop when it is done. A
    trajectory written to a temporary folder for the run (no --out) is removed after it."""
    temporary = getattr(args, "out", "") is None and motion_path and os.path.basename(
        os.path.dirname(motion_path)).startswith(("hil-walk-", "hil-path-", "hil-replay-"))
    try:
        return _run(args, robot, motion_path, rate, path_file, speed)
    finally:
        if temporary:
            shutil.rmtree(os.path.dirname(motion_path), ignore_errors=True)


def _run(args: argparse.Namespace, robot: str, motion_path: str, rate: float | None, path_file: str | None,
         speed: float) -> int:
    from hil.options import from_args
    from hil.runtime import supervisor
    from hil.runtime.run_request import RunRequest

    # the run's options as parsed; what the command decided (the trajectory it planned, its rate) over them
    given = dict(robot=robot, motion=motion_path, enable=True, exit_when_done=True, path_file=path_file, speed=speed,
                 command=getattr(args, "command", None) or "run")
    if rate is not None:
        given["rate_hz"] = rate
    return supervisor.run(from_args(RunRequest, args, **given), twin=twin_beside_a_run())
