"""The C reference firmware: flash and RAM of each ARM build (arm-none-eabi-size), the host
build's time per received CMD_POS + sent STATE for 17 joints, and the receivers' throughput on
the differential test's streams — C against the Python receiver in the same run. With QEMU: the
same cycle on the ARM image's Cortex-M4 in instructions (QEMU's `-icount shift=0`: one instruction
a nanosecond of its clock), and what QEMU's USART carries for the board image (exchanges a second
at a command rate past what it can take).

Run: `python benchmarks/bench_firmware.py [--streams N]` (needs make and gcc; arm-none-eabi-gcc for
the ARM sizes; qemu-system-arm for the M4 figures).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the streams come from the differential test

from hil.emulator_launch import C_SOURCES, c_build_dir, c_emulator_binary, qemu_image  # noqa: E402
from tests.integration.test_c_firmware import _python_line, _streams  # noqa: E402


def arm_sizes() -> list[tuple[str, int, int, int]]:
    if shutil.which("arm-none-eabi-gcc") is None:
        return []
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(["make", "-s", "-C", str(C_SOURCES), "arm", f"BUILD={d}"], capture_output=True, text=True,
                           check=True)
    out = []
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 6 and p[0].isdigit():
            out.append((p[5].rsplit("/", 1)[-1], int(p[0]), int(p[1]), int(p[2])))
    return out


def m4_cycle() -> str | None:
    """The cycle benchmark on QEMU's Cortex-M4, instructions counted by QEMU's clock."""
    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        return None
    qemu_image()
    with tempfile.TemporaryDirectory() as d:
        Path(d, "hil-in.bin").write_bytes(b"")
        subprocess.run(["qemu-system-arm", "-M", "netduinoplus2", "-nographic", "-monitor", "none", "-serial", "null",
                        "-semihosting-config", "enable=on,target=native", "-icount", "shift=0", "-kernel",
                        str(c_build_dir() / "hil-qemu-bench.elf")], cwd=d, check=True, capture_output=True)
        return Path(d, "hil-out.txt").read_text().strip().replace(" ns per", " instructions per")


def qemu_link(kind: str, rate_hz: float, seconds: float = 3.0) -> float:
    """STATEs a second from the board image on QEMU, commands sent at `rate_hz`."""
    import numpy as np

    from firmware_protocol.link import Link

    emu = subprocess.Popen([sys.executable, "-m", "firmware_protocol.qemu_board", "--elf", qemu_image(), "--kind",
                            kind, "--watchdog-ms", "1000"], stdout=subprocess.PIPE, text=True)
    try:
        with Link.connect(emu.stdout.readline().strip()) as link:
            q = link.wait_state().q.copy()
            n0, t0 = link.stats.rx_states, time.monotonic()
            while time.monotonic() - t0 < seconds:
                link.send_positions(q + np.zeros_like(q))
                time.sleep(1.0 / rate_hz)
            return (link.stats.rx_states - n0) / (time.monotonic() - t0)
    finally:
        emu.terminate()
        emu.wait()
        emu.stdout.close()


def qemu_sizes() -> list[tuple[str, int, int, int]]:
    if shutil.which("arm-none-eabi-gcc") is None:
        return []
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(["make", "-s", "-C", str(C_SOURCES), "qemu", f"BUILD={d}"], capture_output=True, text=True,
                           check=True)
    p = r.stdout.splitlines()[-1].split()
    return [(p[5].rsplit("/", 1)[-1], int(p[0]), int(p[1]), int(p[2]))]


def main() -> int:
    n = int(sys.argv[sys.argv.index("--streams") + 1]) if "--streams" in sys.argv else 200_000
    c_emulator_binary()   # builds the host programs
    print("ARM builds (arm-none-eabi-gcc -Os): flash = text + data, RAM = data + bss (static; stack apart)")
    for name, text, data, bss in arm_sizes() + qemu_sizes():
        print(f"  {name:<28} flash {text + data:>6} B   RAM {data + bss:>6} B")
    r = subprocess.run([str(c_build_dir() / "hil-bench"), "1000000"], capture_output=True, text=True, check=True)
    print("host build, one cycle:", r.stdout.strip())
    m4 = m4_cycle()
    if m4 is not None:
        print("QEMU's Cortex-M4, one cycle:", m4)
        for kind in ("humanoid17", "puma6"):
            print(f"QEMU board image, {kind}: {qemu_link(kind, 100):.0f} STATEs/s at 100 Hz commands, "
                  f"{qemu_link(kind, 1000):.0f} at 1 kHz (what its USART carries)")
    streams = _streams(n, seed=1)
    blob = b"".join(struct.pack("<I", len(s)) + s for s in streams)
    t0 = time.perf_counter()
    subprocess.run([str(c_build_dir() / "hil-decode")], input=blob, capture_output=True, check=True)
    c_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in streams:
        _python_line(s)
    py_s = time.perf_counter() - t0
    mb = len(blob) / 1e6
    print(f"receivers on {n} streams ({mb:.1f} MB): C {c_s:.2f} s ({mb / c_s:.0f} MB/s, {n / c_s:,.0f} streams/s, "
          f"process start and output included), Python {py_s:.2f} s ({mb / py_s:.1f} MB/s); C/Python {py_s / c_s:.0f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
