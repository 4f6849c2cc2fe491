"""The loop's process started early: given no run it ends at once and leaves nothing behind,
whatever ended the command that started it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hil.runtime.loop_process import LoopProcess

ROOT = Path(__file__).resolve().parents[2]


def _session_members(sid: int) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(pid))
    return out


def test_a_loop_process_given_no_run_ends_at_once():
    lp = LoopProcess()
    assert lp.proc.is_alive()
    lp.cancel()
    assert not lp.proc.is_alive() and lp.proc.exitcode == 0


def test_a_command_refused_after_its_loop_process_started_leaves_no_process(tmp_path):
    """`hil run --dry-run` starts its loop process before it reads the motion: a motion file that
    is not there is one line, and the waiting process ends with the command."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "hil.cli", "run", "--robot", "humanoid17", "--dry-run", "--headless",
                             "--motion", str(tmp_path / "missing.toml")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, (out, err)
    assert "missing.toml" in err and "Traceback" not in err, err
    deadline = time.monotonic() + 10
    while _session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _session_members(proc.pid) == []
