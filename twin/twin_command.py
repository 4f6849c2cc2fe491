"""`hil twin`: attach to a running loop, or render one frame to a PNG (`--screenshot`).

The library is imported inside the functions (lazily): `hil --help` imports this module to build
its parser, and the runtime with its kernels would add a second to every command.
"""

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
    p.add_argument("--frames", action="store_true", help="show every link's frame (also a checkbox in the panel)")
    p.add_argument("--names", action="store_true", help="show every joint's name in the view (also a checkbox)")
    p.add_argument("--shapes", action="store_true",
                   help="draw the shapes the collision and workspace checks use over the robot, in cyan (also a "
                        "checkbox): where a kit's own meshes and hil's checks disagree")
    p.add_argument("--view", choices=("front", "side", "top", "iso"),
                   help="the twin's camera: front (from +x, y to the right), side (from −y, x to the right), top (down z) — "
                        "drawn as orthographic views — or iso; the robot fitted in it (keys: F fits again, R resets)")
    p.add_argument("--frame-times", metavar="FILE.json", help="write each frame's time (s) at exit (benchmarks)")
    p.add_argument("--duration", type=float, help="close after this many seconds")
    p.add_argument("--max-fps", type=float, default=60.0,
                   help="frame-rate cap (default 60; the twin keeps off the loop's CPU whatever the rate; a lower "
                        "cap leaves more of the others to your programs)")
    p.add_argument("--zenoh", nargs="?", const="", metavar="LOCATOR",
                   help="a robot on another machine, through its `hil run --zenoh` bridge (pip install -e "
                        "'.[zenoh]'): found by scouting, or at LOCATOR (e.g. tcp/192.168.1.20:7447)")
    p.add_argument("--zenoh-config", metavar="FILE", help="Zenoh's config file (JSON5) for --zenoh")
    p.add_argument("--board", help="with --zenoh: the board id of the robot, when several answer")


def main(args: argparse.Namespace) -> int:
    from hil.display import display_available
    from hil.errors import HilError

    path, workpiece = _checked(args)
    _off_the_loops_cpu(args)
    if not display_available(wait_s=3.0):
        raise HilError("no display: the twin needs an X display. Set DISPLAY, run under `xvfb-run -a hil twin ...`, "
                       "or use `hil run --headless` for a status line instead")
    if args.zenoh is not None:
        from hil.remote.zenoh_client import ZenohClient

        client = ZenohClient(args.zenoh or None, args.zenoh_config, args.board)
        return _show_remote(_remote_model(client, args.robot), client, args)
    live_shot = bool(args.screenshot and args.attach)
    model, client = _model_and_loop(args, live_shot)
    app = _opened(model, client, args, f"hil twin — {model.name}", path, workpiece)
    if live_shot:
        return _live_screenshot(app, client, args.screenshot)
    if args.screenshot:
        return _screenshot(app, model, args)
    try:
        app.run(max_fps=args.max_fps, duration_s=args.duration)
    finally:
        if args.frame_times:
            import json

            with open(args.frame_times, "w") as f:
                json.dump(getattr(app, "frame_times", []), f)
        app.close()
        client.close()
    return 0


def _checked(args: argparse.Namespace):
    """Every option checked before a window opens or a loop is attached; the --path file read:
    (its planned points, its workpiece) or (None, None)."""
    from hil.errors import InputError
    from hil.inputs import number, writable_file

    if args.screenshot:
        writable_file(args.screenshot, "--screenshot")
    if args.frame_times:
        writable_file(args.frame_times, "--frame-times")
    if args.duration is not None:
        number(args.duration, "--duration", 0, 1e7, "s")
    number(args.max_fps, "--max-fps", 1, 1000, "frames/s")
    if args.zenoh is not None and (args.attach or args.pose_deg or args.ghost_deg):
        raise InputError("--zenoh shows a remote robot's own state: not with --attach, --pose-deg or --ghost-deg")
    if args.screenshot and args.attach and (args.pose_deg or args.ghost_deg):
        raise InputError("--screenshot --attach shows the loop's own poses; leave out --pose-deg/--ghost-deg")
    if args.screenshot and not args.attach and args.zenoh is None and not args.robot:
        raise InputError("--screenshot needs --robot (or --attach NAME for a running loop's state)")
    return _planned_path(args.path)


def _planned_path(path: str | None):
    """(the program's points (N, 3), (the workpiece's pose, its half sizes) or None) of a trajectory
    `hil path --out` wrote; (None, None) without one."""
    if not path:
        return None, None
    from hil.errors import InputError
    from hil.inputs import load_npz

    f = load_npz(path, "--path")
    points = f.get("p_prog")
    if points is None or points.ndim != 2 or points.shape[1] != 3 or not np.isfinite(points).all():
        raise InputError(f"--path {path}: holds no planned path (p_prog: N × 3 finite points, as `hil path --out` "
                         "writes)")
    T, half = f.get("workpiece_T"), f.get("workpiece_half")
    if T is None or half is None:
        return points, None
    if T.shape != (4, 4) or half.shape != (3,) or not (np.isfinite(T).all() and np.isfinite(half).all()):
        raise InputError(f"--path {path}: its workpiece is not a 4 × 4 pose and 3 half sizes of finite numbers")
    return points, (T, half)


