"""`hil twin`: attach to a running loop, or render one frame to a PNG (`--screenshot`)."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attach", "--loop", metavar="NAME", dest="attach",
                   help="loop to attach to (`hil ctl list`; default: the one running, refused when several run)")
    p.add_argument("--robot", help="robot model (needed with --screenshot; else taken from the loop)")
    p.add_argument("--screenshot", metavar="FILE.png",
                   help="render one frame to a PNG and exit: of --pose-deg/--ghost-deg (no loop needed), or with "
                        "--attach NAME of that loop's live state")
    p.add_argument("--pose-deg", type=float, nargs="+", metavar="DEG", help="measured pose for --screenshot")
    p.add_argument("--ghost-deg", type=float, nargs="+", metavar="DEG", help="commanded (ghost) pose for --screenshot")
    p.add_argument("--path", metavar="TRAJ.npz", help="show a planned path (p_prog) and its workpiece")
    p.add_argument("--duration", type=float, help="close after this many seconds")
    p.add_argument("--max-fps", type=float, default=30.0, help="frame-rate cap (keeps a core free for the loop)")


def main(args: argparse.Namespace) -> int:
    import os

    from hil.errors import HilError, InputError
    from hil.inputs import number, writable_file
    from hil.runtime.supervisor import display_available

    # keep the loop's core free: the loop pins itself to the last CPU; llvmpipe would otherwise
    # start a render thread per core and compete with it
    os.environ.setdefault("LP_NUM_THREADS", "1")
    if not args.screenshot:
        try:
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) > 1:
                os.sched_setaffinity(0, set(cpus[:-1]))
        except (AttributeError, OSError):
            pass
    if args.screenshot:
        writable_file(args.screenshot, "--screenshot")
    if args.duration is not None:
        number(args.duration, "--duration", 0, 1e7, "s")
    number(args.max_fps, "--max-fps", 1, 1000)
    if not display_available():
        raise HilError("no display: the twin needs an X display. Set DISPLAY, run under `xvfb-run -a hil twin ...`, "
                       "or use `hil run --headless` for a status line instead")
    from hil import robots

    client = None
    live_shot = bool(args.screenshot and args.attach)
    if live_shot and (args.pose_deg or args.ghost_deg):
        raise InputError("--screenshot --attach shows the loop's own poses; leave out --pose-deg/--ghost-deg")
    if args.screenshot and not live_shot:
        if not args.robot:
            raise InputError("--screenshot needs --robot (or --attach NAME for a running loop's state)")
        model = robots.load(args.robot)
    else:
        from hil.runtime.shared import LoopClient
        client = LoopClient(args.attach)
        model = robots.load(args.robot or client.info().get("robot") or client.name.split("_")[1])
        if model.n != client.n:
            raise InputError(f"the loop {client.name} has {client.n} joints, {model.name} has {model.n}")
    path = workpiece = None
    if args.path:
        with np.load(args.path) as f:
            path = f["p_prog"] if "p_prog" in f else None
            if "workpiece_T" in f and "workpiece_half" in f:
                workpiece = (f["workpiece_T"], f["workpiece_half"])
    from twin.app import TwinApp

    app = TwinApp(model, client, path, workpiece, title=f"hil twin — {model.name}")
    app.build()
    if live_shot:
        for _ in range(3):   # the loop's latest state, drawn
            app.poll_loop()
            app.update_scene()
        app.screenshot(args.screenshot)
        app.close()
        client.close()
        print(f"wrote {args.screenshot}")
        return 0
    if args.screenshot:
        def pose(vals, what):
            if vals is None:
                return model.home
            if len(vals) != model.n:
                raise InputError(f"{what}: {model.name} has {model.n} joints, got {len(vals)} values")
            return np.radians(vals)
        app.set_pose(pose(args.pose_deg, "--pose-deg"), pose(args.ghost_deg, "--ghost-deg") if args.ghost_deg
                     else None)
        app.screenshot(args.screenshot)
        app.close()
        if not os.path.isfile(args.screenshot) or os.path.getsize(args.screenshot) == 0:
            raise HilError(f"the screenshot {args.screenshot} was not written (DearPyGui reported no error)")
        print(f"wrote {args.screenshot}")
        return 0
    try:
        app.run(max_fps=args.max_fps, duration_s=args.duration)
    finally:
        app.close()
        client.close()
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m twin.command")
    add_arguments(ap)
    sys.exit(main(ap.parse_args()))
