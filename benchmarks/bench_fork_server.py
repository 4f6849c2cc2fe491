"""What the tests' fork server (tests/fork_server.py) saves a command: CPU and wall time of short
commands forked from it, against the same commands in a fresh interpreter (`python -m hil.cli`,
the baseline) in the same run, interleaved. CPU counts every process of the command: the client's
own and, for a forked one, what the server's child and everything it waited for used (the
server's reaped children's time in /proc).

    python benchmarks/bench_fork_server.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_startup import interleaved, measured as measured_fresh  # noqa: E402 - its commands, table
from tests.fork_client import SOCKET_ENV  # noqa: E402
from tests.launch import CLIENT, FRESH_HIL  # noqa: E402

FORKED = [sys.executable, "-I", "-S", CLIENT]
TICK = os.sysconf("SC_CLK_TCK")


def _reaped_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK   # cutime, cstime


def measured(argv: list[str], server: int | None) -> tuple[float, float]:
    """(CPU s of the command's processes, wall s): the client's and, forked, what the server's
    child used (the server reaps it once the client has its status)."""
    reaped = _reaped_cpu(server) if server else 0.0
    cpu, wall = measured_fresh(argv)
    if server:
        time.sleep(0.05)
        cpu += _reaped_cpu(server) - reaped
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="hil-bench-fork-") as where:   # a command's default output files
        socket_path = os.path.join(where, "server")
        server = subprocess.Popen([sys.executable, "-m", "tests.fork_server", socket_path], cwd=ROOT,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            while not os.path.exists(socket_path):
                if server.poll() is not None:
                    raise SystemExit("the fork server ended before it listened")
                time.sleep(0.05)
            os.environ[SOCKET_ENV] = socket_path
            os.chdir(where)
            table(rounds, server.pid)
            os.chdir("/")
        finally:
            server.kill()
            server.wait()


def table(rounds: int, server: int) -> None:
    interleaved(rounds, ("forked", lambda argv: measured(FORKED + argv, server)),
                ("fresh", lambda argv: measured(FRESH_HIL + argv, None)),
                warm=lambda argv: measured(FRESH_HIL + argv, None))


if __name__ == "__main__":
    main()
