"""`hil replay`: a recording played into the twin."""

from __future__ import annotations

from hil.cli.common import add_command, twin_beside_a_run


def register(sub) -> None:
    s = add_command(sub, "replay", "play a recording (from hil run --record) into the twin",
                    "Publishes the recorded rows as a loop would, so the twin shows them; needs the recording's "
                    ".json beside it (written with it).",
                    ["hil replay run.npy", "hil replay run.npy --speed 0.5 --loop"])
    s.add_argument("file", metavar="FILE.npy", help="a recording from `hil run --record`")
    s.add_argument("--speed", type=float, default=1.0, help="playback speed factor")
    s.add_argument("--headless", action="store_true", help="no twin; print progress")
    s.add_argument("--loop", action="store_true", help="repeat until Ctrl-C")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil.inputs import number
    from hil.runtime.replay import replay

    number(args.speed, "--speed", 0.01, 100, "× recorded speed")
    return replay(args.file, args.speed, args.headless, args.loop, start_twin=twin_beside_a_run())
