"""The C reference firmware: flash and RAM of each ARM build (arm-none-eabi-size), the host
build's time per received CMD_POS + sent STATE for 17 joints, and the receivers' throughput on
the differential test's streams — C against the Python receiver in the same run.

Run: `python benchmarks/bench_firmware.py [--streams N]` (needs make and gcc; arm-none-eabi-gcc for
the ARM sizes).
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

from hil.emulator_launch import C_SOURCES, c_build_dir, c_emulator_binary  # noqa: E402
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


def main() -> int:
    n = int(sys.argv[sys.argv.index("--streams") + 1]) if "--streams" in sys.argv else 200_000
    c_emulator_binary()   # builds the host programs
    print("ARM builds (arm-none-eabi-gcc -Os): flash = text + data, RAM = data + bss (static; stack apart)")
    for name, text, data, bss in arm_sizes():
        print(f"  {name:<28} flash {text + data:>6} B   RAM {data + bss:>6} B")
    r = subprocess.run([str(c_build_dir() / "hil-bench"), "1000000"], capture_output=True, text=True, check=True)
    print("host build, one cycle:", r.stdout.strip())
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
