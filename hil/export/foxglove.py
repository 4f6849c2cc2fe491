"""A recording as an MCAP file in the schemas Foxglove shows natively (`hil export RUN.npy --mcap F`).

Channels, JSON-encoded with JSON Schemas: `/joint_states` (every recorded cycle: names, commanded,
measured and target positions in rad, board state, faults, safety and loop flags), `/tf`
(`foxglove.FrameTransforms`: every link's and frame's pose in its parent's, from the measured
positions, so the 3D panel moves the robot), `/tool_pose` (`foxglove.PoseInFrame`, the tool frame in
the base frame) and `/events` (`foxglove.Log`, the run's event lines). The robot's URDF is attached
(`robot.urdf`) and also in the `/robot_description` channel, where Foxglove's 3D panel finds it.
Log times: the run's start (wall clock) plus the recording's loop time.
"""

from __future__ import annotations

import json

import numpy as np

from hil.errors import HilError
from hil.kinematics.floating import inverse_transform
from hil.kinematics.rotations import matrix_quaternion
from hil.robots.urdf_export import to_urdf

FAULT_WORDS = ("fault", "e-stop", "estop", "lost", "refused", "error", "held")


def _time(t_ns: int) -> dict:
    return {"sec": t_ns // 1_000_000_000, "nsec": t_ns % 1_000_000_000}


def _quaternion(R: np.ndarray) -> dict:
    """A rotation as the schemas' quaternion (x, y, z, w)."""
    w, x, y, z = matrix_quaternion(R)
    return {"x": x, "y": y, "z": z, "w": w}


def _pose(T: np.ndarray) -> dict:
    p = T[:3, 3]
    return {"position": {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])}, "orientation": _quaternion(T[:3, :3])}


_TIME = {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}}
_VEC = {"type": "object", "properties": {k: {"type": "number"} for k in "xyz"}}
_QUAT = {"type": "object", "properties": {k: {"type": "number"} for k in "xyzw"}}
_POSE = {"type": "object", "properties": {"position": _VEC, "orientation": _QUAT}}
SCHEMAS = {
    "hil.JointState": {"type": "object", "properties": {
        "timestamp": _TIME, "t": {"type": "number"}, "name": {"type": "array", "items": {"type": "string"}},
        **{k: {"type": "array", "items": {"type": "number"}} for k in ("position", "commanded", "target")},
        **{k: {"type": "integer"} for k in ("board_state", "faults", "safety_flags", "loop_flags")}}},
    "foxglove.FrameTransforms": {"type": "object", "properties": {"transforms": {"type": "array", "items": {
        "type": "object", "properties": {"timestamp": _TIME, "parent_frame_id": {"type": "string"},
                                         "child_frame_id": {"type": "string"}, "translation": _VEC,
                                         "rotation": _QUAT}}}}},
    "foxglove.PoseInFrame": {"type": "object", "properties": {"timestamp": _TIME, "frame_id": {"type": "string"},
                                                              "pose": _POSE}},
    "foxglove.Log": {"type": "object", "properties": {
        "timestamp": _TIME, "level": {"type": "integer", "description": "1 debug, 2 info, 3 warning, 4 error, 5 fatal"},
        "message": {"type": "string"}, "name": {"type": "string"}, "file": {"type": "string"},
        "line": {"type": "integer"}}},
    "hil.RobotDescription": {"type": "object", "properties": {"urdf": {"type": "string"}}},
}


def _parents(model) -> list[int]:
    """Each frame's parent frame row (the base: −1): a link's is its parent link, a named frame's its link."""
    out = [-1]
    for j in model.joints + model.followers:
        out.append(0 if j.parent < 0 else 1 + j.parent)
    for f in range(model.n_links + 1, len(model.frame_names)):
        li = int(model.frame_link[f])
        out.append(0 if li < 0 else 1 + li)
    return out


def write_mcap(path: str, data: np.ndarray, meta: dict, events: list[tuple[float, str]], model) -> int:
    """Write the recording to `path`; returns the number of messages."""
    try:
        from mcap.writer import Writer  # lazy: mcap is the optional `mcap` extra
    except ImportError:
        raise HilError("MCAP export needs the mcap package: pip install -e '.[mcap]' (or pip install mcap)") from None

    start_ns = int(float(meta.get("started", 0.0)) * 1e9)
    urdf = to_urdf(model)
    parents = _parents(model)
    names = model.frame_names
    count = 0
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="hil")
        sid = {name: w.register_schema(name, "jsonschema", json.dumps(s).encode()) for name, s in SCHEMAS.items()}
        ch = {topic: w.register_channel(topic, "json", sid[schema]) for topic, schema in (
            ("/joint_states", "hil.JointState"), ("/tf", "foxglove.FrameTransforms"),
            ("/tool_pose", "foxglove.PoseInFrame"), ("/events", "foxglove.Log"),
            ("/robot_description", "hil.RobotDescription"))}

        def put(topic: str, t_ns: int, message: dict) -> None:
            nonlocal count
            w.add_message(ch[topic], log_time=t_ns, data=json.dumps(message).encode(), publish_time=t_ns)
            count += 1

        w.add_attachment(start_ns, start_ns, "robot.urdf", "application/xml", urdf.encode())
        w.add_metadata("hil", {k: str(v) for k, v in meta.items()})
        put("/robot_description", start_ns, {"urdf": urdf})
        tool = model.frame_index(model.tool_frame)
        joint_names = list(model.joint_names)
        for row in data:
            t_ns = start_ns + int(round(float(row["t"]) * 1e9))
            stamp = _time(t_ns)
            put("/joint_states", t_ns, {
                "timestamp": stamp, "t": float(row["t"]), "name": joint_names,
                "position": row["q_meas"].tolist(), "commanded": row["q_cmd"].tolist(),
                "target": row["q_target"].tolist(), "board_state": int(row["board_state"]),
                "faults": int(row["faults"]), "safety_flags": int(row["safety_flags"]),
                "loop_flags": int(row["loop_flags"])})
            F = model.fk_frames(np.ascontiguousarray(row["q_meas"], dtype=float))
            transforms = []
            for k in range(1, len(names)):
                rel = inverse_transform(F[parents[k]]) @ F[k]
                transforms.append({"timestamp": stamp, "parent_frame_id": names[parents[k]], "child_frame_id": names[k],
                                   "translation": _pose(rel)["position"], "rotation": _quaternion(rel[:3, :3])})
            put("/tf", t_ns, {"transforms": transforms})
            put("/tool_pose", t_ns, {"timestamp": stamp, "frame_id": model.base_frame, "pose": _pose(F[tool])})
        for t, text in events:
            t_ns = start_ns + int(round(t * 1e9))
            level = 3 if any(word in text.lower() for word in FAULT_WORDS) else 2
            put("/events", t_ns, {"timestamp": _time(t_ns), "level": level, "message": text, "name": "hil",
                                  "file": "", "line": 0})
        w.finish()
    return count
