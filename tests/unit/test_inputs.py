"""What users hand in (hil.inputs, hil.motion.bounds): special files are refused without being read
(a FIFO without waiting for a writer, /dev/zero without reading it), files are read with a limit,
array files are checked against their headers before anything is allocated, nesting is bounded,
and every planning input that could make the work large is refused in one line naming the bound."""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import HilError, InputError
from hil.inputs import MAX_NESTING, load_npy, load_npz, parse_json, parse_toml, read_text
from hil.motion import bounds, gcode, path
from hil.motion.keyframes import motion_from_dict
from hil.runtime.motion_sources import make_motion
from hil.runtime.recorder import open_run
from tests.launch import HIL

HUMANOID = robots.load("humanoid17")
PUMA = robots.load("puma560")


@pytest.fixture
def specials(tmp_path):
    """A FIFO, a symlink to /dev/zero and one to /dev/urandom, and a folder, each with a name a
    reader accepts."""
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    zero, rand = tmp_path / "zero.toml", tmp_path / "random.toml"
    zero.symlink_to("/dev/zero")
    rand.symlink_to("/dev/urandom")
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    return {"named pipe": fifo, "character device": zero, "character device ": rand, "folder": folder}


def test_special_files_are_refused_by_every_reader_without_reading_them(specials):
    readers = [lambda p: read_text(p, "motion file"), lambda p: load_npy(p, "recording"),
               lambda p: load_npz(p, "trajectory file"), lambda p: make_motion(p, HUMANOID),
               lambda p: make_motion(p.replace(".toml", ".npz"), HUMANOID)]
    for kind, p in specials.items():
        os.symlink(p, str(p).replace(".toml", ".npz"))   # the same file under the trajectory's suffix
        for read in readers:
            with pytest.raises(HilError, match=kind.strip()):
                read(str(p))
    for kind, p in specials.items():
        with pytest.raises((HilError, ValueError), match=kind.strip() + "|folder|not a regular file"):
            robots.load(str(p))


def test_a_file_is_read_with_a_limit(tmp_path):
    p = tmp_path / "big.nc"
    p.write_bytes(b"G1 X1\n" * 1000)
    assert read_text(str(p), "G-code program", limit=6000).startswith("G1")
    with pytest.raises(InputError, match=r"more than the 0 MiB hil reads as one G-code program; split it"):
        read_text(str(p), "G-code program", limit=5999)


def test_an_npy_whose_header_claims_more_than_the_file_holds_is_refused_before_allocating(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, np.arange(10.0))
    forged = tmp_path / "forged.npy"
    with open(forged, "wb") as f:   # a well-formed header claiming 10¹² rows, then 10 rows
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
        f.write(np.arange(10.0).tobytes())
    assert np.array_equal(load_npy(str(good)), np.arange(10.0))
    with pytest.raises(InputError, match=r"claims 1000000000000 items of 8 bytes, the file holds 10: truncated"):
        load_npy(str(forged))
    rec = tmp_path / "run.npy"
    rec.write_bytes(forged.read_bytes())
    with pytest.raises(InputError, match=r"not a hil recording \(its header claims"):
        open_run(str(rec))


def test_an_npz_whose_arrays_inflate_past_the_limit_is_refused(tmp_path):
    p = tmp_path / "bomb.npz"
    np.savez_compressed(p, t=np.zeros(300_000), q=np.zeros((300_000, 2)))
    assert p.stat().st_size < 50_000
    with pytest.raises(InputError, match=r"inflate to \d+ MiB, more than the 1 MiB"):
        load_npz(str(p), limit=2**20)
    member = tmp_path / "member.npz"      # one member whose header claims more than its own bytes
    np.save(tmp_path / "t.npy", np.zeros(4))
    with zipfile.ZipFile(member, "w") as z:
        z.writestr("t.npy", (tmp_path / "t.npy").read_bytes().replace(b"'shape': (4,)", b"'shape': (4000000000,)"))
    with pytest.raises(InputError, match=r"claims 4000000000 items"):
        load_npz(str(member))
    pickled = tmp_path / "obj.npz"
    np.savez(pickled, t=np.array([object()], dtype=object))
    with pytest.raises(InputError, match=r"Python objects"):
        load_npz(str(pickled))


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 100_000])
def test_nesting_past_the_bound_is_refused_not_recursed_into(depth):
    with pytest.raises(InputError, match=r"nested too deeply"):
        parse_json("[" * depth + "]" * depth, "x.json")
    with pytest.raises(InputError, match=r"nested too deeply"):
        parse_toml("a = " + "[" * depth + "]" * depth, "x.toml")
    assert parse_json(json.dumps([[[1]]]), "x.json") == [[[1]]]


