"""The ways hil is started: the `hil` script, `python -m hil` and `python -m hil.cli`."""

from __future__ import annotations

import subprocess
import sys

import hil


def test_python_dash_m_hil_is_the_cli():
    for argv in ([sys.executable, "-m", "hil", "--version"], [sys.executable, "-m", "hil.cli", "--version"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == f"hil {hil.__version__}", r.stdout + r.stderr
