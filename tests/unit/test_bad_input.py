"""Any byte sequence in any input file, and any number on the command line, ends in one error that
names the file — never another exception. Property tests (hypothesis) per parser."""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hil.robots as robots
from calibration import procedures
from hil import calibration_files
from hil.cli.common import floats
from hil.errors import HilError
from hil.inputs import number
from hil.motion import gcode
from hil.motion.keyframes import load_motion
from hil.runtime.motion_sources import make_motion
from hil.runtime.recorder import load_recording
from tests.launch import HIL

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
HUMANOID = robots.load("humanoid17")
GCODE_ALPHABET = "GMXYZIJKRFN0123456789.-+ ()%;\n\tgxyz"


def written(data: bytes, suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def refused_cleanly(fn, *args) -> None:
    """`fn(*args)` either succeeds or raises a HilError (the project's own, with its message)."""
    try:
        fn(*args)
    except HilError as e:
        assert str(e), "an error without a message"


@SETTINGS
@given(st.binary(max_size=400))
def test_gcode_from_any_bytes(data):
    path = written(data, ".nc")
    try:
        from hil.inputs import read_text

        refused_cleanly(lambda: gcode.parse(read_text(path, "G-code program"), path))
    finally:
        os.unlink(path)


@SETTINGS
@given(st.text(alphabet=GCODE_ALPHABET, max_size=300))
def test_gcode_from_any_text_of_gcode_characters(text):
    refused_cleanly(gcode.parse, text, "prog.nc")


@SETTINGS
@given(st.one_of(st.binary(max_size=400), st.text(max_size=300).map(str.encode)))
def test_motion_files_from_any_bytes(data):
    for suffix in (".toml", ".json"):
        path = written(data, suffix)
        try:
            refused_cleanly(load_motion, path, HUMANOID)
        finally:
            os.unlink(path)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["name", "robot", "interpolation", "dynamic", "keyframe", "start_pose"]),
                       st.recursive(st.one_of(st.none(), st.booleans(), st.floats(), st.text(max_size=8),
                                              st.integers()),
                                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c,
                                                                                        max_size=3), max_leaves=8)))
def test_motion_files_from_any_json_structure(data):
    path = written(json.dumps(data).encode(), ".json")
    try:
        refused_cleanly(load_motion, path, HUMANOID)
    finally:
        os.unlink(path)


@SETTINGS
@given(st.dictionaries(st.text(max_size=12), st.one_of(st.floats(), st.integers(), st.text(max_size=5),
                                                        st.dictionaries(st.text(max_size=5), st.floats(), max_size=2)),
                       max_size=4))
def test_calibration_joint_tables_of_any_shape(joints):
    body = "format_version = 1\nrobot = \"humanoid17\"\n[joints]\n" + "".join(
        f"{json.dumps(k)} = {json.dumps(v) if not isinstance(v, dict) else '{' + ', '.join(f'{json.dumps(a)} = {json.dumps(b)}' for a, b in v.items()) + '}'}\n"
        for k, v in joints.items())
    path = written(body.replace("NaN", "nan").replace("Infinity", "inf").encode(), ".toml")
    try:
        refused_cleanly(calibration_files.load, path, HUMANOID)
    finally:
        os.unlink(path)


@SETTINGS
@given(st.binary(max_size=600))
def test_recordings_and_trajectories_from_any_bytes(data):
    for suffix in (".npy", ".npz"):
        path = written(data, suffix)
        try:
            if suffix == ".npy":
                try:
                    load_recording(path)
                except ValueError as e:  # the replay command turns this into its InputError
                    assert str(e)
            else:
                refused_cleanly(make_motion, path, HUMANOID)
        finally:
            os.unlink(path)


def test_a_valid_npy_that_is_not_a_recording_is_refused(tmp_path):
    for array in (np.zeros(5), np.zeros((3, 3)), np.zeros(2, dtype=[("t", "f8")])):
        np.save(tmp_path / "x.npy", array)
        with pytest.raises(ValueError, match="fields|malformed"):
            load_recording(str(tmp_path / "x.npy"))


FILE_READERS = {"calibration": (".toml", lambda path: calibration_files.load(path, HUMANOID)),
                "pose": (".csv", lambda path: procedures.load_pose_file(path, 6)),
                "robot": (".toml", robots.load)}


@pytest.mark.parametrize("what", list(FILE_READERS))
@SETTINGS
@given(data=st.binary(max_size=400))
def test_files_from_any_bytes(what, data):
    suffix, reader = FILE_READERS[what]
    path = written(data, suffix)
    try:
        refused_cleanly(reader, path)
    finally:
        os.unlink(path)