def test_a_recordings_metadata_of_the_wrong_kind_is_refused(tmp_path):
    rec = tmp_path / "run.npy"
    from hil.runtime.recorder import record_dtype

    rows = np.zeros(3, dtype=record_dtype(HUMANOID.n))
    rows["t"] = [0.0, 0.005, 0.01]
    np.save(rec, rows)
    for meta, what in (({"robot": "humanoid17", "rate_hz": float("nan")}, "rate_hz"),
                       ({"robot": "humanoid17", "joints": [1, 2]}, "joints"), ({"robot": 7}, "robot")):
        (tmp_path / "run.npy.json").write_text(json.dumps(meta))
        with pytest.raises(InputError, match=what):
            open_run(str(rec))
    rows["t"] = [0.0, 1e12, 2e12]
    np.save(rec, rows)
    (tmp_path / "run.npy.json").write_text(json.dumps({"robot": "humanoid17"}))
    with pytest.raises(InputError, match=r"span more than"):
        open_run(str(rec))


# ---------------------------------------------------------------- bounds on planned work
def _keyframes(frames: list[dict]) -> dict:
    return {"name": "x", "robot": "humanoid17", "keyframe": frames}


@pytest.mark.parametrize("duration", [1e5, 1e300, float("inf")])
def test_a_keyframe_longer_than_the_bound_is_refused_at_its_keyframe(duration):
    with pytest.raises(HilError, match=r"keyframe 2: it would last .*more than the 600 s hil plans in one go"):
        motion_from_dict(_keyframes([{"duration_s": 1.0}, {"duration_s": duration}]), HUMANOID)


def test_more_keyframes_than_the_bound_are_refused_before_any_is_read():
    frames = [{"duration_s": 0.001, "joints": {"head_yaw": k % 10}} for k in range(bounds.MAX_KEYFRAMES + 1)]
    with pytest.raises(HilError, match=rf"{bounds.MAX_KEYFRAMES + 1} keyframes, more than the"):
        motion_from_dict(_keyframes(frames), HUMANOID)


def test_a_motion_played_too_slowly_is_refused_before_it_is_sampled():
    with pytest.raises(HilError, match=r"wave\.toml at --speed 1e-09: it would last 2\.\d+e\+09 s"):
        make_motion("examples/wave.toml", HUMANOID, speed=1e-9)


def test_a_trajectory_longer_than_the_bound_is_refused(tmp_path):
    p = tmp_path / "long.npz"
    np.savez(p, t=np.array([0.0, 1e6]), q=np.tile(HUMANOID.home, (2, 1)))
    with pytest.raises(HilError, match=r"it would last 1e\+06 s"):
        make_motion(str(p), HUMANOID)
    np.savez(p, t=np.arange(bounds.MAX_SAMPLES + 1) * 1e-4, q=np.zeros((bounds.MAX_SAMPLES + 1, 1)))
    with pytest.raises(HilError, match=rf"{bounds.MAX_SAMPLES + 1} samples, more than the"):
        make_motion(str(p), HUMANOID)


@pytest.mark.parametrize("program,expect", [
    ("G21 G90\nG0 X0 Y0 Z0\nG1 X100 F0.001\n", r"at its feeds: it would last 6e\+06 s"),
    ("G21 G90 G17\nG0 X10 Y0 Z0\nG1 X10 F600\n" + "G2 X10 Y0 I-10 J0\n" * 5000, r"\d+ points along the path"),
    ("G21 G90\nG0 X0 Y0 Z0\nF60000\n" + "".join(f"G1 X{k % 2}\n" for k in range(bounds.MAX_MOVES + 2)),
     rf"more than {bounds.MAX_MOVES} moves"),
])
def test_a_program_too_long_to_plan_is_refused_before_it_is_cut_up(program, expect):
    T = path.placement(200, 500, -300, 0, 0, 0)
    with pytest.raises(HilError, match=expect):
        path.plan_path(PUMA, gcode.parse(program, "p.nc"), T)


def test_a_program_cut_finer_than_the_bound_is_refused_naming_the_chord():
    prog = gcode.parse("G21 G90 G17\nG0 X80 Y0 Z0\nG1 Z0 F6000\n" + "G3 X80 Y0 I-80 J0\n" * 40, "p.nc")
    with pytest.raises(HilError, match=r"points along the path \(at --chord-mm 1e-05\).*raise --chord-mm"):
        path.plan_path(PUMA, prog, path.placement(200, 500, -300, 0, 0, 0), chord_mm=1e-5)


# ---------------------------------------------------------------- garbage that looked like values
def test_a_bool_is_not_a_number_of_degrees_or_seconds():
    with pytest.raises(HilError, match=r"joint r_elbow = True is not a number \(degrees\)"):
        motion_from_dict(_keyframes([{"duration_s": 1.0, "joints": {"r_elbow": True}}]), HUMANOID)
    with pytest.raises(HilError, match=r"needs duration_s \(seconds, a number\), got True"):
        motion_from_dict(_keyframes([{"duration_s": True}]), HUMANOID)
    with pytest.raises(HilError, match=r"joint r_elbow = '10' is not a number"):
        motion_from_dict(_keyframes([{"duration_s": 1.0, "joints": {"r_elbow": "10"}}]), HUMANOID)


