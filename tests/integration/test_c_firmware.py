"""The C reference firmware (firmware_protocol/c): its receiver against the Python one on the same
10⁶ random, mutated and valid byte streams (identical accept/reject decisions, reasons and
decoded frames), its schema hash, and its behaviour under bad input on a pty."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest

import firmware_protocol.messages as M
from firmware_protocol.frame import FrameDecoder, encode_frame
from firmware_protocol.link import Link
from hil.emulator_launch import C_SOURCES, c_build_dir, c_emulator_binary

from tests.conftest import HAVE_C_TOOLS

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAVE_C_TOOLS, reason="the C firmware's host build needs make and gcc "
                                                          "(apt-get install -y make gcc)")]
STREAMS = int(os.environ.get("HIL_DIFF_STREAMS", 1_000_000))


def _decoder_binary() -> str:
    c_emulator_binary()   # builds both host programs
    return str(c_build_dir() / "hil-decode")


def _valid_frames(rng: random.Random) -> list[bytes]:
    """Frames of every message, right and wrong: joint counts over the limit, short payloads,
    other versions, reserved flags, unknown ids."""
    out = []
    for _ in range(400):
        mid = rng.choice(list(M.MESSAGES) + [0x00, 0x08, 0x22, 0x7F, 0xFF])
        n = rng.choice([0, 1, 6, 17, 22, 23, 40])
        head = {0x20: 6, 0x21: 6, 0x30: 18, 0x31: 10}.get(mid)
        if head is not None and rng.random() < 0.8:
            each = {0x20: 4, 0x21: 8, 0x30: 10, 0x31: 4}[mid]
            payload = bytearray(rng.randbytes(head + each * min(n, 22) + rng.choice([0, 0, 0, -1, 3])))
            at_n = {0x30: 11, 0x31: 8}.get(mid, 0)
            if len(payload) > at_n:
                payload[at_n] = n
            payload = bytes(payload)
        else:
            payload = rng.randbytes(rng.choice([0, 1, 3, 4, 5, 8, 9, 10, 24, 41, 60, 200, 246]))
        flags = rng.choice([0, 0, 1, 2, 3, 4, 8, 15])
        frame = encode_frame(mid, rng.randrange(65536), payload[:246], flags & 0x03)
        if flags & 0x0C or rng.random() < 0.05:   # reserved flags or another version: re-encode the body by hand
            from cobs import cobs
            body = bytearray(cobs.decode(frame[1:-1]))
            body[0] = (rng.choice([1, 1, 2, 0, 15]) << 4) | flags
            body[-4:] = struct.pack("<I", zlib.crc32(bytes(body[:-4])))
            frame = b"\x00" + cobs.encode(bytes(body)) + b"\x00"
        out.append(frame)
    return out


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4])):
        k = rng.randrange(6)
        if not b:
            break
        i = rng.randrange(len(b))
        if k == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif k == 1:
            del b[i]
        elif k == 2:
            b.insert(i, rng.randrange(256))
        elif k == 3:
            b[i] = 0
        elif k == 4:
            b = b[:i]
        else:
            b[i:i] = rng.randbytes(rng.randrange(1, 300)).replace(b"\x00", b"\x01")   # an overlong run
    return bytes(b)


def _streams(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    pool = _valid_frames(rng)
    out = []
    for _ in range(n):
        kind = rng.random()
        parts = [rng.choice(pool) for _ in range(rng.choice([1, 1, 2, 3]))]
        s = b"".join(parts)
        if kind < 0.15:
            s = rng.randbytes(rng.randrange(0, 80))
        elif kind < 0.7:
            s = _mutate(rng, s)
        out.append(s)
    return out


def _python_line(stream: bytes) -> str:
    dec = FrameDecoder()
    cut = len(stream) // 3
    frames = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
    parts = []
    for f in frames:
        ok = M.decode_message(f) is not None
        parts.append(f"{f.msg_id}.{f.seq}.{f.flags}.{int(ok)}.{zlib.crc32(f.payload):08x} ")
    s = dec.stats
    return (f"{''.join(parts)}| {s.frames} {s.crc} {s.cobs} {s.too_short} {s.too_long} {s.version} "
            f"{s.reserved_flags} {s.empty}")


def test_the_c_and_python_receivers_decide_the_same_on_a_million_streams():
    streams = _streams(STREAMS, seed=20261201)
    blob = b"".join(struct.pack("<I", len(s)) + s for s in streams)
    t0 = time.perf_counter()
    r = subprocess.run([_decoder_binary()], input=blob, capture_output=True, timeout=600)
    c_s = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    c_lines = r.stdout.decode().splitlines()
    assert len(c_lines) == len(streams)
    accepted = rejected = 0
    decided: dict[bytes, str] = {}   # a stream drawn again (a frame of the pool, unchanged) is decided once
    for k, (s, c_line) in enumerate(zip(streams, c_lines)):
        py = decided.get(s)
        if py is None:
            py = decided[s] = _python_line(s)
        assert c_line == py, f"stream {k} ({s.hex()}): C {c_line!r} vs Python {py!r}"
        counts = py.rsplit("|", 1)[1].split()
        accepted += int(counts[0])
        rejected += sum(int(c) for c in counts[1:7])
    # the streams exercise both sides of every rule
    assert accepted > STREAMS // 4 and rejected > STREAMS // 4
    print(f"{len(streams)} streams, {len(blob)} bytes: C receiver {c_s:.2f} s, {accepted} frames accepted, "
          f"{rejected} rejected")


def test_the_c_constants_and_board_table_are_generated_from_the_python_ones(tmp_path):
    """hil_generated.h is exactly what messages.py, frame.py and board_behaviour.py say today, and
    `make`'s check refuses a stale one."""
    from firmware_protocol import c_header

    text = (C_SOURCES / "hil_generated.h").read_text()
    assert text == c_header.render(), "run `python -m firmware_protocol.c_header`"
    assert f"#define HIL_SCHEMA_HASH 0x{M.SCHEMA_HASH:08X}u" in text
    assert c_header.main(["--check"]) == 0
    stale = tmp_path / "hil_generated.h"
    stale.write_text(text.replace("HIL_ACK_BAD_STATE = 1", "HIL_ACK_BAD_STATE = 9"))
    assert c_header.main(["--check", "--out", str(stale)]) == 1


