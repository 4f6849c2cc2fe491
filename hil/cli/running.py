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
    from hil.runtime import supervisor

    return supervisor.run(supervisor.RunRequest(
        robot=robot, dry_run=args.dry_run, port=args.port, rate_hz=rate if rate is not None else args.rate,
        headless=args.headless, record=args.record, record_errors=args.on_record_error, stats_json=args.stats_json,
        motion=motion_path, enable=True,
        exit_when_done=True, path_file=path_file, bus=args.bus, board_config=args.board_config,
        emulator=args.emulator, physics=args.physics, compensate=not args.no_compensation, speed=speed,
        strict=args.strict, stabilise=not args.no_stabiliser, watchdog_ms=args.watchdog_ms,
        bring_in=args.bring_in, command=getattr(args, "command", None) or "run"), twin=twin_beside_a_run())
