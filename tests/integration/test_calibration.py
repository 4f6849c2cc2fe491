"""Calibration against the emulator started with hidden offsets and a reversed joint, through a
real pty; the PUMA pose fit on synthetic measurements; bad files refused. The tests that then
start a run with the calibration are in test_calibration_runs.py (they start real-time loops)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import hil.robots as robots
from calibration import procedures as P
from hil import calibration_files
from hil.emulator_launch import emulator_args
from hil.errors import ConfigError

pytestmark = pytest.mark.slow

from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
UID = "CA1B0A2D0000000000000017"


@pytest.fixture
def miscalibrated(emulator):
    model = robots.load("humanoid17")
    rng = np.random.default_rng(40)
    hidden = np.round(rng.uniform(-3, 3, model.n), 3)
    rev = model.joint_index("r_knee")
    emu = emulator(*emulator_args(model, offsets_deg=hidden, reverse=[rev], uid=UID, seed=1))
    return model, emu, hidden, rev


def run(*args, **kw):
    return subprocess.run(HIL + list(args), capture_output=True, text=True, timeout=kw.get("timeout", 180))


def test_calibration_file_validation(tmp_path):
    model = robots.load("humanoid17")
    p = tmp_path / "c.toml"
    calibration_files.save(p, model, UID, "reference", np.radians(np.full(model.n, 1.5)), np.ones(model.n))
    off, sign, _ = calibration_files.load(p, model, UID)
    assert np.allclose(np.degrees(off), 1.5)
    with pytest.raises(ConfigError, match="for robot 'humanoid17', not 'puma560'"):
        calibration_files.load(p, robots.load("puma560"))
    p.write_text(p.read_text().replace("sign = 1", "sign = 3", 1))
    with pytest.raises(ConfigError, match="out of range"):
        calibration_files.load(p, model)
    p.write_text("format_version = 2\n")
    with pytest.raises(ConfigError, match="format_version"):
        calibration_files.load(p, model)


# ---------------------------------------------------------------------------- PUMA pose fit
def synthetic(puma, true_deg, n, rng, noise_mm=0.0, vary=None):
    Q = rng.uniform(puma.lower * 0.6, puma.upper * 0.6, (n, 6))
    Q[:, 4] = np.sign(Q[:, 4]) * np.maximum(np.abs(Q[:, 4]), 0.3)
    if vary is not None:  # only these joints move between poses
        Q[:, [j for j in range(6) if j not in vary]] = Q[0, [j for j in range(6) if j not in vary]]
    p = np.array([puma.fk(q)[:3, 3] for q in Q]) + rng.normal(0, noise_mm * 1e-3, (n, 3))
    return Q + np.radians(true_deg), p


def test_pose_fit_recovers_offsets(tmp_path):
    puma = robots.load("puma560")
    true = np.array([0.3, -0.2, 0.5, 0.15, -0.4, 0.25])
    rng = np.random.default_rng(41)
    q_read, p = synthetic(puma, true, 12, rng)
    # through the file format, as a touch probe would deliver it
    f = tmp_path / "probe.csv"
    f.write_text("# q1..q6 deg, x y z mm\n" + "\n".join(
        ",".join(f"{v:.9f}" for v in np.degrees(q)) + "," + ",".join(f"{v * 1e3:.6f}" for v in pp)
        for q, pp in zip(q_read, p)))
    q_file, p_file = P.load_pose_file(str(f), 6)
    res = P.fit_poses(puma, q_file, p_file)
    # the wrist centre does not move with θ4..θ6 (a spherical wrist): only θ1..θ3 are determined
    assert np.abs(np.degrees(res.offsets[:3]) - true[:3]).max() < 0.01
    assert res.rms_mm < 1e-3
    wrist = [f"offset {j}" for j in puma.joint_names[3:]]
    assert res.undetermined == wrist  # and the report names them, not the determined ones
    assert any("do not determine " + ", ".join(wrist) in w for w in res.warnings), res.warnings
    assert np.all(np.isinf(res.sigma[3:])) and np.all(np.isfinite(res.sigma[:3]))
    # with a tool offset, θ6 becomes observable too
    tool = np.eye(4)
    tool[:3, 3] = [0.05, 0.0, 0.15]
    tooled = puma.with_tool(tool)
    Q = rng.uniform(puma.lower * 0.6, puma.upper * 0.6, (12, 6))
    p2 = np.array([tooled.fk(q)[:3, 3] for q in Q])
    res2 = P.fit_poses(puma, Q + np.radians(true), p2, tool=tool)
    assert np.abs(np.degrees(res2.offsets) - true).max() < 0.01
    assert not res2.warnings


def test_pose_fit_with_noise_reports_uncertainty():
    puma = robots.load("puma560")
    tool = np.eye(4)
    tool[:3, 3] = [0.05, 0.0, 0.15]
    tooled = puma.with_tool(tool)
    true = np.array([0.3, -0.2, 0.5, 0.15, -0.4, 0.25])
    rng = np.random.default_rng(42)
    Q = rng.uniform(puma.lower * 0.6, puma.upper * 0.6, (20, 6))
    p = np.array([tooled.fk(q)[:3, 3] for q in Q]) + rng.normal(0, 0.2e-3, (20, 3))
    res = P.fit_poses(puma, Q + np.radians(true), p, tool=tool)
    sig = np.degrees(res.sigma[:6])
    assert np.all(sig > 0) and np.all(sig < 0.2)
    assert np.all(np.abs(np.degrees(res.offsets) - true) < 4 * sig + 1e-6)
    assert 0.1 < res.rms_mm < 0.6


def test_poorly_conditioned_pose_set_is_flagged():
    puma = robots.load("puma560")
    rng = np.random.default_rng(43)
    q_read, p = synthetic(puma, np.zeros(6), 10, rng, vary=[0])  # only the waist moves
    res = P.fit_poses(puma, q_read, p)
    assert res.warnings and "offset wrist" in res.warnings[0] and "offset waist" not in res.warnings[0]


def test_a_pose_fit_that_leaves_offsets_undetermined_is_not_saved(tmp_path):
    puma = robots.load("puma560")
    rng = np.random.default_rng(44)
    q_read, p = synthetic(puma, np.zeros(6), 12, rng)  # no tool offset: the wrist offsets cannot be seen
    f = tmp_path / "probe.csv"
    f.write_text("\n".join(",".join(f"{v:.9f}" for v in np.degrees(q)) + "," + ",".join(f"{v * 1e3:.6f}" for v in pp)
                           for q, pp in zip(q_read, p)))
    out = tmp_path / "cal.toml"
    r = subprocess.run([*HIL, "calibrate", "--robot", "puma560", "--method", "poses",
                        "--poses", str(f), "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not saved" in r.stderr and not out.exists(), r.stdout + r.stderr
    assert "not determined by these points" in r.stdout and "inf" not in r.stdout


def test_pose_file_errors(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("1,2,3\n")
    with pytest.raises(Exception, match="line 1: expected 6 joint angles"):
        P.load_pose_file(str(f), 6)
    f.write_text("\n".join(["0,0,0,0,0,0,1,2,3"] * 5))
    with pytest.raises(Exception, match="at least 8"):
        P.load_pose_file(str(f), 6)


def test_a_board_that_stops_following_fails_the_direction_check_and_saves_nothing(emulator, tmp_path):
    """The board reboots (disabled) 5 s in, while the joints are jogged one after another (about 2 s
    each): a joint jogged then says nothing about its direction."""
    model = robots.load("puma560")
    run("warmup", timeout=600)     # compiled ahead: the calibration is connected well before the reboot
    emu = emulator(*emulator_args(model, uid="CA1B0A2D0000000000000560", seed=2, faults=["reboot@5"]))
    cal = tmp_path / "cal.toml"
    r = run("calibrate", "--robot", "puma560", "--port", emu.path, "--method", "directions", "--yes",
            "--out", str(cal), timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "nothing was saved" in r.stderr and "the board left ENABLED" in r.stderr, r.stdout + r.stderr
    assert not cal.exists()


def test_directions_keep_the_previous_sign_of_a_joint_that_did_not_follow():
    res = P.DirectionResult(ratio=np.array([1.0, -0.98, 0.02, -0.03, 0.6, -0.7]), commanded=np.zeros(6),
                            measured=np.zeros(6))
    previous = np.array([1.0, 1.0, -1.0, 1.0, -1.0, 1.0])
    # followed: their own direction; did not follow (|ratio| ≤ 0.5): as before
    assert res.signs_over(previous).tolist() == [1.0, -1.0, -1.0, 1.0, 1.0, -1.0]


def test_a_port_that_cannot_be_opened_is_named_without_a_traceback(tmp_path):
    r = run("calibrate", "--robot", "puma560", "--port", str(tmp_path / "ttyNONE"), "--method", "directions", "--yes")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"hil calibrate: error: cannot open {tmp_path / 'ttyNONE'}: no such port")
    assert "Traceback" not in r.stderr


def test_reference_with_out_keeps_the_boards_saved_directions(miscalibrated, tmp_path):
    """`--method reference --out new.toml` ignored the directions saved for the board (the reversed
    knee came out with sign +1 and no warning)."""
    import os

    model, emu, hidden, rev = miscalibrated
    env_dir = tmp_path / "cals"
    env = {**os.environ, "HIL_CALIBRATION_DIR": str(env_dir)}

    def cal(*args):
        return subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--port", emu.path, "--yes", "--headless",
                                     *args], capture_output=True, text=True, timeout=180, env=env)

    signs = np.ones(model.n)
    signs[rev] = -1  # as `--method directions` saved them for this board
    calibration_files.save(env_dir / f"{UID}.toml", model, UID, "directions", np.zeros(model.n), signs)
    new = tmp_path / "new.toml"
    r = cal("--method", "reference", "--out", str(new))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "keeping the board's saved directions" in r.stdout, r.stdout
    _, signs, _ = calibration_files.load(new, model, UID)
    assert signs[rev] == -1


def test_calibration_offers_to_clear_a_latched_watchdog(emulator, tmp_path):
    """A board left in FAULT by a run that ended badly: calibration clears it (asked; --yes here)
    instead of failing with "clear its faults first"."""
    import time

    from firmware_protocol.link import Link

    model = robots.load("humanoid17")
    emu = emulator(*emulator_args(model, uid=UID, seed=3))
    with Link.connect(emu.path, expect_joints=model.n) as link:  # enable, then go quiet: the watchdog trips
        link.enable()
        link.send_positions(model.home)
    deadline = time.monotonic() + 5
    with Link.connect(emu.path, expect_joints=model.n) as link:
        while (s := link.latest()) is None or s.state != 3:  # idle STATEs; a command would feed the watchdog
            time.sleep(0.02)
            assert time.monotonic() < deadline, "the watchdog did not trip"
    refused = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--port", emu.path, "--method", "reference",
                                    "--headless", "--out", str(tmp_path / "c.toml")], capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "not cleared" in refused.stderr, refused.stdout + refused.stderr
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--port", emu.path, "--method", "reference",
                              "--headless", "--yes", "--out", str(tmp_path / "c.toml")], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "cleared the board's FAULT (watchdog)" in r.stdout, r.stdout + r.stderr