def test_bad_input_never_moves_a_joint_outside_its_limits_and_is_counted():
    """Garbage, truncated frames, commands far outside the limits and a flood: the C board stays
    up, its joints stay inside POS_MIN/POS_MAX, and it still answers."""
    cfg = '{"lower_deg": [-10, -10, -10, -10, -10, -10], "upper_deg": [10, 10, 10, 10, 10, 10]}'
    # the watchdog at its longest: this process (not real-time) beside a busy machine's jobs can
    # pause longer than the default between commands (its own test is elsewhere)
    p = subprocess.Popen([c_emulator_binary(), "--kind", "puma6", "--config", cfg, "--noise-deg", "0",
                          "--watchdog-ms", "1000"], stdout=subprocess.PIPE, text=True)
    path = p.stdout.readline().strip()
    try:
        with Link.connect(path, threaded=True, expect_joints=6) as link:
            link.enable()
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
            rng = random.Random(7)
            for k in range(300):
                q = np.full(6, (-1) ** k * 3.0)                       # far outside ±10°
                link.send_positions(q)
                os.write(fd, rng.randbytes(rng.randrange(1, 120)))    # garbage between commands
                os.write(fd, encode_frame(0x20, k, b"\x06\x00\xff")[:-1])  # truncated, no end marker
                time.sleep(0.002)
            os.close(fd)
            for _ in range(50):                                       # it still answers, and follows
                link.send_positions(np.full(6, 3.0))
                time.sleep(0.004)
            s = link.latest()
            assert s is not None and s.state == M.BoardState.ENABLED
            assert np.all(np.abs(s.q) <= np.radians(10) + 1e-4), np.degrees(s.q)
            assert np.all(np.abs(s.q - np.radians(10)) < 0.01)           # held at the limit
            assert all(int(f) & M.JointFlag.LIMIT for f in s.jflags)
            assert link.param_get(M.Param.RX_DROPPED) >= 300          # the garbage and the truncated frames
            link.disable()
    finally:
        p.terminate()
        p.wait()
        p.stdout.close()


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                    reason="needs arm-none-eabi-gcc (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi)")
def test_the_arm_ports_build_and_fit_a_32k_ram_256k_flash_mcu(tmp_path):
    r = subprocess.run(["make", "-s", "-C", str(C_SOURCES), "arm", f"BUILD={tmp_path}", f"PYTHON={sys.executable}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    sizes = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0].isdigit():
            sizes[os.path.basename(parts[5])] = (int(parts[0]) + int(parts[1]), int(parts[1]) + int(parts[2]))
    assert set(sizes) == {"humanoid17-stm32f401.elf", "puma6-stm32f407.elf", "core-cortex-m0plus.o"}, r.stdout
    for name, (flash, ram) in sizes.items():
        assert flash < 64 * 1024 and ram < 8 * 1024, (name, flash, ram)   # a quarter of the budget, at most
    # the vector table is where the MCU looks for it, at the start of flash: the top of RAM, then
    # the reset handler (a Thumb address: bit 0 set)
    for name, ram_top in (("humanoid17-stm32f401.elf", 0x20010000), ("puma6-stm32f407.elf", 0x20020000)):
        elf = str(tmp_path / name)
        binary = tmp_path / (name + ".vectors")
        subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".isr_vector", elf, str(binary)], check=True)
        stack, reset = struct.unpack_from("<II", binary.read_bytes())
        nm = subprocess.run(["arm-none-eabi-nm", elf], capture_output=True, text=True, check=True).stdout
        addr = {ln.split()[2]: int(ln.split()[0], 16) for ln in nm.splitlines() if len(ln.split()) == 3}
        assert stack == ram_top and reset == addr["Reset_Handler"] | 1 and addr["Reset_Handler"] >= 0x08000000
        # the host link is USB: the OTG_FS interrupt (IRQ 67) reaches its handler
        otg = struct.unpack_from("<I", binary.read_bytes(), 4 * (16 + 67))[0]
        assert otg == addr["OTG_FS_IRQHandler"] | 1, name
    uart = subprocess.run(["make", "-s", "-C", str(C_SOURCES), "arm", f"BUILD={tmp_path / 'uart'}", "HOST_LINK=uart",
                           f"PYTHON={sys.executable}"],
                          capture_output=True, text=True)
    assert uart.returncode == 0, uart.stdout + uart.stderr
    nm = subprocess.run(["arm-none-eabi-nm", str(tmp_path / "uart" / "humanoid17-stm32f401.elf")],
                        capture_output=True, text=True, check=True).stdout
    assert "USART2_IRQHandler" in nm and "OTG_FS_IRQHandler" not in nm


def test_saved_parameters_survive_a_reboot_of_the_c_board():
    p = subprocess.Popen([c_emulator_binary(), "--kind", "puma6"], stdout=subprocess.PIPE, text=True)
    path = p.stdout.readline().strip()
    try:
        with Link.connect(path, threaded=True, expect_joints=6) as link:
            boot = link.info.boot_id
            assert link.param_set(M.Param.POS_MAX, 1_234_567, joint=2) == 1_234_567
            link.param_save()
            link.reboot()
            info = link.reconnect(timeout_s=5.0)
            assert info.boot_id != boot
            assert link.param_get(M.Param.POS_MAX, 2) == 1_234_567
    finally:
        p.terminate()
        p.wait()
        p.stdout.close()
