"""Where a frame of the twin goes: `dpg.render_dearpygui_frame` (with the scene update) timed with
the whole twin shown, then with one part hidden at a time; no loop running. Under Xvfb with
software GL, at the twin's 1280×720. Run:
`xvfb-run -a -s "-screen 0 1280x720x24" python benchmarks/bench_twin_frame.py [--robot humanoid17]`.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("LP_NUM_THREADS", "1")   # as `hil twin` sets it

import dearpygui.dearpygui as dpg  # noqa: E402
import numpy as np  # noqa: E402

from hil import robots  # noqa: E402
from hil.errors import HilError  # noqa: E402
from twin.app import TwinApp  # noqa: E402


def median_frame_ms(app: TwinApp, frames: int) -> float:
    times = []
    for _ in range(frames):
        t = time.perf_counter()
        app.update_scene()
        dpg.render_dearpygui_frame()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times[5:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="humanoid17")
    ap.add_argument("--frames", type=int, default=60)
    args = ap.parse_args()
    if args.frames < 10:
        raise SystemExit("bench_twin_frame: --frames must be at least 10 (the first five are not counted)")
    try:
        model = robots.load(args.robot)
    except HilError as e:
        raise SystemExit(f"bench_twin_frame: --robot {args.robot}: {e}") from None
    app = TwinApp(model, None, title="hil twin — frame parts")
    app.build()
    whole = median_frame_ms(app, args.frames)
    print(f"{args.robot}: {len(dpg.get_all_items())} items; the whole frame {whole:.1f} ms (median)")
    lines = [c for c in dpg.get_item_children("world", 2) if dpg.get_item_type(c).endswith("mvDrawLine")]
    parts = {"side panel": ["panel"], "solid robot": list(app.meas.nodes.values()),
             "ghost": list(app.ghost.nodes.values()), f"grid and axes ({len(lines)} lines)": lines,
             "3-D view": ["view"], "3-D view and panel (the empty window)": ["view", "panel"]}
    for name, tags in parts.items():
        for t in tags:
            dpg.configure_item(t, show=False)
        left = median_frame_ms(app, args.frames)
        for t in tags:
            dpg.configure_item(t, show=True)
        print(f"  without the {name}: {left:.1f} ms ({whole - left:+.1f} ms for it)")
    app.close()


if __name__ == "__main__":
    main()
