"""The `hil` command line: one module per command (`*_cmd.py`, each with `register(sub)` and
`run(args)`), the parser assembled here. Degrees and millimetres at this boundary, SI inside.

Commands import their heavy modules (NumPy, the Numba kernels, DearPyGui) inside `run`, so that
`hil --help` and `hil ctl` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, Sequence

import hil
from hil.cli import (calibrate_cmd, ctl_cmd, emulate_cmd, export_cmd, fk_cmd, path_cmd, play_cmd, ports_cmd, replay_cmd,
                     robots_cmd, rtcheck_cmd, run_cmd, teleop_cmd, twin_cmd, urdf_cmd, walk_cmd, warmup_cmd)
from hil.cli.common import HelpFormatter, Parser, run_command
from hil.process_life import end_command_process, start_command_process

# in the order `hil --help` lists them
COMMANDS = (run_cmd, ctl_cmd, twin_cmd, play_cmd, walk_cmd, path_cmd, teleop_cmd, calibrate_cmd, robots_cmd, fk_cmd,
            urdf_cmd,
            ports_cmd, rtcheck_cmd, emulate_cmd, replay_cmd, export_cmd, warmup_cmd)
def build_parser() -> argparse.ArgumentParser:
    p = Parser(allow_abbrev=False, prog="hil", formatter_class=HelpFormatter,
                                description="hardware-in-the-loop controller with a digital twin: PUMA 560, "
                                            "17-DOF humanoid, SO-101, or your own arm or humanoid from its URDF "
                                            "(--robot FILE.urdf; `hil robots` lists them), on a board or servo bus "
                                            "over USB or on the built-in emulator",
                                epilog="start with:\n  hil run --robot puma560 --dry-run --headless --duration 10 "
                                       "--enable --motion demo\n`hil COMMAND --help` says more about each command.")
    p.add_argument("--version", action="version", version=f"hil {hil.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    p.set_defaults(subcommands=sub.choices)   # each command's own parser, by name (its errors, its usage)
    for command in COMMANDS:
        command.register(sub)
    return p


def entry() -> NoReturn:
    """The `hil` script and `python -m hil`: `main`, in a process of its own."""
    start_command_process()
    end_command_process(main())


def main(argv: Sequence[str] | None = None) -> int:
    Parser.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
    except KeyboardInterrupt:   # Ctrl-C before the command started: nothing to undo
        print("hil: interrupted", file=sys.stderr)
        return 130
    if extra:   # said by the command's own parser: its usage, and the option that was meant
        sub = args.subcommands.get(args.command) if args.command else None
        (sub or parser).error(f"unrecognized arguments: {' '.join(a or repr(a) for a in extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    sub = args.subcommands[args.command]
    empty = _given_empty(sub, args)
    if empty:   # `--record "$OUT"` with OUT unset: said, not taken for the option left out
        sub.error(f"{empty} '': an empty value (an unset shell variable?); give one"
                  + (", or leave the option out" if empty.startswith("-") else ""))
    return run_command(args.command, args.func, args)


def _given_empty(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The first option given as an empty string whose absence means something else (its default
    None: no file, no recording, the default robot map); None when there is none."""
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.default is None and (value == "" or (isinstance(value, list) and "" in value)):
            return action.option_strings[-1] if action.option_strings else (action.metavar or action.dest)
    return None


if __name__ == "__main__":
    sys.exit(main())
