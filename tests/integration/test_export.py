"""`hil export --mcap` and `hil plot` on a real recording (a walk through the dry-run loop): the MCAP
read back with the mcap reader matches the .npy row for row and timestamp for timestamp, carries
the events and a URDF that loads back into the same robot; the plot has its panels."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

from hil import robots
from hil.robots import urdf
from hil.runtime.recorder import load_events, load_recording
from tests.conftest import loop_slot
from tests.gui.png import read_png

pytestmark = pytest.mark.slow
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
mcap_reader = pytest.importorskip("mcap.reader")


@pytest.fixture(scope="module")
def walk_recording(tmp_path_factory):
    rec = tmp_path_factory.mktemp("walk") / "walk.npy"
    with loop_slot():
        r = subprocess.run(HIL + ["walk", "--steps", "2", "--stride", "0.02", "--dry-run", "--headless", "--record",
                                  str(rec)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    rec.with_suffix(".plan.txt").write_text(r.stdout)
    return rec


def _margin_mm(text: str, after: str) -> float:
    m = re.search(re.escape(after) + r"[^≥]*≥ (-?[0-9.]+) mm", text)
    assert m, text
    return float(m.group(1))


def test_the_mcap_holds_every_row_its_events_and_the_urdf(walk_recording, tmp_path):
    out = tmp_path / "walk.mcap"
    r = subprocess.run(HIL + ["export", str(walk_recording), "--mcap", str(out), "--schemas", "foxglove"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    data, meta = load_recording(str(walk_recording))
    events = load_events(str(walk_recording))
    assert len(events) >= 4 and any("motion" in text for _, text in events)
    start_ns = int(meta["started"] * 1e9)
    by_topic: dict[str, list] = {}
    schemas = {}
    with open(out, "rb") as f:
        reader = mcap_reader.make_reader(f)
        for schema, channel, message in reader.iter_messages():
            by_topic.setdefault(channel.topic, []).append((message.log_time, json.loads(message.data)))
            schemas[channel.topic] = schema.name
        attachments = list(reader.iter_attachments())
    assert schemas["/tf"] == "foxglove.FrameTransforms" and schemas["/events"] == "foxglove.Log"
    assert schemas["/tool_pose"] == "foxglove.PoseInFrame"
    states = by_topic["/joint_states"]
    assert len(states) == len(data) == len(by_topic["/tf"]) == len(by_topic["/tool_pose"])
    for row, (log_time, msg) in zip(data, states):
        assert log_time == start_ns + int(round(float(row["t"]) * 1e9))
        assert msg["timestamp"]["sec"] * 10**9 + msg["timestamp"]["nsec"] == log_time
        assert msg["position"] == row["q_meas"].tolist() and msg["commanded"] == row["q_cmd"].tolist()
        assert msg["board_state"] == int(row["board_state"]) and msg["safety_flags"] == int(row["safety_flags"])
    assert [m["message"] for _, m in by_topic["/events"]] == [text for _, text in events]
    # the transforms put each frame where FK of the measured joints puts it
    model = robots.load("humanoid17")
    k = len(data) // 2
    tf = {t["child_frame_id"]: t for t in by_topic["/tf"][k][1]["transforms"]}
    F = model.fk_frames(np.ascontiguousarray(data["q_meas"][k]))
    for name in ("l_sole", "r_hand", "head"):
        chain, frame = np.eye(4), name
        while frame in tf:
            t = tf[frame]
            T = np.eye(4)
            x, y, z, w = (t["rotation"][c] for c in "xyzw")
            T[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
            T[:3, 3] = [t["translation"][c] for c in "xyz"]
            chain = T @ chain
            frame = t["parent_frame_id"]
        assert frame == model.base_frame
        assert np.abs(chain - F[model.frame_index(name)]).max() < 1e-9
    (urdf_attachment,) = [a for a in attachments if a.name == "robot.urdf"]
    path = tmp_path / "robot.urdf"
    path.write_bytes(urdf_attachment.data)
    back = urdf.build(str(path))
    assert np.abs(back.fk_frames(data["q_meas"][k])[[back.frame_index(f) for f in model.frame_names]] - F).max() < 1e-9


def _chain(tf: dict, name: str, quat) -> tuple[np.ndarray, str]:
    """A frame's pose in the root of the transforms (child → (parent, 4×4)), and that root's name."""
    chain, frame = np.eye(4), name
    while frame in tf:
        parent, T = tf[frame]
        chain = T @ chain
        frame = parent
    return chain, frame


def _matrix(translation, rotation) -> np.ndarray:
    x, y, z, w = rotation
    T = np.eye(4)
    T[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    T[:3, 3] = translation
    return T


def test_the_mcap_is_a_ros2_bag_an_independent_reader_takes(walk_recording, tmp_path):
    """Read with `rosbags` (its own MCAP reader and CDR decoder, not the writer's library): JointState
    with the robot's joint names and the recording's positions, TF for every link where FK puts it,
    the URDF on /robot_description, the events on /rosout."""
    rosbags_reader = pytest.importorskip("rosbags.rosbag2")
    from rosbags.typesys import Stores, get_typestore

    bag = tmp_path / "walk"
    bag.mkdir()
    r = subprocess.run(HIL + ["export", str(walk_recording), "--mcap", str(bag / "walk.mcap")], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0 and "a ROS 2 bag" in r.stdout, r.stdout + r.stderr
    data, meta = load_recording(str(walk_recording))
    model = robots.load("humanoid17")
    store = get_typestore(Stores.ROS2_HUMBLE)
    by_topic: dict[str, list] = {}
    with rosbags_reader.Reader(bag / "walk.mcap") as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        for conn, t_ns, raw in reader.messages():
            by_topic.setdefault(conn.topic, []).append((t_ns, store.deserialize_cdr(raw, conn.msgtype)))
    assert types["/joint_states"] == "sensor_msgs/msg/JointState" and types["/tf"] == "tf2_msgs/msg/TFMessage"
    assert types["/robot_description"] == "std_msgs/msg/String" and types["/rosout"] == "rcl_interfaces/msg/Log"
    start_ns = int(meta["started"] * 1e9)
    states = by_topic["/joint_states"]
    assert len(states) == len(data) == len(by_topic["/joint_states/commanded"]) == len(by_topic["/tf"])
    for row, (t_ns, msg) in zip(data[::50], states[::50]):
        assert t_ns == start_ns + int(round(float(row["t"]) * 1e9))
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == t_ns
        assert list(msg.name) == list(model.joint_names) and np.allclose(msg.position, row["q_meas"])
    k = len(data) // 2
    tf = {t.child_frame_id: (t.header.frame_id, _matrix([t.transform.translation.x, t.transform.translation.y,
                                                         t.transform.translation.z],
                                                        [t.transform.rotation.x, t.transform.rotation.y,
                                                         t.transform.rotation.z, t.transform.rotation.w]))
          for t in by_topic["/tf"][k][1].transforms}
    F = model.fk_frames(np.ascontiguousarray(data["q_meas"][k]))
    for name in model.frame_names[1:]:
        chain, root = _chain(tf, name, None)
        assert root == model.base_frame and np.abs(chain - F[model.frame_index(name)]).max() < 1e-9, name
    path = tmp_path / "robot.urdf"
    path.write_text(by_topic["/robot_description"][0][1].data)
    back = urdf.build(str(path))
    assert set(model.frame_names) <= set(back.frame_names)
    events = load_events(str(walk_recording))
    assert [m.msg for _, m in by_topic["/rosout"]] == [text for _, text in events]


def test_the_plot_draws_the_joints_and_the_walk_s_zmp(walk_recording, tmp_path):
    out = tmp_path / "walk.png"
    r = subprocess.run(HIL + ["plot", str(walk_recording), "--out", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # the ZMP of what the loop commanded is the plan's: the loop runs the motion on its own clock, so
    # the wall clock's jitter (a busy machine) must not show up as metres of ZMP
    plan = walk_recording.with_suffix(".plan.txt").read_text()
    assert abs(_margin_mm(r.stdout, "ZMP and support polygon") - _margin_mm(plan, "ZMP margin")) < 0.5, r.stdout
    img = read_png(str(out))[:, :, :3].astype(int)
    assert img.shape[0] > 800 and img.shape[1] > 1200
    # matplotlib's tab colours: commanded green, the ZMP red, soles blue and orange (one outline of a
    # sole is some 400 pixels)
    for rgb in ((44, 160, 44), (214, 39, 40), (255, 127, 14)):
        assert (np.abs(img - rgb).max(axis=2) < 30).sum() > 250, rgb
