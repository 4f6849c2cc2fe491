"""`hil ctl`: requests to a running loop without the twin."""

from __future__ import annotations

import sys

from hil.cli.common import add_command

ACTIONS = ("estop", "enable", "disable", "clear-fault", "start", "stop", "shutdown", "status", "list")


def register(sub) -> None:
    s = add_command(sub, "ctl", "control a running loop without the twin: e-stop, enable, clear a fault, status",
                    "Sends a request to a running `hil run` loop, as the twin's buttons do, and prints the loop's "
                    "answer (exit code 1 when it refuses, with the reason). estop; enable (torque "
                    "on, holds the measured pose); disable; clear-fault (a latched watchdog or e-stop: the board "
                    "comes back disabled); start / stop the loaded motion (start begins it from its start); "
                    "shutdown the run; status of the loop; list the running loops.",
                    ["hil ctl status", "hil ctl clear-fault && hil ctl enable", "hil ctl estop --loop hil_puma560_4242"])
    s.add_argument("action", choices=ACTIONS, help="what to do: " + ", ".join(ACTIONS))
    s.add_argument("--loop", metavar="NAME", help="which loop (`hil ctl list`); needed when more than one runs")
    s.set_defaults(func=run)


def run(args) -> int:
    from firmware_protocol.messages import fault_names
    from hil.runtime.lifecycle import Activity, Mode
    from hil.runtime.shared import BOARD_STATES, LoopClient, describe_loops, progress_text

    if args.action == "list":
        lines = describe_loops()
        print("\n".join(lines) if lines else "no hil loop is running")
        return 0
    client = LoopClient(args.loop)
    try:
        if args.action == "status":
            s = client.snapshot()
            print(f"{client.name}: {Mode(int(s.mode)).name} ({Activity(int(s.activity)).name.lower()}, motion "
                  f"{progress_text(s.motion_progress)}), board {BOARD_STATES.get(int(s.board_state), '?')}, "
                  f"faults {fault_names(int(s.faults))}, t {s.t:.2f} s, cycle {int(s.cycle)}, "
                  f"misses {int(s.misses)}")
            print(f"last event: {s.event}")
            if client.info().get("position_estimated"):
                print("measured positions are estimates: the board's servos report no position (open loop)")
            return 0
        answer = {"estop": client.estop, "enable": client.enable, "disable": client.disable,
                  "clear-fault": client.clear_fault, "start": client.start_motion, "stop": client.stop_motion,
                  "shutdown": client.shutdown}[args.action]()
        if not answer.ok:
            print(f"hil ctl {args.action}: {client.name}: {answer}", file=sys.stderr)
            return 1
        print(f"{client.name}: {answer}")
        return 0
    finally:
        client.close()
