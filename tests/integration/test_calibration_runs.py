"""Calibration, then a run with its file: the offsets found are applied at the link boundary, and
bad or foreign files keep the robot disabled. These tests start real-time loops (see
`LOOP_MODULES` in conftest.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil import calibration_files
from tests.integration.test_calibration import UID, miscalibrated, run  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow


def test_directions_then_reference_recover_the_hidden_errors(miscalibrated, tmp_path):
    model, emu, hidden, rev = miscalibrated
    cal = tmp_path / "cal.toml"
    # (the board's watchdog with a busy machine's margin: the jogs come from a plain Python thread)
    r = run("calibrate", "--robot", "humanoid17", "--port", emu.path, "--method", "directions", "--yes",
            "--out", str(cal), "--jog-speed-deg-s", "40", "--settle-s", "0.15", "--watchdog-ms", "300")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "r_knee" in r.stdout and "REVERSED" in r.stdout and "reversed: r_knee" in r.stdout
    offsets, signs, data = calibration_files.load(cal, model, UID)
    assert signs[rev] == -1 and (signs[np.arange(model.n) != rev] == 1).all()
    r = run("calibrate", "--robot", "humanoid17", "--port", emu.path, "--method", "reference", "--yes",
            "--headless", "--out", str(cal))
    assert r.returncode == 0, r.stdout + r.stderr
    offsets, signs, data = calibration_files.load(cal, model, UID)
    err = np.abs(np.degrees(offsets) - hidden)
    print("offset errors (deg):", np.round(err, 4))
    assert err.max() < 0.05, err
    assert data["method"] == "reference" and data["board_uid"] == UID and data["robot"] == "humanoid17"
    assert "after: measured pose within 0.0" in r.stdout
    # applied at the link boundary: with the file, the loop measures the true (home) pose
    r = run("run", "--robot", "humanoid17", "--port", emu.path, "--calibration", str(cal), "--headless",
            "--duration", "1.5", "--record", str(tmp_path / "r.npy"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"calibration {cal} applied" in r.stdout
    rec = np.load(tmp_path / "r.npy")
    # the mean of the last half second: the file's error (< 0.05 deg, above) plus the bias of 0.09 deg
    # quantisation steps that 0.03 deg of noise does not dither away (up to half a step); an
    # unapplied offset would show in full (every hidden one here is 0.146 deg or more)
    assert np.abs(hidden).min() > 0.1
    q_settled = rec["q_meas"][-len(rec) // 3:].mean(axis=0)
    assert np.abs(q_settled - model.home).max() < math.radians(0.1), np.degrees(q_settled - model.home)


def test_bad_calibration_files_keep_the_robot_disabled(miscalibrated, tmp_path):
    model, emu, hidden, rev = miscalibrated
    bad = tmp_path / "bad.toml"
    bad.write_text("format_version = 1\nboard_uid = [\n")
    r = run("run", "--robot", "humanoid17", "--port", emu.path, "--calibration", str(bad), "--headless",
            "--duration", "2", "--enable")
    assert r.returncode == 2 and "corrupt" in r.stderr, r.stdout + r.stderr  # refused before anything ran
    other = tmp_path / "other.toml"
    calibration_files.save(other, model, "FFFFFFFFFFFFFFFFFFFFFFFF", "reference", np.zeros(model.n), np.ones(model.n))
    r = run("run", "--robot", "humanoid17", "--port", emu.path, "--calibration", str(other), "--headless",
            "--duration", "2", "--enable")
    assert r.returncode == 2 and "belongs to board 'FFFFFFFFFFFFFFFFFFFFFFFF'" in r.stderr, r.stdout + r.stderr
    # the board was never enabled: it still reports DISABLED
    from firmware_protocol.link import Link
    from tests.conftest import wait_for
    with Link.connect(emu.path) as link:
        assert wait_for(link.latest).state == 1
