"""`hil warmup`: compile the kernels ahead of the first run."""

from __future__ import annotations

from hil.cli.common import add_command


def register(sub) -> None:
    s = add_command(sub, "warmup", "compile the Numba kernels now, so the first `hil run` starts at once",
                    "Compiles (and caches on disk) every kernel the loop, the planners and IK use: about 1–2 "
                    "minutes the first time on a machine, seconds after.", ["hil warmup"])
    s.set_defaults(func=run)


def run(args) -> int:
    from hil.warmup import cache_is_cold, compile_all

    print("compiling every kernel (about a minute the first time) …" if cache_is_cold()
          else "kernels already compiled; checking each loads …", flush=True)
    seconds = compile_all(lambda text: print(f"  {text}", flush=True))
    print(f"done in {seconds:.1f} s: `hil run` and the planners now start without compiling")
    return 0
