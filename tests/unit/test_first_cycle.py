"""A real-time cycle loads nothing: every compiled kernel the controller calls is loaded before the
first cycle. A kernel loaded lazily stands the cycle still for its load (tens of ms, past the
board's 50 ms command watchdog with what follows), as the first IMU reading of a humanoid in
physics once did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# in a process of its own: this test's process may have loaded every kernel already
SCRIPT = """
import types
import numpy as np
import numba.core.caching as caching
import hil.robots as robots
from hil.runtime.controller import Controller, Policy
from hil.runtime.motion_sources import Hold
from hil.safety import SafetyChecker

model = robots.load("humanoid17")
ctl = Controller(model, SafetyChecker(model), Hold(), Policy(0.005), lambda text: None)
ctl.begin(model.home.copy(), motion_run=False)
loads = []
real = caching.Cache.load_overload
caching.Cache.load_overload = lambda self, *a, **k: loads.append(self._name) or real(self, *a, **k)
n = model.n
for k in range(3):
    imu = types.SimpleNamespace(quat=np.array([1.0, 0.0, 0.0, 0.0]), gyro=np.zeros(3), acc=np.array([0.0, 0.0, 9.81]))
    s = types.SimpleNamespace(t_host=1.0 + 0.005 * k, state=1, q=model.home.copy(), faults=0, seq=k, t_board_us=0,
                              qd=np.zeros(n), current_mA=np.zeros(n), imu=imu)
    ctl.cycle(1.0 + 0.005 * k, s, 0)
print("LOADS", loads)
"""


def test_a_humanoids_first_imu_reading_loads_no_kernel_in_the_cycle():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("LOADS")][-1]
    assert line == "LOADS []", f"kernels loaded inside real-time cycles: {line}"
