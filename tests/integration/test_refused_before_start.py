"""Each command's refusals that come before anything starts (no emulator, board or loop): one
line on stderr, exit 2. They start no loop, so they run beside the loop tests (tests/conftest.py's
LOOP_CHAINS) while the runs they guard are tested in those chains' modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def test_bad_teleop_requests_are_refused_before_anything_starts(tmp_path):
    not_dataset = tmp_path / "photos"
    not_dataset.mkdir()
    (not_dataset / "x.jpg").write_bytes(b"x")
    for args, message in ((["--robot", "so101", "--record", str(not_dataset)], "not a LeRobot dataset"),
                          (["--robot", "so101", "--hand", "1:2:3"], "--hand '1:2:3'"),
                          (["--robot", "so101", "--leader", "/dev/null"], "--dry-run emulates both arms"),
                          (["--robot", "nope"], "unknown robot 'nope'")):
        r = subprocess.run(HIL + ["teleop", "--dry-run", "--headless", *args], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    r = subprocess.run(HIL + ["teleop", "--robot", "so101", "--leader", "/dev/ttyX", "--follower", "/dev/ttyX"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "the same port" in r.stderr, r.stderr


def test_physics_asks_for_the_dry_run_and_for_mujoco(tmp_path):
    r = subprocess.run(HIL + ["walk", "--physics", "--port", "/dev/null"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--physics" in r.stderr and "--dry-run" in r.stderr, r.stderr
    # a Python whose MuJoCo cannot be imported: one line saying what to install, nothing started
    shim = tmp_path / "shim" / "mujoco"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('no MuJoCo here')\n")
    r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--physics", "--headless"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(shim.parent)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "pip install -e '.[physics]'" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1


def test_a_world_file_that_cannot_be_written_is_said_before_the_pty(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hil.physics.emulate", "--robot", "humanoid17", "--world",
                        str(tmp_path / "missing" / "x.world"), "--", "--kind", "humanoid17"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and not r.stdout, r.stdout + r.stderr
    assert "--world" in r.stderr and "cannot write it" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_request_for_hils_board_too_small_for_the_robot_is_refused_before_anything_starts():
    """A dry run on hil's own board of a robot with more joints than it carries (the CLI chooses a
    servo bus for such a robot: test_bus_runs.py): the request's own refusal, before the CPUs are
    looked at (with two other tests' loops on the CPUs it said `every CPU already runs a hil loop`
    instead)."""
    from hil import robots
    from hil.errors import InputError
    from hil.runtime import supervisor
    from hil.runtime.run_request import RunRequest

    g1 = "examples/robots/g1.toml"
    with pytest.raises(InputError, match="has 29 joints; our protocol carries up to 22"):
        supervisor.check(RunRequest(robot=g1, dry_run=True), robots.load(g1))


@pytest.mark.parametrize("args, what", [(["--rate", "0"], "--rate 0 is outside"),
                                        (["--rate", "nan"], "--rate nan is outside"),
                                        (["--seconds", "-1"], "--seconds -1 is outside"),
                                        (["--json", "/nonexistent/dir/x.json"], "--json /nonexistent/dir/x.json: "
                                                                               "cannot write there"),
                                        (["--dry-run", "--robot", "nosuch"], "unknown robot 'nosuch'")])
def test_bad_settings_are_refused(args, what):
    r = subprocess.run(HIL + ["rt-check", "--seconds", "30", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and what in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "timing floor" not in r.stdout  # refused before measuring


def test_a_port_that_cannot_be_opened_is_named_before_the_timing_is_measured(tmp_path):
    r = subprocess.run(HIL + ["rt-check", "--seconds", "30", "--port", str(tmp_path / "ttyNONE")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"hil rt-check: error: cannot open {tmp_path / 'ttyNONE'}: no such port")
    assert "Traceback" not in r.stderr
    assert "timing floor" not in r.stdout  # failed at once, not after 30 s of measuring


def test_bad_spin_is_refused_before_anything_starts():
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "1",
                              "--spin-us", "-5"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--spin-us -5 is outside 0 … 2000 µs" in r.stderr, r.stdout + r.stderr
    assert "board emulator" not in r.stdout  # refused before the emulator was started


@pytest.mark.parametrize("motion", [[], ["--motion", "demo"], ["--motion", "hold"]])
def test_exit_when_done_with_a_motion_that_never_finishes_is_refused(motion):
    """`hil run --motion demo --exit-when-done` ran until killed: demo and hold never finish."""
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--enable", "--exit-when-done",
                              *motion], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "never finishes" in r.stderr and "--duration" in r.stderr, r.stdout + r.stderr
    assert "board emulator" not in r.stdout


def test_a_missing_or_bad_recording_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY garbage")
    for argv in (["export", str(bad), "--mcap", str(tmp_path / "x.mcap")], ["plot", str(bad)],
                 ["export", str(tmp_path / "none.npy"), "--mcap", str(tmp_path / "x.mcap")],
                 ["export", str(bad), "--mcap", str(tmp_path / "x.txt")]):
        r = subprocess.run(HIL + argv, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip(), (argv, r.stderr)


@pytest.mark.parametrize("args, said", [
    (["play", "examples/so101_pick.toml", "--predict", "4"], "so101 is fixed to the ground and cannot fall"),
    (["walk", "--predict", "0"], "--predict 0 rollouts is outside 1 … 10000"),
    (["walk", "--predict", "many"], "--predict: invalid int value"),
    (["walk", "--predict-falls", "5"], "--predict-falls: only with --predict N"),
    (["walk", "--predict", "2", "--predict-falls", "nan"], "--predict-falls nan: a percentage"),
    (["walk", "--predict", "2", "--predict-falls", "101"], "--predict-falls 101: a percentage"),
])
def test_bad_predict_options_are_one_line_before_any_planning(args, said):
    r = subprocess.run(HIL + list(args), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and said in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "planning" not in r.stdout, r.stdout + r.stderr


def test_a_kit_side_file_without_its_makers_file_says_where_it_goes():
    r = subprocess.run(HIL + ["robots", "--robot", str(ROOT / "examples" / "robots" / "op3.toml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "[robot] mjcf = 'robotis_op3/op3.xml'" in r.stderr and "does not exist" in r.stderr
    assert "side file's comments say where they come from" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("argv", [["walk", "--steps", "0", "--dry-run"], ["play", "examples/bow.toml", "--speed", "2",
                                                                          "--dry-run"],
                                  ["path", "examples/rounded_rect.nc", "--chord-mm", "0", "--dry-run"],
                                  ["run", "--robot", "puma560", "--dry-run", "--rate", "5"],
                                  ["teleop", "--robot", "so101", "--dry-run", "--leader", "/dev/null"]])
def test_an_option_that_needs_no_robot_is_refused_before_the_loop_and_its_kernels_load(argv):
    """The loop's process and Numba's start (a second of CPU) come after what can be said at once."""
    probe = ("import sys; from hil.cli import main; code = main(sys.argv[1:]); "
             "print('numba' in sys.modules, 'hil.runtime.loop' in sys.modules); sys.exit(code)")
    r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout.split() == ["False", "False"], r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
