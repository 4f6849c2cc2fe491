"""A whole run on the C firmware's host build: `hil play --dry-run --emulator c` (the loop, its
port process and the C board, each in its own process). It starts a real-time loop (see
`LOOP_MODULES` in conftest.py); the firmware's own tests are in test_c_firmware.py."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from hil.robots import load
from hil.runtime.recorder import load_recording
from tests.conftest import HAVE_C_TOOLS, motion_clock, played_motion
from tests.launch import HIL

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAVE_C_TOOLS, reason="the C firmware's host build needs make and gcc "
                                                          "(apt-get install -y make gcc)")]


def test_a_motion_plays_to_the_end_on_the_c_board(tmp_path):
    """`--dry-run --emulator c`: the whole run (loop, port process, twin-less) on the C firmware."""
    rec = tmp_path / "wave.npy"
    r = subprocess.run([*HIL, "play", "examples/wave.toml", "--robot", "humanoid17",
                        "--dry-run", "--emulator", "c", "--headless", "--record", str(rec)],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(the C firmware)" in r.stdout and "motion 'wave' done" in r.stdout
    data, meta = load_recording(str(rec))
    motion = played_motion("examples/wave.toml", load("humanoid17"))
    clock = motion_clock(data, meta["rate_hz"])
    for k in motion.keyframes[1:]:
        near = np.abs(clock - k.time_s) < 0.1
        assert np.abs(data["q_meas"][near] - k.q).min(axis=0).max() < np.radians(2)
