"""`hil teleop` end to end: a leader arm's bus emulator moved by a scripted hand on one pty, its
reader process, the follower's loop, port process and bus emulator on another — an episode
recorded as a LeRobot dataset, played back with `hil replay`; a leader pose past the follower's
range clamped and said, never sent; a leader unplugged mid-run stopping the follower, said last."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hil import board_config, robots
from hil.runtime.shared import runtime_dir
from hil.runtime.recorder import load_recording

pytestmark = pytest.mark.slow
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def _teleop(*args, timeout=180):
    return subprocess.run(HIL + ["teleop", "--dry-run", "--headless", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("robot", ["so101", "koch"])
def test_a_teleop_episode_is_a_lerobot_dataset_that_replays(tmp_path, robot):
    root = tmp_path / "ds"
    r = _teleop("--robot", robot, "--duration", "6", "--record", str(root), "--task", "wave")
    said = r.stdout + r.stderr
    assert r.returncode == 0, said
    assert "leader: reading" in said and "torque off" in said and "motion 'teleop' running" in said, said
    assert f"--record {root}: episode 0" in said, said
    # the run's own recording, turned into the episode, leaves nothing behind in the runtime folder
    assert not list(Path(runtime_dir()).glob("teleop-*")), list(Path(runtime_dir()).iterdir())
    info = json.loads((root / "meta" / "info.json").read_text())
    model = robots.load(robot)
    assert info["robot_type"] == f"{robot}_follower"
    assert info["features"]["action"]["names"] == [f"{n}.pos" for n in model.joint_names]
    from hil.lerobot import dataset

    ep = dataset.read_episode(str(root), 0)
    assert 4 * 30 <= len(ep.action) <= 7 * 30 and ep.task == "wave"
    # the follower followed: once ramped in, what it measured stays near what the leader asked
    late = slice(len(ep.action) // 2, None)
    assert np.abs(ep.state[late] - ep.action[late]).max() < 15, np.abs(ep.state[late] - ep.action[late]).max(0)
    assert np.ptp(ep.action, axis=0).max() > 10   # the hand moved it
    r = subprocess.run(HIL + ["replay", str(root), "--episode", "0", "--dry-run", "--headless"], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0 and "checks ok" in r.stdout and "done" in r.stdout, r.stdout + r.stderr


def test_a_leader_past_the_followers_range_is_clamped_said_and_never_sent(tmp_path):
    """The hand turns the leader's shoulder_pan (id 1) to ticks past the follower's range."""
    model = robots.load("so101")
    follower = board_config.shipped(model, "feetech")
    pan = follower.joints[0]
    past = pan.ticks(pan.max_rad) + 300          # 26° beyond the follower's end
    rec = tmp_path / "run.npy"
    r = _teleop("--robot", "so101", "--duration", "6", "--hand", f"1:{pan.ticks(0.0)}:{past}@0.5-3",
                "--record", str(rec))
    said = r.stdout + r.stderr
    assert r.returncode == 0, said
    assert "the leader's shoulder_pan at" in said and "past the follower's range; held at" in said, said
    data, _ = load_recording(str(rec))
    narrowed = board_config.within_config(model, follower)
    assert data["q_target"][:, 0].max() <= narrowed.upper[0] + 1e-9
    assert data["q_cmd"][:, 0].max() <= narrowed.upper[0] + 1e-9
    assert data["q_cmd"][:, 0].max() > narrowed.upper[0] - np.radians(2)   # it went as far as it may


# the fault's time counts from the leader emulator's start: the follower's motion runs 0.7 s after
# it on an idle machine (its forked command); 5 s leaves a busy machine's slower start-up before it,
# and the test asks that the motion was running
@pytest.mark.parametrize("fault,why", [("disconnect@5", "the leader's port"),
                                       ("silent:3@5", "the leader's elbow_flex (id 3)")])
def test_a_leader_lost_mid_run_stops_the_follower_and_says_so_last(tmp_path, fault, why):
    r = _teleop("--robot", "so101", "--duration", "30", "--leader-fault", fault)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "motion 'teleop' running" in r.stdout, r.stdout + r.stderr   # lost mid-run, not before it
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("hil teleop: leader lost: " + why) and "the robot stopped where it was" in last, r.stderr
    assert "duration 30 s reached" not in r.stdout


def test_lerobots_own_loader_reads_the_episode(tmp_path):
    """Where LeRobot is installed (Python >= 3.12 and torch: pip install lerobot), its own
    LeRobotDataset loads what hil teleop recorded."""
    lerobot_dataset = pytest.importorskip("lerobot.datasets.lerobot_dataset",
                                          reason="LeRobot needs Python >= 3.12 and torch")
    root = tmp_path / "ds"
    r = _teleop("--robot", "so101", "--duration", "3", "--record", str(root), "--task", "wave")
    assert r.returncode == 0, r.stdout + r.stderr
    ds = lerobot_dataset.LeRobotDataset("local/hil_teleop", root=root)
    assert ds.num_episodes == 1 and ds.meta.robot_type == "so101_follower"
    item = ds[5]
    assert tuple(item["action"].shape) == (6,) and item["task"] == "wave"
