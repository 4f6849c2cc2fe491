"""LeRobot's units and datasets as LeRobot reads them: joint angles ↔ its numbers on each kit,
episodes written as format v3.0 and read back the way LeRobot's own loader does (Hugging Face
`datasets.Dataset.from_parquet` with the features info.json declares, the tasks table through
pandas), and bad datasets refused with one line naming the file, the column and the row."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hil import board_config, robots
from hil.errors import InputError
from hil.lerobot import dataset, motor_calibration
from hil.lerobot.units import DEGREES, LeRobotUnits
from hil.motion.limits import check_limits, follow_within_limits

SO101 = robots.load("so101")
KOCH = robots.load("koch")


def _units(model, bus, role="follower", degrees=False):
    return LeRobotUnits(board_config.shipped(model, bus, role), degrees)


@pytest.mark.parametrize("model,bus,role", [(SO101, "feetech", "follower"), (SO101, "feetech", "leader"),
                                            (KOCH, "dynamixel2", "follower"), (KOCH, "dynamixel2", "leader")])
@pytest.mark.parametrize("degrees", [False, True])
def test_angles_and_lerobots_numbers_go_both_ways_on_each_kit(model, bus, role, degrees):
    units = _units(model, bus, role, degrees)
    rng = np.random.default_rng(1)
    cfg = units.config
    lo = np.array([j.min_rad for j in cfg.joints])
    hi = np.array([j.max_rad for j in cfg.joints])
    q = lo + (hi - lo) * rng.uniform(0.02, 0.98, (50, model.n))
    v = units.values(q)
    assert v.dtype == np.float32 and units.names == [f"{n}.pos" for n in model.joint_names]
    body = ~units.is_gripper
    assert np.all(v[:, units.is_gripper] >= 0) and np.all(v[:, units.is_gripper] <= 100)
    if not degrees:
        assert np.all(np.abs(v[:, body]) <= 100)
    # float32 numbers: a few thousandths of a degree
    assert np.degrees(np.abs(units.angles(v) - q)).max() < 0.02


def test_the_numbers_are_lerobots_own_formulas_on_an_imported_calibration(tmp_path):
    """LeRobot: body (x − min)/(max − min)·200 − 100, negated for a Feetech drive_mode 1 motor;
    gripper 0 … 100 %; degrees (x − mid)·360/4095. Here from the ticks hil puts the servos at."""
    cal = {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1000, "range_max": 3000},
           "shoulder_lift": {"id": 2, "drive_mode": 1, "homing_offset": 0, "range_min": 800, "range_max": 3200},
           "elbow_flex": {"id": 3, "drive_mode": 0, "homing_offset": 0, "range_min": 900, "range_max": 3100},
           "wrist_flex": {"id": 4, "drive_mode": 0, "homing_offset": 0, "range_min": 850, "range_max": 3150},
           "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095},
           "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 0, "range_min": 2000, "range_max": 3500}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal, indent=4))
    config = motor_calibration.import_file(SO101, str(path))
    for degrees in (False, True):
        units = LeRobotUnits(config, degrees)
        q = np.array([j.rad(t) for j, t in zip(config.joints, (1500, 2000, 2500, 2000, 1000, 2750))])
        v = units.values(q)
        assert v[0] == pytest.approx((1500 - 2000) * 360 / 4095 if degrees else -50, abs=1e-3)
        assert v[1] == pytest.approx(0.0, abs=1e-3)                            # the middle, either way
        assert v[2] == pytest.approx((2500 - 2000) * 360 / 4095 if degrees else (1600 / 2200) * 200 - 100, abs=1e-3)
        assert v[5] == pytest.approx(50.0, abs=1e-3)                           # the gripper: always 0 … 100
    lift = LeRobotUnits(config).values(np.array([j.rad(t) for j, t in zip(config.joints, (2000, 1100, 2000, 2000,
                                                                                        2000, 2000))]))[1]
    assert lift == pytest.approx(-((1100 - 800) / 2400 * 200 - 100), abs=1e-3)   # drive_mode 1: negated


def _episode(n=6, frames=90, fps=30, task="pick", names=None, robot="so101_follower", modes=None, seed=0):
    rng = np.random.default_rng(seed)
    names = names or [f"{j}.pos" for j in SO101.joint_names][:n]
    a = rng.uniform(-50, 50, (frames, n)).astype(np.float32)
    return dataset.Episode(names, fps, a, a + 1, task, robot, modes or ("range_m100_100",) * n)


def _as_lerobot_reads(root):
    """The frames as LeRobot's loader gets them: its features from info.json, every data file."""
    import datasets
    import pandas as pd

    info = json.loads((root / "meta" / "info.json").read_text())
    feats = {}
    for k, ft in info["features"].items():
        feats[k] = datasets.Value(ft["dtype"]) if ft["shape"] == [1] else \
            datasets.Sequence(length=ft["shape"][0], feature=datasets.Value(ft["dtype"]))
    files = sorted(str(p) for p in (root / "data").glob("*/*.parquet"))
    frames = datasets.Dataset.from_parquet(files, features=datasets.Features(feats), cache_dir=str(root.parent / "c"))
    tasks = pd.read_parquet(root / "meta" / "tasks.parquet")
    tasks.index.name = "task"
    episodes = datasets.Dataset.from_parquet(sorted(str(p) for p in (root / "meta" / "episodes").glob("*/*.parquet")),
                                             cache_dir=str(root.parent / "c"))
    return info, frames, tasks, episodes


