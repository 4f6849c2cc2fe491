"""The helpers beside a run — the twin, the Zenoh bridge, the shadow — each in its own process
(DearPyGui must never share a process with the loop, nor network I/O or physics its CPU), each
ending with the run that started it (`process_life.start_helper`).

The twin and the bridge are layers above the runtime, which does not name them: whoever starts a
run (the CLI) hands the runtime a `TwinStarter` and the bridge's main. The shadow is the runtime's own.
"""

from __future__ import annotations

from typing import Callable, Protocol

from hil.process_life import start_helper


class TwinStarter(Protocol):
    def __call__(self, loop_name: str, robot: str, path: str | None = None, view: str | None = None):
        """The twin attached to the loop (or replay, or calibration) publishing as `loop_name`, in a
        process of its own that ends with this one; returns that `multiprocessing.Process`."""


def twin_starter(main: Callable[[list[str]], int]) -> TwinStarter:
    """The starter of a twin run as `main(["twin", "--attach", NAME, …])` (the CLI's main)."""
    def start(loop_name: str, robot: str, path: str | None = None, view: str | None = None):
        argv = ["twin", "--attach", loop_name, "--robot", robot]
        if path:
            argv += ["--path", path]
        if view:
            argv += ["--view", view]
        return start_helper(main, (argv,), "hil-twin")
    return start


def start_bridge(bridge_main: Callable[[list[str]], int], loop_name: str, rate_hz: float, config: str | None,
                 control: bool):
    """The Zenoh bridge (`bridge_main`: hil.remote.zenoh_bridge.main) publishing the loop `loop_name`."""
    argv = ["--loop", loop_name, "--rate", str(rate_hz)]
    if config:
        argv += ["--config", config]
    if control:
        argv.append("--control")
    return start_helper(bridge_main, (argv,), "hil-zenoh")


def start_shadow(loop_name: str, robot: str, board_config: str | None, record: str | None):
    """The shadow twin (hil.runtime.shadow) beside the loop `loop_name`."""
    argv = ["--loop", loop_name, "--robot", robot]
    if board_config:
        argv += ["--board-config", board_config]
    if record:
        argv += ["--record", record]
    return start_helper(_shadow_main, (argv,), "hil-shadow")


def _shadow_main(argv: list[str]) -> int:
    from hil.runtime.shadow import main   # lazy: MuJoCo is imported in the shadow's process only

    return main(argv)
