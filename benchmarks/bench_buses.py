"""Servo buses, 17 servos (the humanoid17 configs hil ships): bytes per cycle and their time on the
wire at the config's baud rate (computed from the packet layouts), the loop rate that allows, and
the host CPU one `BusBoard` cycle costs (goals out, every servo's state in: encode, decode, the
board state machine), measured against each bus's emulator on a pty with pacing off, so that only
the host's own work is timed (thread CPU time: waits in select() cost none). Baseline, same run:
our own protocol's cycle (CMD_POS encode + STATE decode) over `Link` to the hil board emulator.

Also: what servos on transmissions add to a cycle (firmware_protocol.servo_mix: goals mixed,
readings and speeds solved back), for a 30-joint robot with ToddlerBot's transmissions (a waist
differential, eight gear trains), beside that bus cycle.

Run: `python benchmarks/bench_buses.py [--cycles N]`
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np

from firmware_protocol.buses import BUSES, bus_class
from firmware_protocol.buses.bus_board import BusBoard, cycle_note
from firmware_protocol.buses.servo_bus import wire_time_s
from firmware_protocol.servo_mix import ServoMix
from firmware_protocol.link import Link
from hil import board_config, emulator_launch, robots


def _emulator(argv: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc, proc.stdout.readline().strip()


def _cpu_per_cycle(board, n: int, cycles: int) -> float:
    q = np.zeros(n)
    for _ in range(20):
        board.send_positions(q)
        board.poll()
    t0 = time.thread_time()
    for k in range(cycles):
        q[0] = 1e-3 * (k % 50)
        board.send_positions(q)
        board.poll()
    return (time.thread_time() - t0) / cycles


def bus_row(model, bus: str, cycles: int) -> dict:
    config = board_config.shipped(model, bus)
    argv = emulator_launch.bus_emulator_argv(config, model, echo=config.echo, baud=0)
    argv.append("--any-baud")
    proc, path = _emulator(argv)
    try:
        board = BusBoard.connect(path, config)
        board.enable()
        cpu = _cpu_per_cycle(board, model.n, cycles)
        board.close()
    finally:
        proc.terminate()
        proc.wait()
    cls = bus_class(bus)
    cost = cls.cycle_cost(config.n)
    wire = wire_time_s(cost, config.baud, cls.bits_per_byte, config.return_delay_us * 1e-6)
    return {"bus": bus, "baud": config.baud, "bytes": cost.tx_bytes + cost.rx_bytes, "wire_ms": wire * 1e3,
            "rate_hz": cycle_note(config)[1], "round_trips": cost.round_trips, "cpu_us": cpu * 1e6}


def baseline_row(model, cycles: int) -> dict:
    proc, path = _emulator(emulator_launch.emulator_argv(model, baud=0))
    try:
        link = Link.connect(path, threaded=False, expect_joints=model.n)
        q = np.zeros(model.n)
        for _ in range(20):
            link.send_positions(q, hold=True)
            time.sleep(0.002)
            link.poll()
        t0 = time.thread_time()
        got = 0
        for k in range(cycles):
            link.send_positions(q, hold=True)
            time.sleep(0.0005)   # the answer arrives; waiting costs no CPU
            got += link.poll() is not None
        cpu = (time.thread_time() - t0) / cycles
        link.close()
    finally:
        proc.terminate()
        proc.wait()
    return {"bus": "hil (baseline)", "baud": 1_000_000, "bytes": 284, "wire_ms": 2.84, "rate_hz": 1e3 / 2.84,
            "round_trips": 1, "cpu_us": cpu * 1e6}


def mix_us(n: int = 30, rounds: int = 3000) -> float:
    """Thread CPU per cycle of a mix's work: goals mixed, readings and speeds solved back."""
    matrix = np.eye(n)
    matrix[0:2, 0:2] = [[2.4, -1.714], [2.4, 1.714]]     # a differential's two gears
    for k in range(2, 10):
        matrix[k, k] = -1.167                            # gear trains
    mix = ServoMix.of(matrix, np.zeros(n))
    q = np.linspace(-0.5, 0.5, n)
    t0 = time.thread_time()
    for _ in range(rounds):
        s = mix.servo_angles(q)
        mix.joint_angles(s)
        mix.joint_rates(s)
    return (time.thread_time() - t0) / rounds * 1e6


def main() -> int:
    cycles = int(sys.argv[sys.argv.index("--cycles") + 1]) if "--cycles" in sys.argv else 400
    model = robots.load("humanoid17")
    base = baseline_row(model, cycles)
    rows = [bus_row(model, bus, cycles) for bus in BUSES]
    print("17 servos, one cycle = every goal out + every servo's state in; host CPU from thread time")
    print(f"{'bus':<16} {'baud':>9} {'bytes':>6} {'wire ms':>8} {'≤ Hz':>6} {'trips':>6} {'host µs':>8} {'× hil':>6}")
    for r in [base, *rows]:
        print(f"{r['bus']:<16} {r['baud']:>9} {r['bytes']:>6} {r['wire_ms']:>8.2f} {r['rate_hz']:>6.0f} "
              f"{r['round_trips']:>6} {r['cpu_us']:>8.0f} {r['cpu_us'] / base['cpu_us']:>6.1f}")
    print(f"servos on transmissions, {30} joints: the mix adds {mix_us():.0f} µs of host CPU per cycle")
    if "--json" in sys.argv:
        print(json.dumps([base, *rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
