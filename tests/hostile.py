"""Hostile inputs for every file hil reads and every command that reads one: generated (seeded),
then run through the command line itself, one forked child per case, each with a memory and a
time bound, so that a case that tracebacks, hangs, grows without bound or is accepted as valid
shows as such.

`python -m tests.hostile --cases N --out RESULTS.json` runs N cases (about N / 9 of each kind) and
prints the figures benchmarks/README.md quotes; tests/unit/test_hostile_inputs.py runs a smaller
set in the suite. Kinds: motion files (TOML, JSON), trajectory files (.npz), G-code programs,
URDF files, robot and side files (TOML), board configs, LeRobot calibration files, recordings
(.npy and their .json), command-line numbers.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 60.0                 # a case still running after this long is a hang
MEMORY_BOUND_MB = 1024.0      # what one case may add to the process, at most
WEIRD_NUMBERS = ["nan", "inf", "-inf", "1e308", "-1e308", "1e-320", "0", "-0", "1e30", "99999999999999999999",
                 "true", "\"12\"", "[]", "{}", "-1", "3.5e9"]


@dataclass
class Case:
    kind: str
    name: str
    argv: list[str]
    invalid: bool = True      # known to be garbage: must not be accepted (exit 0)
    files: dict = field(default_factory=dict)   # written before the case runs: path → bytes


@dataclass
class Result:
    kind: str
    name: str
    code: int                 # the command's exit code; -1 a hang, -2 killed by a signal
    seconds: float
    added_mb: float           # peak memory the case added over the runner's own
    traceback: bool
    last_line: str
    accepted_garbage: bool


# ---------------------------------------------------------------- what valid files look like
# a side file over an MJCF with every table it may hold (the MJCF is written beside each case)
SIDE_FILE = """[robot]
name = "sidebiped"
mjcf = "biped6.xml"
kind = "humanoid"
description = "the six-joint biped, every side-file table"
default_rate_hz = 250

[joints.l_knee]
lower_deg = 0
upper_deg = 120
velocity_deg_s = 300
acceleration_deg_s2 = 3000

[poses]
home = { l_hip_pitch = -20, l_knee = 40, l_ankle = -20, r_hip_pitch = -20, r_knee = 40, r_ankle = -20 }
crouch = { l_hip_pitch = -30, l_knee = 60, l_ankle = -30, r_hip_pitch = -30, r_knee = 60, r_ankle = -30 }

[soles]
left = "l_foot"
right = "r_foot"

[[frame]]
name = "camera"
link = "head"
translation = [0.02, 0.0, 0.03]
rpy_deg = [0, 10, 0]

[balance]
margin_m = 0.005

[workspace]
reach_m = 1.0

[collision]
allowed = [["l_thigh", "r_thigh"]]

[servo]
preset = "XL430-W250"
compensation_margin = 1.5

