"""Wire protocol cost: µs per encode+decode cycle, frames per second, and bytes on the wire per
control cycle for 17 and 6 joints, next to Dynamixel Protocol 2.0 Sync Write + Fast Sync Read
(bytes computed from its published packet layout). Run: `python benchmarks/bench_protocol.py`.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import firmware_protocol.messages as M
from firmware_protocol.frame import FrameDecoder


def dxl_sync_write(n: int, data_len: int) -> int:
    # FF FF FD 00, ID, LEN(2), INST, start addr(2), data len(2), N x (ID + data), CRC(2)
    return 4 + 1 + 2 + 1 + 2 + 2 + n * (1 + data_len) + 2


def dxl_fast_sync_read_request(n: int) -> int:
    # FF FF FD 00, ID, LEN(2), INST, start addr(2), data len(2), N x ID, CRC(2)
    return 4 + 1 + 2 + 1 + 2 + 2 + n + 2


def dxl_fast_sync_read_reply(n: int, data_len: int) -> int:
    # FF FF FD 00, ID(FE), LEN(2), INST(55), then per servo ERR, ID, DATA, CRC(2)
    return 4 + 1 + 2 + 1 + n * (1 + 1 + data_len + 2)


def cycle_cost(n: int, reps: int) -> tuple[float, float, int, int]:
    rng = np.random.default_rng(0)
    pos = rng.integers(-3_000_000, 3_000_000, n).astype(np.int32)
    joints = np.zeros(n, dtype=M.STATE_JOINT_DTYPE)
    joints["pos_urad"] = pos
    dec = FrameDecoder()
    cmd = M.CmdPos(pos).encode(1)
    state = M.State(123456, 1, 2, 0, 12000, joints).encode(1)
    t0 = time.perf_counter_ns()
    for k in range(reps):
        wire = M.CmdPos(pos).encode(k)          # host: encode the command
        m = M.decode_message(dec.feed(wire)[0])  # board: decode it
        wire2 = M.State(k, k, 2, 0, 12000, joints).encode(k)  # board: encode the state
        s = M.decode_message(dec.feed(wire2)[0])  # host: decode it
    dt = (time.perf_counter_ns() - t0) / reps / 1e3
    assert isinstance(m, M.CmdPos) and isinstance(s, M.State)
    return dt, 1e6 / dt, len(cmd), len(state)


def main() -> int:
    reps = 20000 if "--quick" not in sys.argv else 2000
    print("hil wire protocol, one control cycle = CMD_POS host→board + STATE board→host "
          "(encode + decode both, Python)")
    print(f"{'joints':>6} {'µs/cycle':>9} {'cycles/s':>10} {'cmd B':>6} {'state B':>8} {'total B':>8} "
          f"{'@1 Mbaud':>9}")
    for n in (17, 6):
        dt, fps, c, s = cycle_cost(n, reps)
        print(f"{n:>6} {dt:>9.2f} {fps:>10.0f} {c:>6} {s:>8} {c + s:>8} {(c + s) * 10 / 1e3:>7.2f} ms")
    print("\nDynamixel Protocol 2.0 for the same joints (Sync Write goal position 4 B + Fast Sync Read)")
    print(f"{'joints':>6} {'SyncWrite':>10} {'FSR req':>8} {'FSR reply':>10} {'total B':>8} {'@1 Mbaud':>9}"
          "   (reply with position only / position+velocity+current = 10 B)")
    for n in (17, 6):
        sw = dxl_sync_write(n, 4)
        rq = dxl_fast_sync_read_request(n)
        for L in (4, 10):
            rp = dxl_fast_sync_read_reply(n, L)
            print(f"{n:>6} {sw:>10} {rq:>8} {rp:>10} {sw + rq + rp:>8} {(sw + rq + rp) * 10 / 1e3:>7.2f} ms"
                  f"   reply data {L} B/servo")
    print("\nhil's STATE carries position, velocity, current, temperature and flags for every joint; "
          "Dynamixel needs the read request frame on top, which hil does not (the state follows each command).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
