"""`hil twin`: the 3D twin (twin/)."""

from __future__ import annotations

from hil.cli.common import add_command


def register(sub) -> None:
    from twin.twin_command import add_arguments

    s = add_command(sub, "twin", "the 3D digital twin: attach to a running loop, or --screenshot one frame",
                    "Measured pose solid, commanded pose as a ghost, previews in pink; SPACE or the button is "
                    "the e-stop. Needs an X display (or xvfb-run).",
                    ["hil twin", "hil twin --loop hil_puma560_4242",
                     "hil twin --screenshot puma.png --robot puma560 --pose-deg 60 -40 120 0 30 0"])
    add_arguments(s)
    s.set_defaults(func=run)


def run(args) -> int:
    from twin.twin_command import main

    return main(args)


def main(argv: list[str]) -> int:
    """`hil twin …` alone, as a run starts its twin in a process of its own (hil.cli.running): the
    twin's own parser and the commands' one way of ending (hil.cli.common.run_command)."""
    from hil.cli.common import HelpFormatter, Parser, run_command

    Parser.argv = list(argv)
    p = Parser(allow_abbrev=False, prog="hil", formatter_class=HelpFormatter)
    register(p.add_subparsers(dest="command", parser_class=Parser))
    args = p.parse_args(argv)
    return run_command("twin", args.func, args)