[servo.joint.l_knee]
torque_limit_nm = 2.0
"""


def _valid_sources() -> dict[str, bytes]:
    """A valid file of each text kind, the seed the mutations start from."""
    erd = _example_robot_data()
    so101_urdf = (Path(erd) / "robots/so_arm_description/urdf/so101.urdf").read_bytes() if erd else b""
    return {
        "motion.toml": (ROOT / "examples/wave.toml").read_bytes(),
        "program.nc": (ROOT / "examples/semicircle.nc").read_bytes(),
        "robot.toml": (ROOT / "hil/robots/data/puma560.toml").read_bytes(),
        "board.toml": (ROOT / "hil/robots/data/boards/so101-feetech.toml").read_bytes(),
        "geared.toml": (ROOT / "tests/unit/mjcf/transmissions-dynamixel2.toml").read_bytes(),   # servos on gears
        "robot.urdf": so101_urdf,
        "robot.xml": (ROOT / "tests/unit/mjcf/op3like.xml").read_bytes(),
        "transmissions.xml": (ROOT / "tests/unit/mjcf/transmissions.xml").read_bytes(),   # linkage, differential
        "side.toml": SIDE_FILE.encode(),
        "lerobot.json": json.dumps({name: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1000,
                                           "range_max": 3000}
                                    for i, name in enumerate(("shoulder_pan", "shoulder_lift", "elbow_flex",
                                                              "wrist_flex", "wrist_roll", "gripper"))}).encode(),
    }


def _example_robot_data() -> str | None:
    for p in sys.path:
        share = Path(p) / "cmeel.prefix" / "share" / "example-robot-data"
        if share.is_dir():
            return str(share)
    return None


def _command(kind: str, path: str, scratch: str) -> list[str]:
    """The command that reads a file of this kind and starts nothing (plans, converts, draws)."""
    return {
        "motion": ["play", path, "--robot", "humanoid17"],
        "trajectory": ["play", path, "--robot", "humanoid17"],
        "gcode": ["path", path],
        "urdf": ["robots", "--robot", path],
        "mjcf": ["robots", "--robot", path],
        "side": ["robots", "--robot", path],
        "robot": ["robots", "--robot", path],
        "board": ["calibrate", "--robot", "so101", "--bus", "feetech", "--board-config", path, "--export-lerobot",
                  os.path.join(scratch, "out.json")],
        "geared": ["calibrate", "--robot", str(ROOT / "tests/unit/mjcf/transmissions.xml"), "--bus", "dynamixel2",
                   "--board-config", path, "--export-lerobot", os.path.join(scratch, "out.json")],
        "lerobot": ["calibrate", "--robot", "so101", "--bus", "feetech", "--import-lerobot", path, "--out",
                    os.path.join(scratch, "out.toml")],
        "recording": ["plot", path, "--out", os.path.join(scratch, "out.png")],
    }[kind]


# ---------------------------------------------------------------- mutations
def _mutations(data: bytes, rng: np.random.Generator, count: int) -> list[tuple[str, bytes, bool]]:
    """(name, bytes, known invalid) variants of a valid text file."""
    out: list[tuple[str, bytes, bool]] = []
    text = data.decode("utf-8", "replace")
    numbers = [m for m in _number_spans(text)]
    for k in range(count):
        how = k % 7
        if how == 0 and numbers:
            a, b = numbers[int(rng.integers(len(numbers)))]
            weird = WEIRD_NUMBERS[int(rng.integers(len(WEIRD_NUMBERS)))]
            out.append((f"number→{weird}", (text[:a] + weird + text[b:]).encode(), weird in ("nan", "inf", "-inf")))
        elif how == 1:
            cut = int(rng.integers(1, max(2, len(data))))
            out.append((f"cut at {cut}", data[:cut], False))
        elif how == 2:
            b = bytearray(data)
            for _ in range(int(rng.integers(1, 20))):
                b[int(rng.integers(len(b)))] = int(rng.integers(256))
            out.append(("bytes flipped", bytes(b), False))
        elif how == 3:
            lines = text.splitlines(keepends=True)
            if lines:
                i = int(rng.integers(len(lines)))
                lines.insert(i, lines[i] * int(rng.integers(2, 50)))
            out.append(("a line repeated", "".join(lines).encode(), False))
        elif how == 4:
            out.append(("random bytes", rng.integers(0, 256, int(rng.integers(1, 3000)), dtype=np.uint8).tobytes(), True))
        elif how == 5:
            out.append(("nested", (text + "\nx = " + "[" * 5000 + "]" * 5000 + "\n").encode(), True))
        else:
            out.append(("empty", b"", True))
    return out


def _number_spans(text: str) -> list[tuple[int, int]]:
    """Where the numbers are that a reader reads: not in a comment (TOML's #, G-code's ( ) and ;,
    XML's <!-- -->), where a changed number changes nothing, nor inside a name ("3d_printed")."""
    import re

    blank = re.sub(r"<!--.*?-->|\(.*?\)|[#;][^\n]*", lambda m: " " * len(m.group(0)), text, flags=re.S)
    return [m.span() for m in re.finditer(r"(?<![\w.])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![A-Za-z_])", blank)]


# ---------------------------------------------------------------- binary kinds
def _trajectories(rng: np.random.Generator, count: int) -> list[tuple[str, bytes, bool]]:
    from hil import robots

    m = robots.load("humanoid17")
    out = []
    for k in range(count):
        t = np.arange(0.0, 2.0, 0.005)
        q = np.tile(m.home, (len(t), 1))
        how = k % 8
        buf = io.BytesIO()
        if how == 0:   # a joint far past its range
            j = int(rng.integers(m.n))
            q[:, j] = m.upper[j] + np.radians(float(rng.uniform(5, 500))) * np.clip(t / 1.5, 0, 1)
            np.savez(buf, t=t, q=q)
        elif how == 1:   # NaN somewhere
            q[int(rng.integers(len(t))), int(rng.integers(m.n))] = np.nan
            np.savez(buf, t=t, q=q)
        elif how == 2:   # a jump
            q[len(t) // 2:, int(rng.integers(m.n))] += 0.5
            np.savez(buf, t=t, q=q)
        elif how == 3:   # times backwards, or enormous
            np.savez(buf, t=t[::-1] if rng.integers(2) else t * 1e12, q=q)
        elif how == 4:   # the wrong joint count
            np.savez(buf, t=t, q=q[:, :int(rng.integers(1, m.n))])
        elif how == 5:   # an inflating member
            np.savez_compressed(buf, t=np.zeros(3_000_000), q=np.zeros((3, m.n)))
        elif how == 6:   # objects
            np.savez(buf, t=np.array([object()], dtype=object), q=q)
        else:   # bytes
            buf.write(rng.integers(0, 256, int(rng.integers(1, 5000)), dtype=np.uint8).tobytes())
        out.append((f"trajectory #{how}", buf.getvalue(), True))
    return out


def _recordings(rng: np.random.Generator, count: int) -> list[tuple[str, bytes, bytes | None, bool]]:
    """(name, .npy bytes, .json bytes or None, known invalid)."""
    from hil.runtime.recorder import record_dtype

    out = []
    for k in range(count):
        rows = np.zeros(200, dtype=record_dtype(17))
        rows["t"] = np.arange(200) * 0.005
        meta: object = {"robot": "humanoid17", "rate_hz": 200.0}
        how = k % 7
        buf = io.BytesIO()
        if how == 0:   # a header claiming 10¹² rows
            np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(rows.dtype),
                                                       "fortran_order": False, "shape": (10**12,)})
            buf.write(rows.tobytes())
        elif how == 1:
            rows["t"] *= 1e12
            np.save(buf, rows)
        elif how == 2:
            meta = {"robot": "humanoid17", "rate_hz": float("nan")}
            np.save(buf, rows)
        elif how == 3:
            meta = None
            np.save(buf, rows)
            out.append(("deep json", buf.getvalue(), ("[" * 100000 + "]" * 100000).encode(), True))
            continue
        elif how == 4:
            rows["q_cmd"][5, 3] = np.nan
            np.save(buf, rows)
        elif how == 5:
            np.save(buf, rows[:0])
        else:
            buf.write(rng.integers(0, 256, int(rng.integers(1, 4000)), dtype=np.uint8).tobytes())
        out.append((f"recording #{how}", buf.getvalue(), json.dumps(meta).encode(), True))
    return out


