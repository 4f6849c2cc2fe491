"""The ways hil is started: the `hil` script, `python -m hil` and `python -m hil.cli`."""

from __future__ import annotations

import subprocess
import sys

import hil


def test_python_dash_m_hil_is_the_cli():
    for argv in ([sys.executable, "-m", "hil", "--version"], [sys.executable, "-m", "hil.cli", "--version"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == f"hil {hil.__version__}", r.stdout + r.stderr


def test_the_parser_is_built_without_the_kernels():
    """`hil --help`, `hil ctl` and the start of every run build the whole parser: it loads neither
    Numba nor the robots nor the loop (a second of every command's start, before anything it was
    asked), only what the options are declared with; nor does `hil ctl status` reading a loop's
    run card, nor the look at the kernel cache before a run (is it cold?)."""
    code = ("import sys; import hil.cli as c; c.build_parser(); import hil.runtime.run_card, hil.cli.ctl_status; "
            "import hil.warmup; hil.warmup.cache_is_cold(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'mujoco', 'dearpygui') "
            "or m.startswith(('hil.robots', 'hil.kinematics', 'hil.runtime.loop', 'hil.runtime.supervisor'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
