"""`hil export` and `hil plot`: a recording in another tool's format, or as a figure."""

from __future__ import annotations

from hil.cli.common import add_command
from hil.errors import InputError
from hil.inputs import writable_file


def register(sub) -> None:
    s = add_command(sub, "export", "a recording as MCAP, for Foxglove (needs the mcap extra)",
                    "Joint states (every recorded cycle), frame transforms and the tool pose from the measured "
                    "positions, the run's events as log messages and the robot's URDF attached: open the file "
                    "in Foxglove (3D, Plot, Log panels).",
                    ["hil export run.npy --mcap run.mcap"])
    s.add_argument("file", metavar="FILE.npy", help="a recording from `hil run/play/walk --record`")
    s.add_argument("--mcap", required=True, metavar="OUT.mcap", help="the MCAP file to write")
    s.add_argument("--robot", help="the robot (default: the one the recording's .json names)")
    s.set_defaults(func=run_export)
    p = add_command(sub, "plot", "a recording as a PNG figure (needs the plot extra)",
                    "Per joint commanded against measured, the tracking error, safety flags and board faults "
                    "over time, the loop period's histogram, and for a humanoid the ZMP (computed from the "
                    "measured joints) with the soles on the ground. No display needed.",
                    ["hil plot run.npy", "hil plot walk.npy --out walk.png"])
    p.add_argument("file", metavar="FILE.npy", help="a recording from `hil run/play/walk --record`")
    p.add_argument("--out", metavar="OUT.png", help="the PNG to write (default: FILE.png)")
    p.add_argument("--robot", help="the robot (default: the one the recording's .json names)")
    p.set_defaults(func=run_plot)


def run_export(args) -> int:
    from hil.export.foxglove import write_mcap
    from hil.runtime.recorder import load_events, open_run

    if not args.mcap.endswith(".mcap"):
        raise InputError(f"--mcap {args.mcap}: the file name must end in .mcap")
    writable_file(args.mcap, "--mcap")
    data, meta, model = open_run(args.file, args.robot)
    count = write_mcap(args.mcap, data, meta, load_events(args.file), model)
    print(f"wrote {args.mcap}: {len(data)} cycles, {count} messages (joint states, transforms, tool pose, events) "
          "and the URDF")
    return 0


def _shadow_of(path: str):
    """The shadow twin's rows beside a recording (hil run --shadow --record), or None."""
    import numpy as np   # lazy: as the module's other imports

    try:
        return np.load(path + ".shadow.npy", allow_pickle=False)
    except (OSError, ValueError):
        return None


def run_plot(args) -> int:
    from hil.export.plots import plot_recording
    from hil.runtime.recorder import open_run

    out = args.out or (args.file[:-4] if args.file.endswith(".npy") else args.file) + ".png"
    if not out.endswith(".png"):
        raise InputError(f"--out {out}: the figure is a PNG; name it .png")
    writable_file(out, "--out")
    data, meta, model = open_run(args.file, args.robot)
    shadow = _shadow_of(args.file)
    panels = plot_recording(out, data, meta, model, shadow)
    print(f"wrote {out}: {', '.join(panels)}")
    return 0