def test_episodes_are_written_as_lerobot_reads_them(tmp_path):
    root = tmp_path / "ds"
    eps = [_episode(frames=90, task="pick"), _episode(frames=45, task="place", seed=1), _episode(frames=60, seed=2)]
    assert [dataset.append_episode(str(root), e) for e in eps] == [0, 1, 2]
    info, frames, tasks, episodes = _as_lerobot_reads(root)
    assert info["codebase_version"] == "v3.0" and info["fps"] == 30 and info["robot_type"] == "so101_follower"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 195, 2)
    assert info["features"]["action"]["names"] == eps[0].names and info["splits"] == {"train": "0:3"}
    assert len(frames) == 195 and list(frames["index"]) == list(range(195))
    row = frames[100]   # episode 1's 11th frame
    assert (row["episode_index"], row["frame_index"]) == (1, 10)
    assert row["timestamp"] == pytest.approx(10 / 30)
    assert row["action"] == pytest.approx(eps[1].action[10].tolist())
    assert row["observation.state"] == pytest.approx(eps[1].state[10].tolist())
    assert tasks.iloc[row["task_index"]].name == "place" and int(tasks.loc["pick"].task_index) == 0
    assert episodes["length"] == [90, 45, 60] and episodes["dataset_from_index"] == [0, 90, 135]
    assert episodes["dataset_to_index"] == [90, 135, 195] and episodes["tasks"] == [["pick"], ["place"], ["pick"]]
    stats = json.loads((root / "meta" / "stats.json").read_text())
    every = np.concatenate([e.action for e in eps]).astype(np.float64)
    assert stats["action"]["count"] == [195]
    assert stats["action"]["mean"] == pytest.approx(every.mean(0).tolist(), abs=1e-4)
    assert stats["action"]["std"] == pytest.approx(every.std(0).tolist(), abs=1e-4)
    assert stats["action"]["min"] == pytest.approx(every.min(0).tolist())
    back = dataset.read_episode(str(root), 1)
    assert back.fps == 30 and back.task == "place" and np.allclose(back.action, eps[1].action)