def test_a_robot_file_with_a_bool_or_an_absurd_limit_is_refused(tmp_path):
    text = (robots.DATA_DIR / "puma560.toml").read_text()
    p = tmp_path / "p.toml"
    p.write_text(text.replace("scale_m_per_unit = 1.0", "scale_m_per_unit = true") if "scale_m_per_unit = 1.0" in text
                 else text.replace("[robot]", "[robot]\nscale_m_per_unit = true", 1))
    with pytest.raises(HilError, match=r"'scale_m_per_unit' must be a number, got True"):
        robots.load(str(p))
    urdf = tmp_path / "r.urdf"
    urdf.write_text('<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/><inertia ixx="1" '
                    'iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j" type="revolute">'
                    '<parent link="a"/><child link="b"/><axis xyz="0 0 1"/><limit lower="-1e300" upper="1e300" '
                    'effort="1" velocity="1"/></joint></robot>')
    with pytest.raises(HilError, match=r"joint 'j': its range .* goes past ±3600° \(ten turns\)"):
        robots.load(str(urdf))


@pytest.mark.parametrize("was,now,said", [
    ("default_rate_hz = 500", "default_rate_hz = inf", r"\[robot\] default_rate_hz = inf must be a number from 10 to 1000 Hz"),
    ("default_rate_hz = 500", 'default_rate_hz = "fast"', r"\[robot\] default_rate_hz = 'fast' must be a number"),
    ("default_rate_hz = 500", "default_rate_hz = 5", r"\[robot\] default_rate_hz = 5 must be a number from 10 to 1000 Hz"),
    ("reach_m = 1.0", "reach_m = nan", r"\[workspace\] reach_m = nan must be a number from 0.001 to 100 m"),
    ("reach_m = 1.0", "reach = 1.0", r"\[workspace\] has no key 'reach' \(did you mean reach_m\?\)"),
    ("floor_z_m = -0.72", "floor_z_m = true", r"\[robot\] floor_z_m = true must be a number from -10 to 10 m"),
])
def test_a_robot_files_numbers_besides_its_joints_are_checked_where_they_are_read(tmp_path, was, now, said):
    """Our robot TOML and a side file over a URDF or MJCF go through the same check: a loop rate, a
    reach or a floor that is not a usable number, or a key its section does not have (a typo would
    leave the check it meant at its default), named with its section."""
    text = (robots.DATA_DIR / "puma560.toml").read_text()
    assert was in text
    p = tmp_path / "p.toml"
    p.write_text(text.replace(was, now, 1))
    with pytest.raises(HilError, match=rf"{re.escape(str(p))}: {said}"):
        robots.load(str(p))
    side = tmp_path / "side.toml"
    side.write_text('[robot]\nmjcf = "biped6.xml"\n[balance]\nmargin_m = 0.5\n')
    (tmp_path / "biped6.xml").write_bytes((Path(__file__).parent / "mjcf" / "biped6.xml").read_bytes())
    with pytest.raises(HilError, match=r"side.toml: \[balance\] margin_m = 0.5 must be a number from 0 to 0.1 m"):
        robots.load(str(side))


@pytest.mark.parametrize("argv,expect", [
    (["emulate", "--robot", "puma560", "--watchdog-ms", "5"], "--watchdog-ms 5 ms is outside 10 … 1000 ms"),
    (["fk", "--robot", "puma560", "--q-deg", "1e308", "0", "0", "0", "0", "0"], "within ±3600"),
])
def test_numbers_a_command_cannot_use_are_refused_not_ignored(argv, expect, capsys):
    from hil.cli import main

    assert main(argv) == 2
    assert expect in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc: a folder no file can be made in")
def test_an_output_where_no_file_can_be_made_is_refused_before_anything_runs(tmp_path):
    """Permission bits do not say it (root passes them all): a file is tried there, and nothing is
    left behind where one can be made."""
    from hil.inputs import writable_file
    from hil.lerobot import dataset

    with pytest.raises(InputError, match=r"--out /proc/x\.urdf: cannot write there"):
        writable_file("/proc/x.urdf", "--out")
    with pytest.raises(InputError, match="/proc cannot be written"):
        dataset.check_append("/proc/episodes", dataset.Episode(["a"], 30, np.zeros((2, 1)), np.zeros((2, 1)), "t", "r"))
    writable_file(str(tmp_path / "ok.urdf"), "--out")
    assert list(tmp_path.iterdir()) == []
    r = subprocess.run([*HIL, "urdf", "--robot", "puma560", "--out", "/proc/x.urdf"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cannot write there" in r.stderr, r.stderr
