"""`hil export` and `hil plot`: a recording in another tool's format, or as a figure."""

from __future__ import annotations

from hil.cli.common import add_command
from hil.errors import InputError
from hil.inputs import writable_file


def register(sub) -> None:
    s = add_command(sub, "export", "a recording as MCAP (Foxglove) or as an episode of a LeRobot dataset",
                    "--mcap: a ROS 2 bag (CDR, the schemas ROS 2's MCAP storage writes): sensor_msgs/JointState "
                    "measured, commanded and target every recorded cycle, tf2_msgs/TFMessage for every link from "
                    "the measured positions, the tool pose, the URDF on /robot_description, the board's state as "
                    "diagnostics and the run's events on /rosout — for ros2 bag play, RViz and Foxglove's 3D panel "
                    "(--schemas foxglove: Foxglove's own JSON schemas instead); needs the mcap extra. --lerobot: the run as one "
                    "more episode of a LeRobot dataset (v3.0; made when the folder is new or empty): "
                    "observation.state what the servos read, action the target the loop was asked to follow (the "
                    "motion's, within the ranges), from the motion's start to its end, at --fps in "
                    "LeRobot's units for the run's servo map (body joints -100 … 100 over their range, or degrees "
                    "with --degrees; the gripper 0 … 100 %); needs the lerobot extra (pyarrow).",
                    ["hil export run.npy --mcap run.mcap", "hil export run.npy --lerobot ~/datasets/so101_pick "
                     "--task 'pick the cube'"])
    out = s.add_mutually_exclusive_group(required=True)
    out.add_argument("--mcap", metavar="OUT.mcap", help="the MCAP file to write")
    out.add_argument("--lerobot", metavar="DIR", help="the LeRobot dataset to add the run to as an episode")
    s.add_argument("file", metavar="FILE.npy", help="a recording from `hil run/play/walk/teleop --record`")
    s.add_argument("--robot", help="the robot (default: the one the recording's .json names)")
    s.add_argument("--schemas", choices=("ros2", "foxglove"), default="ros2",
                   help="--mcap: ROS 2 messages in CDR (default), or Foxglove's JSON schemas")
    s.add_argument("--fps", type=int, default=30, help="--lerobot: frames per second of the episode")
    s.add_argument("--task", default="", help="--lerobot: what the episode does, in words (LeRobot's task)")
    s.add_argument("--degrees", action="store_true", help="--lerobot: body joints in degrees (LeRobot's "
                                                          "use_degrees), not -100 … 100")
    s.add_argument("--bus", help="--lerobot: the servo bus (default: the one the recording names)")
    s.add_argument("--board-config", metavar="FILE", help="--lerobot: the servo map whose calibration gives "
                                                          "LeRobot's units (default: the one the recording names)")
    s.set_defaults(func=run_export)
    p = add_command(sub, "plot", "a recording as a PNG figure (needs the plot extra)",
                    "Per joint commanded against measured, the tracking error, safety flags and board faults "
                    "over time, the loop period's histogram, and for a humanoid the ZMP of the planned motion "
                    "(computed from the planned joints the recording keeps: measured ones carry the encoders' "
                    "steps, which a second derivative turns into metres) with the soles on the ground. No display "
                    "needed.",
                    ["hil plot run.npy", "hil plot walk.npy --out walk.png"])
    p.add_argument("file", metavar="FILE.npy", help="a recording from `hil run/play/walk --record`")
    p.add_argument("--out", metavar="OUT.png", help="the PNG to write (default: FILE.png)")
    p.add_argument("--robot", help="the robot (default: the one the recording's .json names)")
    p.set_defaults(func=run_plot)


def run_export(args) -> int:
    from hil.runtime.recorder import load_events, open_run

    if args.lerobot:
        return _export_lerobot(args)
    from hil.export.foxglove import write_mcap
    from hil.export.ros2 import write_ros2_mcap

    if not args.mcap.endswith(".mcap"):
        raise InputError(f"--mcap {args.mcap}: the file name must end in .mcap")
    writable_file(args.mcap, "--mcap")
    data, meta, model = open_run(args.file, args.robot)
    write = write_ros2_mcap if args.schemas == "ros2" else write_mcap
    count = write(args.mcap, data, meta, load_events(args.file), model)
    kind = "a ROS 2 bag" if args.schemas == "ros2" else "Foxglove's schemas"
    print(f"wrote {args.mcap} ({kind}): {len(data)} cycles, {count} messages (joint states, transforms, tool pose, "
          "events) and the URDF")
    return 0


def _export_lerobot(args) -> int:
    from hil import board_config
    from hil.inputs import number
    from hil.lerobot.dataset import append_episode, episode_from_samples
    from hil.lerobot.units import LeRobotUnits
    from hil.runtime.recorder import motion_rows, open_run

    fps = int(number(args.fps, "--fps", 1, 1000, "fps"))
    data, meta, model = open_run(args.file, args.robot)
    data = motion_rows(data, args.file)
    bus = args.bus or meta.get("bus")
    path = args.board_config or (meta.get("board_config") if not args.bus or args.bus == meta.get("bus") else None)
    if bus is None and path is None:
        raise InputError(f"{args.file}: a run on hil's own board, not a servo bus LeRobot drives; give --bus "
                         "(and --board-config) for the servo map whose calibration sets LeRobot's units")
    config = board_config.resolve(model, bus, path)
    units = LeRobotUnits(config, degrees=args.degrees)
    episode = episode_from_samples(data["t"], data["q_meas"], data["q_target"], units, fps, args.task,
                                   f"{model.name}_{config.role}")
    index = append_episode(args.lerobot, episode)
    print(f"wrote episode {index} to {args.lerobot}: {len(episode.action)} frames at {fps} fps "
          f"({', '.join(units.names)}; servo map {config.source})")
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