@SETTINGS
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10), st.integers()))
def test_numbers_on_the_command_line(value):
    try:
        v = number(value, "--rate", 10, 1000, "Hz")
    except HilError as e:
        assert "--rate" in str(e)
    else:
        assert 10 <= v <= 1000


@SETTINGS
@given(st.text(max_size=40))
def test_comma_separated_numbers(text):
    try:
        vals = floats(text, 6, "--place")
    except HilError as e:
        assert "--place" in str(e)
    else:
        assert len(vals) == 6 and all(np.isfinite(vals))


@pytest.mark.parametrize("kind", ["a file", "a missing parent", "open to others"])
def test_a_loop_folder_that_is_not_private_is_refused_naming_the_variable(kind, tmp_path, monkeypatch):
    from hil.runtime.shared import runtime_dir

    path = tmp_path / "loops"
    if kind == "a file":
        path.write_text("")
    elif kind == "a missing parent":
        path = tmp_path / "no" / "loops"
    else:
        path.mkdir(mode=0o777)
        path.chmod(0o777)
    monkeypatch.setenv("HIL_RUNTIME_DIR", str(path))
    with pytest.raises(HilError) as e:
        runtime_dir()
    assert str(path) in str(e.value) and "HIL_RUNTIME_DIR" in str(e.value), e.value
    assert (not path.exists()) if kind == "a missing parent" else path.exists()   # nothing removed
    monkeypatch.setenv("HIL_RUNTIME_DIR", str(tmp_path / "fresh"))
    assert runtime_dir() == str(tmp_path / "fresh") and (os.stat(runtime_dir()).st_mode & 0o777) == 0o700


