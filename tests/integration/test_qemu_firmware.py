"""The firmware's ARM image on QEMU's STM32F405 (`make -C firmware_protocol/c qemu`): the differential
test's receiver as a Cortex-M4 program against the Python one, the board image served by `hil emulate
--impl qemu` for both robots (garbage first, then a connect), dry runs of a motion on it, saved
parameters across a reset of the processor, and nothing left running after. The link, calibration
and runtime tests run against it too (tests/conftest.py, EVERY_BOARD)."""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import time

import pytest

import firmware_protocol.messages as M
from firmware_protocol.link import Link
from hil.emulator_launch import C_SOURCES, c_build_dir, qemu_image
from tests.conftest import HAVE_QEMU_TOOLS
from tests.integration.test_c_firmware import _python_line, _streams

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAVE_QEMU_TOOLS, reason="needs arm-none-eabi-gcc and qemu-system-arm (apt-get "
                                                             "install -y gcc-arm-none-eabi libnewlib-arm-none-eabi "
                                                             "qemu-system-arm)")]
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
STREAMS = int(os.environ.get("HIL_QEMU_DIFF_STREAMS", 50_000))


def _semihosted(elf: str, folder, data: bytes, icount: bool = False) -> tuple[int, str]:
    """Run a semihosting tool image: `data` is its stdin, what it printed its stdout."""
    (folder / "hil-in.bin").write_bytes(data)
    argv = ["qemu-system-arm", "-M", "netduinoplus2", "-nographic", "-monitor", "none", "-serial", "null",
            "-semihosting-config", "enable=on,target=native", "-kernel", elf]
    r = subprocess.run(argv + (["-icount", "shift=0"] if icount else []), cwd=folder, capture_output=True,
                       timeout=600)
    return r.returncode, (folder / "hil-out.txt").read_text()


def _tagged_env() -> tuple[dict, str]:
    """An environment whose mark every process started under it inherits (QEMU too): the other test
    worker runs QEMU boards of its own at the same time, and only ours count."""
    tag = f"HIL_TEST_TAG={os.getpid()}-{time.monotonic_ns()}"
    return {**os.environ, "HIL_TEST_TAG": tag.split("=", 1)[1]}, tag


def _qemu_pids(tag: str) -> set[int]:
    out = set()
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if not f.read().split(b"\0")[0].endswith(b"qemu-system-arm"):
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tag.encode() in f.read().split(b"\0"):
                    out.add(int(pid))
        except (OSError, ValueError):
            pass
    return out


def _gone(tag: str, timeout_s: float = 5.0) -> bool:
    """No QEMU of ours left: at once, or within the few seconds a machine busy with other work takes
    to tear a process down (one left behind stays for good)."""
    deadline = time.monotonic() + timeout_s
    while _qemu_pids(tag):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_the_images_build_and_fit_the_f405():
    r = subprocess.run(["make", "-s", "-C", str(C_SOURCES), "qemu", f"BUILD={c_build_dir()}", f"PYTHON={sys.executable}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text, data, bss = (int(v) for v in r.stdout.splitlines()[-1].split()[:3])
    assert text + data < 64 * 1024 and data + bss < 16 * 1024, r.stdout     # of 1 MB and 124 KB
    for tool in ("hil-qemu-decode.elf", "hil-qemu-bench.elf"):
        assert (c_build_dir() / tool).exists()


def test_the_m4_receiver_decides_as_the_python_one(tmp_path):
    qemu_image()
    streams = _streams(STREAMS, seed=20261202)
    blob = b"".join(struct.pack("<I", len(s)) + s for s in streams)
    code, out = _semihosted(str(c_build_dir() / "hil-qemu-decode.elf"), tmp_path, blob)
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(streams)
    for k, (s, line) in enumerate(zip(streams, lines)):
        assert line == _python_line(s), f"stream {k} ({s.hex()})"


def test_the_cycle_benchmark_runs_every_frame_on_the_m4(tmp_path):
    qemu_image()
    code, out = _semihosted(str(c_build_dir() / "hil-qemu-bench.elf"), tmp_path, b"", icount=True)
    assert code == 0, out                          # it exits 1 unless the board applied every command
    assert "state 2" in out and "board struct 1104 bytes" in out, out


@pytest.mark.parametrize("robot, kind, n", [("humanoid17", 1, 17), ("puma560", 2, 6)])
def test_hil_emulate_serves_the_image_garbage_first_then_a_connect(robot, kind, n):
    env, tag = _tagged_env()
    emu = subprocess.Popen(HIL + ["emulate", "--robot", robot, "--impl", "qemu", "--uid", "0123456789ABCDEF01234567"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        path = emu.stdout.readline().strip()
        assert path.startswith("/dev/"), emu.stderr.read() if emu.poll() is not None else path
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        rng = random.Random(5)
        for _ in range(20):
            os.write(fd, rng.randbytes(rng.randrange(1, 200)))
        os.close(fd)
        with Link.connect(path, expect_joints=n) as link:
            assert link.info.kind == kind and link.info.n_joints == n
            assert link.info.uid == "0123456789ABCDEF01234567"
            assert link.param_get(M.Param.RX_DROPPED) > 0           # the garbage, counted by the firmware
            assert link.wait_state().state == M.BoardState.DISABLED
    finally:
        emu.terminate()
        emu.wait(timeout=10)
        emu.stdout.close()
        emu.stderr.close()
    assert _gone(tag), "QEMU outlived hil emulate"


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_image_s_emulator_leaves_no_files_however_it_is_stopped(tmp_path, stop):
    env, tag = _tagged_env()
    env["TMPDIR"] = str(tmp_path)
    emu = subprocess.Popen(HIL + ["emulate", "--robot", "puma560", "--impl", "qemu"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        path = emu.stdout.readline().strip()
        assert path.startswith("/dev/")
        with Link.connect(path, expect_joints=6) as link:    # the image serves with its files gone
            assert link.wait_state().state == M.BoardState.DISABLED
            assert os.listdir(tmp_path) == []
    finally:
        emu.send_signal(stop)
        emu.wait(timeout=10)
        emu.stdout.close()
    assert _gone(tag), "QEMU outlived hil emulate"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("robot, motion", [("humanoid17", "examples/wave.toml"), ("puma560", "demo")])
def test_a_dry_run_of_a_motion_on_the_image(robot, motion):
    env, tag = _tagged_env()
    r = subprocess.run(HIL + ["run", "--robot", robot, "--dry-run", "--emulator", "qemu", "--headless", "--enable",
                              "--motion", motion, "--duration", "4"], capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ramp-in done" in r.stdout and "loop stopped: duration 4 s reached" in r.stdout
    assert _gone(tag), "QEMU outlived the run"


def test_saved_parameters_survive_a_reset_of_the_processor():
    emu = subprocess.Popen([sys.executable, "-m", "firmware_protocol.qemu_board", "--elf", qemu_image(), "--kind",
                            "puma6"], stdout=subprocess.PIPE, text=True)
    path = emu.stdout.readline().strip()
    try:
        with Link.connect(path, threaded=True, expect_joints=6) as link:
            boot = link.info.boot_id
            assert link.param_set(M.Param.POS_MAX, 1_234_567, joint=2) == 1_234_567
            link.param_save()
            link.reboot()                                          # the firmware resets the M4
            info = link.reconnect(timeout_s=5.0)
            assert info.boot_id != boot
            assert link.param_get(M.Param.POS_MAX, 2) == 1_234_567
    finally:
        emu.terminate()
        emu.wait(timeout=10)
        emu.stdout.close()
