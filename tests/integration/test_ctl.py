"""`hil ctl` as a remote for a running loop: each command through a real `hil ctl` process to a
dry run (the loop, its port process, the emulator on a pty), its exit code and what it says,
checked against what the loop then publishes and records."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest

import hil.robots as robots
from tests.integration.test_runtime import HIL, attach, finish, start_run

pytestmark = pytest.mark.slow
PUMA = robots.load("puma560")


def ctl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(HIL + ["ctl", *args], capture_output=True, text=True, timeout=timeout)


def test_ctl_jogs_moves_plays_and_records_a_running_loop(tmp_path):
    # (the test shuts the loop down itself: the duration is a cap, long enough for each `hil ctl` to take
    # seconds on a busy machine)
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "300", "--enable")
    try:
        client = attach(proc, "puma560")
        client.wait_until(lambda s: int(s.mode) == 4, "the robot enabled and ramped in", 30)
        loop = ["--loop", client.name]
        r = ctl("status", "--json", *loop)
        status = json.loads(r.stdout)
        assert r.returncode == 0 and status["mode"] == "ACTIVE" and set(status["q_cmd_rad"]) == set(PUMA.joint_names)
        before = client.snapshot().q_cmd.copy()

        r = ctl("jog", "shoulder", "+10", "elbow", "-5", *loop)          # joints, by degrees
        assert r.returncode == 0 and "there:" in r.stdout, r.stdout + r.stderr
        moved = np.degrees(client.snapshot().q_cmd - before)
        i, j = PUMA.joint_index("shoulder"), PUMA.joint_index("elbow")
        assert moved[i] == pytest.approx(10, abs=0.1) and moved[j] == pytest.approx(-5, abs=0.1)
        assert np.abs(np.delete(moved, [i, j])).max() < 0.1

        r = ctl("jog", "shouldr", "+10", *loop)                          # a mistyped joint: nothing moves
        assert r.returncode == 2 and "did you mean shoulder" in r.stderr and "Traceback" not in r.stderr
        r = ctl("jog", "shoulder", "+1e9", *loop)                        # past its range: said as that
        assert r.returncode == 2 and "shoulder would go to" in r.stderr and "past its range" in r.stderr, r.stderr
        r = ctl("record", "start", str(tmp_path / "nowhere" / "x.npy"), *loop)   # a folder that is not there
        assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr

        tool0 = PUMA.fk(client.snapshot().q_cmd)[:3, 3]
        r = ctl("jog", "--dz", "20", *loop)                              # the tool, along the base's z
        assert r.returncode == 0, r.stdout + r.stderr
        tool1 = PUMA.fk(client.snapshot().q_cmd)[:3, 3]
        assert np.allclose(tool1 - tool0, [0, 0, 0.02], atol=0.001), tool1 - tool0

        r = ctl("move", "ready", *loop)                                  # a named pose
        assert r.returncode == 0, r.stdout + r.stderr
        assert np.abs(client.snapshot().q_cmd - PUMA.poses["ready"]).max() < math.radians(0.1)

        rec = tmp_path / "remote.npy"
        assert ctl("record", "start", str(rec), *loop).returncode == 0
        t = np.linspace(0, 2, 201)
        q = np.tile(PUMA.poses["ready"], (len(t), 1))
        q[:, i] += math.radians(8) * np.sin(np.pi * t / 2) ** 2
        np.savez(tmp_path / "nod.npz", t=t, q=q)
        r = ctl("play", str(tmp_path / "nod.npz"), "--wait", *loop)       # planned here, run there
        assert r.returncode == 0 and "loaded (2.0 s)" in r.stdout and "done" in r.stdout, r.stdout + r.stderr
        r = ctl("record", "stop", *loop)
        assert r.returncode == 0 and "recording closed" in r.stdout, r.stdout + r.stderr
        rows = np.load(rec)
        peak = np.degrees(rows["q_cmd"][:, i] - PUMA.poses["ready"][i]).max()
        assert len(rows) > 100 and peak == pytest.approx(8, abs=0.5)      # the recording holds the motion

        assert ctl("estop", *loop).returncode == 0
        r = ctl("jog", "shoulder", "+1", *loop)                          # refused by the loop: said, exit 1
        assert r.returncode == 1 and "refused" in r.stderr, r.stdout + r.stderr
        assert ctl("shutdown", *loop).returncode == 0
        out = finish(proc)
        assert "loop stopped: shutdown requested" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
        finish(proc)


def test_ctl_asks_before_torque_off_drops_a_standing_humanoid():
    proc = start_run("--robot", "humanoid17", "--dry-run", "--headless", "--duration", "300", "--enable")
    try:
        client = attach(proc, "humanoid17")
        client.wait_until(lambda s: int(s.mode) == 4, "the robot enabled and ramped in", 30)
        loop = ["--loop", client.name]
        seen, _ = client.state.events_since(0)
        for action in ("disable", "clear-fault", "shutdown"):
            r = ctl(action, *loop)                     # no terminal to ask at: refused, said, nothing sent
            assert r.returncode == 1 and "falls" in r.stderr and f"hil ctl {action} --yes" in r.stderr, r.stderr
        _, said = client.state.events_since(seen)
        assert not [e for e in said if e.startswith(("disable", "clear fault", "shutdown"))], said
        r = ctl("move", "crouch", *loop)
        assert r.returncode == 0, r.stdout + r.stderr
        r = ctl("jog", "--dz", "10", *loop)            # a humanoid has no one tool to move
        assert r.returncode == 2 and "jog its joints" in r.stderr, r.stderr
        assert ctl("disable", "--yes", *loop).returncode == 0
        assert ctl("shutdown", *loop).returncode == 0   # disabled: nothing left to drop
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        finish(proc)
