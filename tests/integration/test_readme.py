"""The README's Python block runs as written, twice in a row: against a board emulator (`hil emulate`,
its pty where the README says /dev/ttyACM0) and a running loop (`hil run --dry-run`), each in their
own processes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hil.runtime.shared import running_loops
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
HIL = [sys.executable, "-m", "hil.cli"]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_the_readme_python_runs_as_written_twice(tmp_path):
    blocks = python_blocks()
    assert blocks, "no python block in the README"
    code = "\n".join(blocks)
    assert "/dev/ttyACM0" in code and "LoopClient()" in code
    emu = subprocess.Popen(HIL + ["emulate", "--robot", "puma560"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    before = set(running_loops())
    run = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "120"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pty = emu.stdout.readline().strip()
        assert pty.startswith("/dev/"), emu.stderr.read()
        assert wait_for(lambda: set(running_loops()) - before, timeout_s=60), "the loop did not start"
        script = tmp_path / "readme.py"
        script.write_text(code.replace("/dev/ttyACM0", pty))
        for attempt in range(2):   # the first run's e-stops must not break the second
            r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                               cwd=str(tmp_path))
            assert r.returncode == 0, f"run {attempt + 1}:\n{r.stdout}\n{r.stderr}"
            assert "Traceback" not in r.stderr
    finally:
        for p in (run, emu):
            p.terminate()
            p.wait(timeout=10)
        for f in (emu.stdout, emu.stderr):
            f.close()