def _off_the_loops_cpu(args: argparse.Namespace) -> None:
    """Keep the loop's core free: the loop pins itself to the last CPU, and llvmpipe would otherwise
    start a render thread per core and compete with it (a screenshot alone leaves it be)."""
    import os

    os.environ.setdefault("LP_NUM_THREADS", "1")
    if args.screenshot:
        return
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            os.sched_setaffinity(0, set(cpus[:-1]))
    except (AttributeError, OSError):
        pass


def _model_and_loop(args: argparse.Namespace, live_shot: bool):
    """The robot's model, and the running loop's client (None for a screenshot of given poses)."""
    from hil import robots
    from hil.errors import InputError

    if args.screenshot and not live_shot:
        return robots.load(args.robot), None
    from hil.runtime.shared import LoopClient

    client = LoopClient(args.attach)
    model = robots.load(args.robot or _loop_robot(client))
    if model.n != client.n:
        raise InputError(f"the loop {client.name} has {client.n} joints, {model.name} has {model.n}")
    return model, client


def _opened(model, client, args: argparse.Namespace, title: str, path=None, workpiece=None):
    """The twin's window built, with the overlays the options ask for."""
    from twin.app import TwinApp

    app = TwinApp(model, client, path, workpiece, title=title, view=getattr(args, "view", None))
    app.build()
    app.set_frames(getattr(args, "frames", False))
    app.set_names(getattr(args, "names", False))
    app.set_shapes(getattr(args, "shapes", False))
    return app


def _live_screenshot(app, client, png: str) -> int:
    """The loop's latest state drawn to `png`, and what the panel shows beside it (`png`.json)."""
    import json

    for _ in range(3):
        app.poll_loop()
        app.update_scene()
    app.screenshot(png)
    with open(png + ".json", "w") as f:
        json.dump(app.panel_values(), f, indent=1)
    app.close()
    client.close()
    print(f"wrote {png} (and what its panel shows: {png}.json)")
    return 0


def _screenshot(app, model, args: argparse.Namespace) -> int:
    """--pose-deg (measured) and --ghost-deg (commanded) drawn to the PNG; home where not given."""
    import os

    from hil.errors import HilError, InputError

    def pose(vals, what):
        if vals is None:
            return model.home
        if len(vals) != model.n:
            raise InputError(f"{what}: {model.name} has {model.n} joints, got {len(vals)} values")
        return np.radians(vals)
    app.set_pose(pose(args.pose_deg, "--pose-deg"), pose(args.ghost_deg, "--ghost-deg") if args.ghost_deg else None)
    if args.view:
        app.fit()     # the view fitted to this pose
    app.screenshot(args.screenshot)
    app.close()
    if not os.path.isfile(args.screenshot) or os.path.getsize(args.screenshot) == 0:
        raise HilError(f"the screenshot {args.screenshot} was not written (DearPyGui reported no error)")
    print(f"wrote {args.screenshot}")
    return 0


def _loop_robot(client, wait_s: float = 15.0) -> str:
    """The robot a loop runs (its model file, for a robot loaded from one): the loop says so once it
    has connected, which may take a while (a bus emulator starting, a URDF loading)."""
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        robot = client.info().get("robot")
        if robot:
            return robot
        time.sleep(0.1)
    return client.name.split("_")[1]


def _remote_model(client, robot: str | None):
    """The remote robot's model: the same one loaded here when this machine has it (its name or file),
    else built from the URDF the bridge sends."""
    import os
    import tempfile

    from hil import robots
    from hil.errors import HilError
    from hil.robots import urdf

    if robot:
        return robots.load(robot)
    desc = client.model_description()
    spec = str(desc.get("spec", ""))
    if spec in robots.available() or os.path.isfile(spec):
        try:
            return robots.load(spec)
        except HilError:
            pass
    folder = tempfile.mkdtemp(prefix="hil-remote-")
    path = os.path.join(folder, f"{desc.get('name', 'robot')}.urdf")
    with open(path, "w", encoding="utf-8") as f:
        f.write(str(desc.get("urdf", "")))
    return urdf.build(path)


def _show_remote(model, client, args) -> int:
    from hil.errors import InputError

    if model.n != client.n:
        raise InputError(f"the remote robot has {client.n} joints, {model.name} has {model.n}")
    import time

    app = _opened(model, client, args, f"hil twin — {model.name} ({client.name})")
    t0 = time.monotonic()
    try:
        if args.screenshot:
            while client.received == 0 and time.monotonic() - t0 < 10:
                time.sleep(0.05)
            for _ in range(3):
                app.poll_loop()
                app.update_scene()
            app.screenshot(args.screenshot)
            print(f"wrote {args.screenshot}")
        else:
            app.run(max_fps=args.max_fps, duration_s=args.duration)
    finally:
        elapsed = time.monotonic() - client.started
        print(f"twin: {client.received} states from {client.board} in {elapsed:.1f} s "
              f"({client.received / max(elapsed, 1e-9):.0f} per second)", flush=True)
        app.close()
        client.close()
    return 0

if __name__ == "__main__":
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m twin.twin_command")
    add_arguments(ap)
    sys.exit(main(ap.parse_args()))
