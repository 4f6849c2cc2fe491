"""The Zenoh bridge: a process beside the loop that reads the loop's shared block and publishes it,
per robot under `hil/<board id>/`: `state` (joints commanded, measured and target, flags, at the rate
asked, 100 Hz by default), `tool_pose` (the tool frame's 4×4 from the measured joints, row-major,
computed here), `stats` (timing, 1 Hz),
`events` (each event line), and answers `info`, `model` (URDF and joint names) and `request`.

Read-only by default: `request` answers every remote jog, enable, start … with a refusal unless the
run was started with `--zenoh-control` (which needs a config with access control or TLS). E-stop is
always accepted. The loop never waits for the bridge: the bridge only reads the block (and posts
to its mailbox, as `hil ctl` does). Run by `hil run --zenoh`: `python -m hil.remote.zenoh_bridge`.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time

import numpy as np

from hil import robots
from hil.errors import HilError
from hil.remote import session as Z
from hil.robots.urdf_export import to_urdf
from hil.process_life import die_with_parent
from hil.runtime.shared import ESTOP_REMOTE, LoopClient, LoopStatus

REQUESTS = {"enable": "enable", "disable": "disable", "clear_fault": "clear_fault", "start": "start_motion",
            "stop": "stop_motion", "jog": "jog"}


def _json(values: dict) -> bytes:
    out = {}
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, float) and not math.isfinite(v):
            out[k] = None
        else:
            out[k] = v
    return json.dumps(out).encode()


class Bridge:
    def __init__(self, loop: str, rate_hz: float, config_path: str | None, control: bool) -> None:
        self.client = LoopClient(loop)
        self.rate_hz = rate_hz
        self.control = control
        self.session = Z.open_session(Z.load_config(config_path))
        self.stop = False
        self.board = ""
        self.info: dict = {}

    # ----------------------------------------------------------- queries
    def _on_info(self, query) -> None:
        query.reply(Z.key(self.board, Z.INFO), json.dumps(self.info).encode())

    def _on_model(self, query) -> None:

        model = robots.load(self.info["robot"])
        body = {"spec": self.info["robot"], "name": model.name, "joints": list(model.joint_names),
                "kind": model.kind, "urdf": to_urdf(model)}
        query.reply(Z.key(self.board, Z.MODEL), json.dumps(body).encode())

    def _on_request(self, query) -> None:
        query.reply(Z.key(self.board, Z.REQUEST), json.dumps(self.handle(query.payload)).encode())

    def handle(self, payload) -> dict:
        """A remote request: {"kind": "estop" | "enable" | "disable" | "clear_fault" | "start" | "stop" |
        "jog", "q": [rad, …] for jog}; the answer {"ok": bool, "reason": str}."""
        try:
            req = json.loads(payload.to_bytes()) if payload is not None else None
        except ValueError:
            req = None
        if not isinstance(req, dict) or req.get("kind") not in ("estop", *REQUESTS):
            return {"ok": False, "reason": f"a request is {{\"kind\": one of estop, {', '.join(REQUESTS)}}}"}
        kind = req["kind"]
        if kind == "estop":
            answer = self.client.estop(by=ESTOP_REMOTE)
            return {"ok": answer.ok, "reason": str(answer)}
        if not self.control:
            return {"ok": False, "reason": f"{kind} refused: this bridge is read-only (the run on the robot's "
                                           "machine needs --zenoh-control, with access control or TLS)"}
        try:
            method = getattr(self.client, REQUESTS[kind])
            answer = method(np.asarray(req.get("q"), dtype=float)) if kind == "jog" else method()
        except (HilError, TypeError, ValueError) as e:
            return {"ok": False, "reason": f"{kind} refused: {e}"}
        return {"ok": answer.ok, "reason": str(answer)}

    # ----------------------------------------------------------- publishing
    def wait_for_board(self, timeout_s: float = 60.0) -> bool:
        t_end = time.monotonic() + timeout_s
        while not self.stop and time.monotonic() < t_end:
            info = self.client.info()
            if info.get("board"):
                self.board = str(info["board"])
                self.info = {**info, "loop": self.client.name, "rate_hz": self.rate_hz, "control": self.control,
                             "n": self.client.n}
                return True
            if self.client.status() in (LoopStatus.STOPPED, LoopStatus.FAILED):
                return False
            time.sleep(0.05)
        return False

    def run(self) -> int:

        if not self.wait_for_board():
            return 0
        model = robots.load(self.info["robot"])   # the tool pose is computed here, not in the loop
        s = self.session
        keep = [s.declare_queryable(Z.key(self.board, Z.INFO), self._on_info),
                s.declare_queryable(Z.key(self.board, Z.MODEL), self._on_model),
                s.declare_queryable(Z.key(self.board, Z.REQUEST), self._on_request)]
        pub = {what: s.declare_publisher(Z.key(self.board, what)) for what in (Z.STATE, Z.TOOL, Z.STATS, Z.EVENTS)}
        print(f"zenoh bridge: {Z.key(self.board, '*')} at {self.rate_hz:g} Hz"
              f"{', remote control on' if self.control else ', read-only (e-stop accepted)'}", flush=True)
        period = 1.0 / self.rate_hz
        next_t = time.monotonic()
        last_t, last_stats, last_event = None, 0.0, 0
        while not self.stop and self.client.status() not in (LoopStatus.STOPPED, LoopStatus.FAILED):
            snap = self.client.snapshot()
            v = snap.values
            if v["t"] != last_t:
                last_t = v["t"]
                pub[Z.STATE].put(_json({k: v[k] for k in Z.STATE_KEYS if k in v}))
                T = model.fk(np.ascontiguousarray(v["q_meas"]))
                pub[Z.TOOL].put(_json({"t": v["t"], "frame": model.tool_frame, "T": T.reshape(-1)}))
            now = time.monotonic()
            if now - last_stats >= 1.0:
                last_stats = now
                pub[Z.STATS].put(_json({"t": v["t"], **{k: v[k] for k in Z.STATS_KEYS if k in v}}))
            last_event, texts = self.client.state.events_since(last_event)
            for text in texts:
                pub[Z.EVENTS].put(json.dumps({"t": v["t"], "text": text}).encode())
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))
            if next_t < time.monotonic() - 1.0:
                next_t = time.monotonic()   # far behind (a stalled machine): start again from now
        del keep
        return 0

    def close(self) -> None:
        try:
            self.session.close()
        finally:
            self.client.close()


def main(argv=None) -> int:

    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m hil.remote.zenoh_bridge")
    p.add_argument("--loop", required=True)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--config")
    p.add_argument("--control", action="store_true")
    p.add_argument("--parent-pid", type=int)
    args = p.parse_args(argv)
    if die_with_parent(signal.SIGTERM, args.parent_pid):
        return 0
    try:
        bridge = Bridge(args.loop, args.rate, args.config, args.control)
    except HilError as e:
        print(f"zenoh bridge: {e}", file=sys.stderr)
        return 2

    def on_signal(signum, frame):
        bridge.stop = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        return bridge.run()
    except HilError as e:   # the loop's block went away: the run is over
        print(f"zenoh bridge: {e}", file=sys.stderr)
        return 0
    finally:
        bridge.close()


if __name__ == "__main__":
    sys.exit(main())
