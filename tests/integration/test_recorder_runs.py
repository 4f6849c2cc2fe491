"""A run whose recording cannot be written (the disk fills up under it) stops safely, exits
non-zero, says how many rows the file keeps, and leaves a file that reads whole; one that would
not fit is refused before anything starts."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hil.runtime.recorder import load_recording

pytestmark = pytest.mark.slow

# in a mount namespace of its own (nothing is left mounted when it ends): a 4 MiB filesystem for
# the recording, filled by another process once the run has recorded a second (its rows past the
# file's first 64 KiB; a slow start on a busy machine takes longer) of a 12 s run
RUN_S = 12
FILL_UP = textwrap.dedent("""
    set -u
    D=$(mktemp -d); OUT=$1; shift
    mount -t tmpfs -o size=4m tmpfs "$D" || exit 77
    "$@" --record "$D/run.npy" > "$OUT/out.txt" 2> "$OUT/err.txt" &
    pid=$!
    for i in $(seq 600); do
        [ "$(stat -c %s "$D/run.npy" 2>/dev/null || echo 0)" -gt 65536 ] && break
        sleep 0.05
    done
    sleep 1
    dd if=/dev/zero of="$D/filler" bs=64k 2>/dev/null
    wait $pid; echo $? > "$OUT/rc"
    cp "$D"/run.npy* "$OUT/"
""")


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs unshare and mount (root): a small filesystem to fill up")
@pytest.mark.parametrize("on_error", ["stop", "continue"])
def test_a_full_disk_during_a_recording_is_a_failure_said_with_the_rows_kept(tmp_path, on_error):
    run = [sys.executable, "-m", "hil.cli", "run", "--robot", "humanoid17", "--dry-run", "--headless", "--enable",
           "--motion", "examples/wave.toml", "--duration", str(RUN_S), "--on-record-error", on_error]
    r = subprocess.run(["unshare", "-m", "bash", "-c", FILL_UP, "fill-up", str(tmp_path), *run],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    out, err = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert (tmp_path / "rc").read_text().strip() == "1", out + err
    last = err.strip().splitlines()[-1]
    assert "recording failed: No space left on device" in last and "rows, readable" in last, err
    kept = int(last.split("the file keeps ")[1].split(" rows")[0])
    data, _ = load_recording(str(tmp_path / "run.npy"))
    assert len(data) == kept > 0 and np.all(np.diff(data["t"]) > 0)
    if on_error == "stop":
        assert "the run was stopped" in last and data["t"][-1] < RUN_S
    else:   # it went on without recording, to the end it was asked for
        assert "the run goes on without it" in out and f"duration {RUN_S} s reached" in out, out


@pytest.mark.skipif(not _can_mount(), reason="needs unshare and mount (root): a small filesystem")
def test_a_recording_the_disk_has_no_room_for_is_refused_before_anything_starts(tmp_path):
    r = subprocess.run(["unshare", "-m", "bash", "-c",
                        'D=$(mktemp -d); mount -t tmpfs -o size=1m tmpfs "$D" || exit 77; "$@" --record "$D/run.npy"',
                        "x", sys.executable, "-m", "hil.cli", "run", "--robot", "humanoid17", "--dry-run", "--headless",
                        "--duration", "60"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "MiB free in" in r.stderr and "free some space, or record elsewhere" in r.stderr, r.stderr
    assert "board emulator" not in r.stdout + r.stderr