@pytest.mark.parametrize("change,message", [
    (dict(fps=25), "its episodes are at 30 fps, this one at 25"),
    (dict(names=["a.pos"] * 6), "its episodes are of motors shoulder_pan.pos"),
    (dict(robot="koch_follower"), "a dataset of a so101_follower"),
    (dict(modes=(DEGREES,) * 6), "its episodes hold other units"),
])
def test_an_episode_unlike_the_datasets_is_refused_before_anything_is_written(tmp_path, change, message):
    root = tmp_path / "ds"
    dataset.append_episode(str(root), _episode())
    before = sorted((p.name, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())
    with pytest.raises(InputError, match=message):
        dataset.append_episode(str(root), _episode(**change))
    assert sorted((p.name, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()) == before


def test_a_folder_that_is_not_a_dataset_is_not_written_into(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(InputError, match="not a LeRobot dataset .* and not an empty folder"):
        dataset.append_episode(str(tmp_path / "photos"), _episode())


def _damage(root, how):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = root / "data" / "chunk-000" / "file-000.parquet"
    if how == "nan":
        t = pq.read_table(data)
        a = np.array(t.column("action").to_pylist())
        a[7, 2] = np.nan
        t = t.set_column(0, "action", pa.FixedSizeListArray.from_arrays(pa.array(a.ravel(), pa.float32()), 6))
        pq.write_table(t, data)
    elif how == "no-state":
        pq.write_table(pq.read_table(data).drop_columns(["observation.state"]), data)
    elif how == "truncated":
        data.write_bytes(data.read_bytes()[:200])
    elif how == "info":
        (root / "meta" / "info.json").write_text('{"codebase_version": "v2.1", "fps": 30}')
    elif how == "fifo":
        import os
        data.unlink()
        os.mkfifo(data)


@pytest.mark.parametrize("how,message", [
    ("nan", "column 'action' holds nan at frame 7 (value 3 of 6)"),
    ("no-state", "no 'observation.state' column"),
    ("truncated", "not a readable Parquet file"),
    ("info", "codebase_version 'v2.1'"),
    ("fifo", "is a named pipe (FIFO); give a regular file"),
])
def test_a_damaged_dataset_is_refused_naming_file_column_and_row(tmp_path, how, message):
    root = tmp_path / "ds"
    dataset.append_episode(str(root), _episode())
    _damage(root, how)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dataset.read_episode(str(root), 0)


def test_an_episode_of_other_motors_is_refused_naming_them(tmp_path):
    root = tmp_path / "ds"
    names = [f"{j}.pos" for j in SO101.joint_names[:5]] + ["wrist_yaw.pos"]
    dataset.append_episode(str(root), _episode(names=names))
    data = dataset.read_episode(str(root), 0)
    with pytest.raises(InputError, match="missing gripper.pos; not the robot's: wrist_yaw.pos"):
        dataset.episode_trajectory(data, _units(SO101, "feetech"), "ds episode 0")
    with pytest.raises(InputError, match="no episode 3; it has 1"):
        dataset.read_episode(str(root), 3)


def test_an_episode_is_played_through_its_frames_smoothly_and_never_past_them():
    rng = np.random.default_rng(3)
    q = np.cumsum(rng.normal(0, 0.02, (60, 3)), axis=0)
    t, s = dataset.smooth_frames(q, 30)
    assert np.allclose(s[::dataset.SUBSTEPS], q) and t[-1] == pytest.approx(59 / 30)
    for k in range(59):   # monotone between two frames: nothing beyond either
        seg = s[k * dataset.SUBSTEPS:(k + 1) * dataset.SUBSTEPS + 1]
        assert np.all(seg <= np.maximum(q[k], q[k + 1]) + 1e-12) and np.all(seg >= np.minimum(q[k], q[k + 1]) - 1e-12)


def test_samples_faster_than_the_joints_are_followed_within_their_limits():
    t = np.arange(0, 3, 1 / 240)
    q = np.zeros((len(t), SO101.n))
    q[t > 0.5, 1] = 0.6            # a step: no joint can follow it as asked
    before = check_limits(SO101, t, q)
    f = follow_within_limits(SO101, t, q)
    after = check_limits(SO101, t, f.q)
    assert before.first_over_t is not None and after.first_over_t is None
    assert f.joint == 1 and f.lag_rad == pytest.approx(0.6, abs=0.01) and f.at_s == pytest.approx(0.5, abs=0.01)
    assert abs(f.q[-1, 1] - 0.6) < 1e-6 and f.q[:, 1].max() <= 0.6 + 1e-4   # it gets there, and not past it (0.006°)
    slow = 0.3 * np.sin(t)[:, None] * np.ones(SO101.n)   # within the limits: followed as it is
    assert follow_within_limits(SO101, t, slow).lag_rad < math.radians(0.5)


def test_samples_at_a_joints_limit_are_followed_to_it_and_never_past_it():
    """A hand closing the gripper fast onto its stop, again and again: the follower closes on the
    stop from behind, never passes it (the plan check would refuse the episode) and never asks
    more than the acceleration limit to stop there."""
    t = np.arange(0, 3, 1 / 240)
    for j in (SO101.joint_names.index("gripper"), 0):
        lo, hi = SO101.lower[j], SO101.upper[j]
        for seed in range(40):
            rng = np.random.default_rng(seed)
            q = np.tile(SO101.home, (len(t), 1))
            walk = np.cumsum(rng.normal(0, 0.04 if seed % 2 else 0.15, len(t)))   # a calm hand, a quick one
            q[:, j] = np.clip(lo + 0.3 + walk, lo, hi)
            f = follow_within_limits(SO101, t, q)
            assert lo <= f.q[:, j].min() and f.q[:, j].max() <= hi, seed
            assert check_limits(SO101, t, f.q).first_over_t is None, (seed, check_limits(SO101, t, f.q).worst)
