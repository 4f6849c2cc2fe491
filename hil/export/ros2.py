"""A recording as a ROS 2 bag in MCAP (`hil export RUN.npy --mcap F`): the messages ROS 2 tools take
as they are — `ros2 bag play`, RViz, Foxglove's 3D panel, `rosbags` — CDR-encoded, each channel's
schema the message's ros2msg definition with its dependencies, as ROS 2's MCAP storage writes them.

    /joint_states            sensor_msgs/msg/JointState   measured positions (rad), velocities, currents (A)
    /joint_states/commanded  sensor_msgs/msg/JointState   what the loop sent
    /joint_states/target     sensor_msgs/msg/JointState   what the motion asked for
    /tf                      tf2_msgs/msg/TFMessage       every link and frame in its parent's, measured
    /tool_pose               geometry_msgs/msg/PoseStamped the tool frame in the base frame
    /robot_description       std_msgs/msg/String          the robot's URDF (its links are the tf frames)
    /diagnostics             diagnostic_msgs/msg/DiagnosticArray  board state, faults, safety flags (on change)
    /rosout                  rcl_interfaces/msg/Log       the run's event lines

Times: the run's start (wall clock) plus the recording's loop time, in every header and as log time.
"""

from __future__ import annotations

import numpy as np

from firmware_protocol.messages import fault_names
from hil.errors import HilError
from hil.export.foxglove import FAULT_WORDS, _parents, _quaternion
from hil.kinematics.floating import inverse_transform
from hil.robots.urdf_export import to_urdf
from hil.runtime.shared import BOARD_STATES
from hil.safety import flag_names

SEP = "=" * 80
# the interface definitions (ROS 2's, the fields and constants only), each type fully qualified
DEFS = {
    "builtin_interfaces/Time": "int32 sec\nuint32 nanosec",
    "std_msgs/Header": "builtin_interfaces/Time stamp\nstring frame_id",
    "std_msgs/String": "string data",
    "sensor_msgs/JointState": "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\n"
                              "float64[] effort",
    "geometry_msgs/Vector3": "float64 x\nfloat64 y\nfloat64 z",
    "geometry_msgs/Point": "float64 x\nfloat64 y\nfloat64 z",
    "geometry_msgs/Quaternion": "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1",
    "geometry_msgs/Transform": "geometry_msgs/Vector3 translation\ngeometry_msgs/Quaternion rotation",
    "geometry_msgs/TransformStamped": "std_msgs/Header header\nstring child_frame_id\n"
                                      "geometry_msgs/Transform transform",
    "geometry_msgs/Pose": "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation",
    "geometry_msgs/PoseStamped": "std_msgs/Header header\ngeometry_msgs/Pose pose",
    "tf2_msgs/TFMessage": "geometry_msgs/TransformStamped[] transforms",
    "diagnostic_msgs/KeyValue": "string key\nstring value",
    "diagnostic_msgs/DiagnosticStatus": "byte OK=0\nbyte WARN=1\nbyte ERROR=2\nbyte STALE=3\nbyte level\nstring name\n"
                                        "string message\nstring hardware_id\ndiagnostic_msgs/KeyValue[] values",
    "diagnostic_msgs/DiagnosticArray": "std_msgs/Header header\ndiagnostic_msgs/DiagnosticStatus[] status",
    "rcl_interfaces/Log": "byte DEBUG=10\nbyte INFO=20\nbyte WARN=30\nbyte ERROR=40\nbyte FATAL=50\n"
                          "builtin_interfaces/Time stamp\nuint8 level\nstring name\nstring msg\nstring file\n"
                          "string function\nuint32 line",
}


def _deps(name: str, seen: list[str]) -> list[str]:
    """The types `name` uses, depth first, each once."""
    for line in DEFS[name].splitlines():
        ftype = line.split()[0].removesuffix("[]")
        if "/" in ftype and ftype not in seen:
            seen.append(ftype)
            _deps(ftype, seen)
    return seen


def msgdef(name: str) -> str:
    """`name`'s definition followed by each type it uses, as ROS 2 writes a channel's schema."""
    parts = [DEFS[name]] + [f"{SEP}\nMSG: {dep}\n{DEFS[dep]}" for dep in _deps(name, [])]
    return "\n".join(parts)


