"""Generated hostile inputs of every kind through every command that reads them (tests/hostile.py):
no traceback, no hang, no case past its memory bound, no garbage accepted; each refusal one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_hostile_inputs_of_every_kind_get_one_clean_line_each(tmp_path):
    out = tmp_path / "results.json"
    r = subprocess.run([sys.executable, "-m", "tests.hostile", "--cases", "150", "--seed", "7", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    data = json.loads(out.read_text())
    fig, results = data["figures"], data["results"]
    assert fig["failures"] == [] and r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    kinds = {res["kind"] for res in results}
    assert kinds >= {"motion", "trajectory", "gcode", "urdf", "mjcf", "side", "robot", "board", "lerobot",
                     "recording", "numbers"}
    for res in results:
        assert res["code"] in (0, 2), res
        if res["code"] == 2:   # one line, naming what (a file's path, an option, or a robot's part)
            assert res["last_line"].startswith("hil ") and ": error: " in res["last_line"], res