def _numbers(count: int) -> list[Case]:
    out = []
    for k in range(count):
        weird = WEIRD_NUMBERS[k % len(WEIRD_NUMBERS)]
        argv = [["walk", "--stride", weird], ["walk", "--period", weird], ["path", "examples/rounded_rect.nc",
                                                                           "--chord-mm", weird],
                ["path", "examples/rounded_rect.nc", "--place", f"{weird},500,-300,0,0,0"],
                ["play", "examples/wave.toml", "--speed", weird], ["fk", "--robot", "puma560", "--q-deg", weird,
                                                                   "0", "0", "0", "0", "0"]][k % 6]
        plausible = weird in ("0", "-0", "-1", "3.5e9", "1e30", "1e-320")
        out.append(Case("numbers", f"{' '.join(argv[:2])} … {weird}", argv, invalid=not plausible))
    return out


# ---------------------------------------------------------------- all the cases
def cases(total: int, folder: str, seed: int = 1) -> list[Case]:
    """About `total` cases of every kind, their files to be written under `folder`."""
    rng = np.random.default_rng(seed)
    text_kinds = [("motion", "motion.toml", ".toml"), ("gcode", "program.nc", ".nc"), ("robot", "robot.toml", ".toml"),
                  ("board", "board.toml", ".toml"), ("geared", "geared.toml", ".toml"),
                  ("urdf", "robot.urdf", ".urdf"), ("mjcf", "robot.xml", ".xml"),
                  ("mjcf", "transmissions.xml", ".xml"),
                  ("side", "side.toml", ".toml"), ("lerobot", "lerobot.json", ".json")]
    # as many of each kind: the text kinds, trajectories, recordings and numbers (the special files besides)
    per = max(1, total // (len(text_kinds) + 3))
    valid = _valid_sources()
    out: list[Case] = []
    for kind, source, suffix in text_kinds:
        if not valid[source]:
            continue
        for k, (name, data, invalid) in enumerate(_mutations(valid[source], rng, per)):
            path = os.path.join(folder, f"{kind}-{Path(source).stem}-{k}{suffix}")
            files = {path: data}
            if kind == "side":   # the MJCF it names, beside it
                files[os.path.join(folder, "biped6.xml")] = (ROOT / "tests/unit/mjcf/biped6.xml").read_bytes()
            out.append(Case(kind, name, _command(kind, path, folder), invalid, files))
    for k, (name, data, invalid) in enumerate(_trajectories(rng, per)):
        path = os.path.join(folder, f"trajectory-{k}.npz")
        out.append(Case("trajectory", name, _command("trajectory", path, folder), invalid, {path: data}))
    for k, (name, data, meta, invalid) in enumerate(_recordings(rng, per)):
        path = os.path.join(folder, f"recording-{k}.npy")
        files = {path: data}
        if meta is not None:
            files[path + ".json"] = meta
        out.append(Case("recording", name, _command("recording", path, folder), invalid, files))
    for kind, suffix in (("motion", ".toml"), ("gcode", ".nc"), ("board", ".toml"), ("recording", ".npy")):
        for special in ("fifo", "zero", "folder"):
            path = os.path.join(folder, f"special-{kind}-{special}{suffix}")
            out.append(Case(kind, f"a {special}", _command(kind, path, folder), True, {path: special}))
    out += _numbers(per)
    return out


def _write(files: dict) -> None:
    for path, data in files.items():
        if data == "fifo":
            os.mkfifo(path)
        elif data == "zero":
            os.symlink("/dev/zero", path)
        elif data == "folder":
            os.mkdir(path)
        else:
            Path(path).write_bytes(data)


# ---------------------------------------------------------------- running them
def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_case(case: Case, main) -> Result:
    """One case in a forked child: its exit code, time, and the peak memory it added."""
    _write(case.files)
    err = tempfile.TemporaryFile()
    base = _rss_mb()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:   # the child: the command, with stdout and stderr to the file, and an alarm
        code = 70
        try:
            os.dup2(err.fileno(), 2)
            os.dup2(err.fileno(), 1)
            signal.alarm(int(HANG_S))
            code = main(case.argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        except BaseException:   # noqa: BLE001 - printed as a traceback, counted as one
            import traceback

            traceback.print_exc()
            code = 70
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code if isinstance(code, int) else 70)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code == -signal.SIGALRM:
        code = -1
    elif code < 0:
        code = -2
    err.seek(0)
    said = err.read().decode("utf-8", "replace")
    lines = [line for line in said.strip().splitlines() if line.strip()]
    return Result(case.kind, case.name, code, round(seconds, 3), round(max(usage.ru_maxrss / 1024 - base, 0.0), 1),
                  "Traceback (most recent call last)" in said, lines[-1][:300] if lines else "",
                  case.invalid and code == 0)


def run_all(total: int, seed: int = 1) -> list[Result]:
    """Every case, after the kernels are compiled (or loaded from the cache) and the shipped robots
    loaded once here: each case then measures what it does itself, not the first run's compile."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
    from hil.process_life import start_command_process

    start_command_process()   # each case is a command's process (forked from this one): collected as one
    from hil import robots
    from hil.cli import main
    from hil.warmup import compile_all

    compile_all()
    for name in ("humanoid17", "puma560", "so101"):
        robots.load(name)
    with tempfile.TemporaryDirectory(prefix="hil-hostile-") as folder:
        os.chdir(ROOT)
        return [run_case(c, main) for c in cases(total, folder, seed)]


def figures(results: list[Result]) -> dict:
    bad = [r for r in results if r.traceback or r.code < 0 or r.code not in (0, 1, 2) or r.accepted_garbage
           or r.added_mb > MEMORY_BOUND_MB]
    return {"cases": len(results), "clean_errors": sum(r.code == 2 and not r.traceback for r in results),
            "accepted": sum(r.code == 0 for r in results), "tracebacks": sum(r.traceback for r in results),
            "hangs": sum(r.code == -1 for r in results), "accepted_garbage": sum(r.accepted_garbage for r in results),
            "over_memory_bound": sum(r.added_mb > MEMORY_BOUND_MB for r in results),
            "worst_seconds": max((r.seconds for r in results), default=0.0),
            "worst_added_mb": max((r.added_mb for r in results), default=0.0), "failures": [asdict(r) for r in bad]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.hostile", description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="write every result as JSON here")
    args = p.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    results = run_all(args.cases, args.seed)
    fig = figures(results)
    if args.out:
        Path(args.out).write_text(json.dumps({"figures": fig, "results": [asdict(r) for r in results]}, indent=1))
    print(json.dumps({k: v for k, v in fig.items() if k != "failures"}))
    for f in fig["failures"]:
        print("FAILED:", json.dumps(f))
    return 1 if fig["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