@pytest.mark.parametrize("argv,said", [
    (["run", "--robot", "puma560", "--dry-rn"], "hil run: error: unrecognized arguments: --dry-rn (--dry-rn: did you mean --dry-run?)"),
    (["run", "--robto", "puma560"], "required: --robot (--robto: did you mean --robot?)"),
    (["rnu"], "invalid choice: 'rnu'"),
    (["rnu"], "(did you mean run?)"),
    (["run", "--robot", "puma56", "--dry-run"], "unknown robot 'puma56' (did you mean puma560?)"),
    (["fk", "--robot", "puma560", "--pose", "rdy"], "unknown pose 'rdy' (did you mean ready?)"),
    (["emulate", "--robot", "humanoid17", "--offsets-deg", "l_kne=2"], "'l_kne' is not a joint of humanoid17 (did you "
                                                                       "mean l_knee"),
])
def test_a_mistyped_command_option_robot_pose_or_joint_is_answered_with_what_was_meant(argv, said):
    import subprocess

    r = subprocess.run([*HIL, *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("argv,named", [
    (["run", "--robot", "puma560", "--dry-run", "--duration", "1", "--record", ""], "--record ''"),
    (["run", "--robot", "puma560", "--dry-run", "--duration", "1", "--calibration", ""], "--calibration ''"),
    (["walk", "--steps", "1", "--out", ""], "--out ''"),
    (["export", "run.npy", "--lerobot", ""], "--lerobot ''"),
    (["urdf", "--robot", "puma560", "--out", ""], "--out ''"),
    (["play", ""], "FILE ''"),
    (["run", "--robot", "puma560", "--dry-run", "--zenoh", ""], "unrecognized arguments: ''"),
])
def test_an_empty_value_is_said_not_taken_for_the_option_left_out(argv, named):
    """`--record "$OUT"` with OUT unset ran without a recording and said nothing; `export --lerobot ''`
    was a traceback."""
    import subprocess

    r = subprocess.run([*HIL, *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and named in r.stderr and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "board emulator" not in r.stdout and "<robot" not in r.stdout, r.stdout


@pytest.mark.parametrize("argv,said", [
    (["walk", "--steps", "1", "--stride", "-inf"], "--stride -inf: must be a finite number"),
    (["walk", "--steps", "1", "--side", "-1e400"], "--side -inf: must be a finite number"),
    (["run", "--robot", "puma560", "--dry-run", "--duration", "-1e-3"], "--duration -0.001 s is outside"),
])
def test_a_negative_number_in_any_notation_is_a_value_not_an_option(argv, said):
    """argparse takes -5 and -0.5 for values but -1e-3 and -inf for options (`expected one argument`)."""
    import subprocess

    r = subprocess.run([*HIL, *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr and "expected one argument" not in r.stderr, r.stderr


def test_a_walk_sideways_in_metres_written_with_an_exponent_plans():
    from hil.cli import build_parser

    args = build_parser().parse_args(["walk", "--side", "-1e-2", "--stride", "0"])
    assert args.side == -0.01


def test_a_twin_path_file_that_is_not_a_planned_path_is_refused_before_any_window(tmp_path):
    """`hil twin --path FILE` read the file with NumPy after its window had opened: a file of other
    bytes, or one without a planned path, was a traceback (or nothing drawn, said nowhere)."""
    import subprocess

    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"\x93NUMPY not really")
    walk = tmp_path / "walk.npz"
    np.savez(walk, t=np.zeros(3), q=np.zeros((3, 6)))
    nan = tmp_path / "nan.npz"
    np.savez(nan, p_prog=np.array([[0.0, 0.0, np.nan]]))
    tilted = tmp_path / "workpiece.npz"
    np.savez(tilted, p_prog=np.zeros((2, 3)), workpiece_T=np.eye(3), workpiece_half=np.ones(3))
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}   # refused before it would look for one
    for path, said in ((garbage, "not an .npz archive"), (tmp_path / "none.npz", "No such file"),
                       (walk, "holds no planned path"), (nan, "holds no planned path"),
                       (tilted, "its workpiece is not a 4 × 4 pose")):
        r = subprocess.run([*HIL, "twin", "--robot", "puma560", "--screenshot", str(tmp_path / "x.png"), "--path",
                            str(path)], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2 and f"--path {path}" in r.stderr and said in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "no display" not in r.stderr, r.stderr


def test_an_eeprom_file_that_the_emulator_did_not_write_is_refused_and_kept(tmp_path):
    """`hil emulate --bus … --eeprom FILE` read any file it could not parse as empty servos and
    overwrote it at the first save (a user's own JSON, gone); a FIFO hung it."""
    import subprocess

    mine = tmp_path / "mine.json"
    mine.write_text('{"important": "data"}')
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, said in ((mine, "key 'important' is not a servo"), (binary, "not a servos' EEPROM file"),
                       (fifo, "not a regular file"), (tmp_path, "not a regular file")):
        before = path.read_bytes() if path.is_file() else None
        r = subprocess.run([*HIL, "emulate", "--robot", "so101", "--bus", "feetech", "--eeprom", str(path)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and f"--eeprom {path}" in r.stderr and said in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout, r.stdout + r.stderr
        assert before is None or path.read_bytes() == before


def test_a_fifo_as_an_output_file_is_written_while_read_and_refused_before_the_run_when_not(tmp_path):
    """`--stats-json FIFO` hung before the run when nothing read the FIFO (the check's open waited
    for a reader), and a reader took the check's close for the end of its input, so the run's
    own write hung at its end; `--record FIFO` ran the robot, then failed (a recording is updated
    in place)."""
    import subprocess
    import threading

    fifo = tmp_path / "stats.fifo"
    os.mkfifo(fifo)
    # (no CPU of its own: this file's tests run beside the loop tests, which hold the CPUs)
    run = [*HIL, "run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "0.3", "--no-realtime"]
    for extra, said in ((["--stats-json", str(fifo)], "a FIFO no process reads"),
                        (["--record", str(fifo)], "not a regular file")):
        r = subprocess.run(run + extra, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and said in r.stderr and "board emulator" not in r.stdout, r.stdout + r.stderr
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = subprocess.run(run + ["--stats-json", str(fifo)], capture_output=True, text=True, timeout=60)
    reader.join(timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert got and json.loads(got[0])["robot"] == "puma560", got


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_an_integer_no_float_holds_is_one_clear_error_naming_the_file(tmp_path, suffix):
    """TOML's parser and JSON's take integers of any length; a 400-digit one failed wherever it was
    turned into a float (an OverflowError traceback from a keyframe's angle)."""
    huge = "9" * 400
    path = tmp_path / f"motion{suffix}"
    path.write_text(f'name = "x"\nrobot = "humanoid17"\n[[keyframe]]\nduration_s = 1.0\njoints = {{ r_elbow = {huge} }}\n'
                    if suffix == ".toml" else
                    f'{{"name": "x", "robot": "humanoid17", "keyframe": [{{"duration_s": 1.0, "joints": {{"r_elbow": {huge}}}}}]}}')
    with pytest.raises(HilError, match=r"motion.*: the integer 999999999999… \(400 digits\) is too large"):
        load_motion(str(path), robots.load("humanoid17"))
