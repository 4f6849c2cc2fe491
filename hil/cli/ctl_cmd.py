"""`hil ctl`: a remote for a running loop, without the twin — the twin's buttons and more.

Exit codes say what happened: 0 done; 1 the loop refused (its reason said); 2 bad input or no
loop; 3 accepted but not finished (the robot stopped short: an e-stop, a fault, a safety hold,
or the wait ran out — what the loop said last is printed).
"""

from __future__ import annotations

import sys

from hil.cli.common import Parser, add_command
from hil.cli.ctl_exit import EXIT_DONE, EXIT_REFUSED

SIMPLE = {"estop": "e-stop: the board stops driving the joints now",
          "enable": "torque on; the robot holds its measured pose",
          "disable": "torque off (a standing humanoid falls: the loop asks it be lowered first)",
          "clear-fault": "clear a latched fault or e-stop: the board comes back disabled",
          "start": "start the loaded motion from its start (ramping there from where the robot is)",
          "stop": "stop the motion; the robot holds where its command is",
          "shutdown": "end the run (the robot is disabled first)"}
DROPS = ("disable", "clear-fault", "shutdown")   # end with the torque off
ACTIONS = (*SIMPLE, "status", "list", "jog", "move", "play", "record")


def register(sub) -> None:
    s = add_command(sub, "ctl", "control a running loop without the twin: e-stop, enable, jog, move, play, record, "
                                "status",
                    "Sends a request to a running `hil run` loop, as the twin's buttons do, and prints the loop's "
                    "answer. Exit codes: 0 done, 1 refused by the loop (the reason said), 2 bad input or no loop, "
                    "3 accepted but the robot stopped short (e-stop, fault, safety hold, or the wait ran out).",
                    ["hil ctl status --json", "hil ctl clear-fault && hil ctl enable",
                     "hil ctl jog elbow +10 wrist_pitch -5", "hil ctl jog --dz 20 --frame tool",
                     "hil ctl move home", "hil ctl play wave.toml", "hil ctl record start run.npy",
                     "hil ctl estop --loop hil_puma560_4242"])
    loop_help = "which loop (`hil ctl list`); needed when more than one runs"
    s.add_argument("--loop", metavar="NAME", help=loop_help)
    actions = s.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser, required=True)

    def action(name: str, summary: str) -> Parser:
        a = actions.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                               allow_abbrev=False)
        a.add_argument("--loop", metavar="NAME", default=None, help=loop_help, dest="loop_here")
        return a

    for name, summary in SIMPLE.items():
        a = action(name, summary)
        if name in DROPS:
            a.add_argument("--yes", action="store_true",
                           help="a humanoid standing on its torque falls when it goes off: asked first, --yes says "
                                "it is held or lowered")
    action("list", "list the running loops")
    st = action("status", "the loop's state: mode, board, faults, motion, joints (degrees)")
    st.add_argument("--json", action="store_true", help="one JSON object per line (SI units: rad, m, s)")
    st.add_argument("--watch", nargs="?", type=float, const=0.5, metavar="SECONDS",
                    help="print it again every SECONDS (default 0.5) until Ctrl-C or the loop ends")
    jog = action("jog", "move joints by (or --to) degrees, or the tool by millimetres and degrees, and wait there")
    jog.add_argument("joints", nargs="*", metavar="JOINT DEG",
                     help="joint names and angles: by how much (degrees, +/-), or where to with --to")
    jog.add_argument("--to", action="store_true", help="the angles are where the joints go, not by how much")
    for axis in ("x", "y", "z"):
        jog.add_argument(f"--d{axis}", type=float, default=0.0, metavar="MM", help=f"move the tool along {axis} (mm)")
    for axis in ("x", "y", "z"):
        jog.add_argument(f"--dr{axis}", type=float, default=0.0, metavar="DEG",
                         help=f"turn the tool about {axis} (degrees, about the tool's point)")
    jog.add_argument("--frame", choices=("base", "tool"), default="base",
                     help="the axes of --dx … --drz: the robot's base (default) or the tool's own")
    _add_wait_options(jog)
    mv = action("move", "move to a named pose of the robot (`hil robots --robot R` lists them) and wait there")
    mv.add_argument("pose", help="the pose's name (home, rest, …)")
    _add_wait_options(mv)
    play = action("play", "plan a motion file (.toml/.json keyframes, .npz trajectory) as `hil run --motion` "
                          "would, load it into the loop and start it")
    play.add_argument("file", help="the motion file")
    play.add_argument("--speed", type=float, default=1.0, metavar="F",
                      help="play it at this fraction of its written pace (0 < F <= 1; default 1)")
    play.add_argument("--no-compensation", action="store_true",
                      help="no compliance compensation (the joints sag under load by what their servos give)")
    play.add_argument("--no-start", action="store_true", help="load it only; `hil ctl start` starts it")
    _add_wait_options(play, "wait for the motion to end (default: return once it runs)")
    rec = action("record", "start or stop recording every cycle to a file (.npy, as `hil run --record`)")
    rec.add_argument("what", choices=("start", "stop"), help="start (give FILE) or stop")
    rec.add_argument("file", nargs="?", help="where to record (start)")
    s.set_defaults(func=run)