def _stamp(t_ns: int) -> dict:
    return {"sec": t_ns // 1_000_000_000, "nanosec": t_ns % 1_000_000_000}


def _joint_state(stamp: dict, names: list[str], q, qd=None, effort=None) -> dict:
    return {"header": {"stamp": stamp, "frame_id": ""}, "name": names, "position": [float(v) for v in q],
            "velocity": [] if qd is None else [float(v) for v in qd],
            "effort": [] if effort is None else [float(v) for v in effort]}


def _transform(T: np.ndarray) -> dict:
    p = T[:3, 3]
    return {"translation": {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])}, "rotation": _quaternion(T[:3, :3])}


def _status(row, stamp: dict) -> dict:
    state = BOARD_STATES.get(int(row["board_state"]), "?")
    faults, flags = int(row["faults"]), int(row["safety_flags"])
    level = 2 if faults or state in ("FAULT", "ESTOP") else 1 if flags else 0
    values = [{"key": "board_state", "value": state}, {"key": "faults", "value": fault_names(faults)},
              {"key": "safety", "value": ", ".join(flag_names(flags)) or "ok"}]
    return {"header": {"stamp": stamp, "frame_id": ""}, "status": [
        {"level": level, "name": "hil board", "message": state, "hardware_id": "", "values": values}]}


def write_ros2_mcap(path: str, data: np.ndarray, meta: dict, events: list[tuple[float, str]], model) -> int:
    """Write the recording to `path` as a ROS 2 bag (MCAP); returns the number of messages."""
    try:
        from mcap_ros2.writer import Writer  # lazy: the optional `mcap` extra
    except ImportError:
        raise HilError("ROS 2 MCAP export needs mcap-ros2-support: pip install -e '.[mcap]'") from None
    start_ns = int(float(meta.get("started", 0.0)) * 1e9)
    parents, names = _parents(model), model.frame_names
    joints = list(model.joint_names)
    tool = model.frame_index(model.tool_frame)
    count = 0
    with open(path, "wb") as f:
        w = Writer(f)
        schema = {name: w.register_msgdef(name.replace("/", "/msg/"), msgdef(name)) for name in (
            "sensor_msgs/JointState", "tf2_msgs/TFMessage", "geometry_msgs/PoseStamped", "std_msgs/String",
            "diagnostic_msgs/DiagnosticArray", "rcl_interfaces/Log")}

        def put(topic: str, kind: str, t_ns: int, message: dict) -> None:
            nonlocal count
            w.write_message(topic, schema[kind], message, log_time=t_ns, publish_time=t_ns)
            count += 1

        put("/robot_description", "std_msgs/String", start_ns, {"data": to_urdf(model)})
        last_status = None
        for row in data:
            t_ns = start_ns + int(round(float(row["t"]) * 1e9))
            stamp = _stamp(t_ns)
            amps = np.asarray(row["current_mA"], dtype=float) * 1e-3 if "current_mA" in row.dtype.names else None
            put("/joint_states", "sensor_msgs/JointState", t_ns, _joint_state(stamp, joints, row["q_meas"], None, amps))
            put("/joint_states/commanded", "sensor_msgs/JointState", t_ns, _joint_state(stamp, joints, row["q_cmd"]))
            put("/joint_states/target", "sensor_msgs/JointState", t_ns, _joint_state(stamp, joints, row["q_target"]))
            F = model.fk_frames(np.ascontiguousarray(row["q_meas"], dtype=float))
            put("/tf", "tf2_msgs/TFMessage", t_ns, {"transforms": [
                {"header": {"stamp": stamp, "frame_id": names[parents[k]]}, "child_frame_id": names[k],
                 "transform": _transform(inverse_transform(F[parents[k]]) @ F[k])} for k in range(1, len(names))]})
            tp = _transform(F[tool])
            put("/tool_pose", "geometry_msgs/PoseStamped", t_ns, {"header": {"stamp": stamp, "frame_id": names[0]},
                                                                  "pose": {"position": tp["translation"],
                                                                           "orientation": tp["rotation"]}})
            status = (int(row["board_state"]), int(row["faults"]), int(row["safety_flags"]))
            if status != last_status:
                last_status = status
                put("/diagnostics", "diagnostic_msgs/DiagnosticArray", t_ns, _status(row, stamp))
        for t, text in events:
            t_ns = start_ns + int(round(t * 1e9))
            level = 30 if any(word in text.lower() for word in FAULT_WORDS) else 20
            put("/rosout", "rcl_interfaces/Log", t_ns, {"stamp": _stamp(t_ns), "level": level, "name": "hil",
                                                         "msg": text, "file": "", "function": "", "line": 0})
        w.finish()
    return count