def _add_wait_options(a, wait_help: str = "") -> None:
    if wait_help:
        a.add_argument("--wait", action="store_true", help=wait_help)
    else:
        a.add_argument("--no-wait", action="store_true", help="return once the loop took it (do not wait to arrive)")
    a.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="the most seconds to wait (default: what the move needs at the joints' speed limits, "
                        "doubled, plus 5 s)")


def run(args) -> int:
    from hil.runtime.shared import LoopClient, describe_loops

    if args.action == "list":
        lines = describe_loops()
        print("\n".join(lines) if lines else "no hil loop is running")
        return EXIT_DONE
    client = LoopClient(getattr(args, "loop_here", None) or args.loop)
    try:
        if args.action == "status":
            from hil.cli import ctl_status

            return ctl_status.show(client, args.json, args.watch)
        if args.action in SIMPLE:
            if args.action in DROPS and not _drop_agreed(client, args.action, args.yes):
                return EXIT_REFUSED
            return _simple(client, args.action)
        from hil.cli import ctl_moves

        return {"jog": ctl_moves.jog, "move": ctl_moves.move, "play": ctl_moves.play,
                "record": ctl_moves.record}[args.action](client, args)
    finally:
        client.close()


def _drop_agreed(client, action: str, yes: bool) -> bool:
    """Torque off under a humanoid that stands drops it: said, and asked (at a terminal) unless
    --yes; a script without --yes is refused."""
    from hil.cli import ctl_status
    from hil.runtime.lifecycle import ENABLED_MODES, Mode

    if yes:
        return True
    model = ctl_status.model_of(client)
    mode = Mode(int(client.snapshot().mode))
    holding = mode in ENABLED_MODES or mode in (Mode.FAULT, Mode.ESTOP) and action != "disable"
    if model is None or not model.floating or not holding:
        return True
    low = next((p for p in ("rest", "crouch", "sit") if p in model.poses), None)
    lower = f"hil ctl move {low}" if low else f"hil ctl move POSE; its poses: {', '.join(model.poses)}"
    warning = (f"hil ctl {action}: {model.name} stands on its servos' torque: {action} ends with the torque off and it "
               f"falls. Hold it or lower it first ({lower}), then")
    if sys.stdin.isatty():
        reply = input(f"{warning} answer yes to go on: ")
        return reply.strip().lower() in ("y", "yes")
    print(f"{warning} run `hil ctl {action} --yes`", file=sys.stderr)
    return False


def _simple(client, action: str) -> int:
    answer = {"estop": client.estop, "enable": client.enable, "disable": client.disable,
              "clear-fault": client.clear_fault, "start": client.start_motion, "stop": client.stop_motion,
              "shutdown": client.shutdown}[action]()
    if not answer.ok:
        print(f"hil ctl {action}: {client.name}: {answer}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"{client.name}: {answer}")
    return EXIT_DONE
