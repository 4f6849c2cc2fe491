"""The far side of the Zenoh bridge: a client with the LoopClient calls the twin makes (snapshot,
info, estop, enable …, jog), and the listing of the robots on the network (`hil robots --zenoh`)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np

from hil.errors import HilError, InputError
from hil.remote import session as Z
from hil.runtime.shared import Answer, Snapshot

ARRAYS = {"q_cmd", "q_meas", "q_target", "qd_meas", "com", "jitter_hist", "T", "load"}


def _values(raw: bytes) -> dict:
    d = json.loads(raw)
    return {k: (np.asarray(v, dtype=float) if k in ARRAYS else (float("nan") if v is None else v)) for k, v in d.items()}


def robots_on(session, timeout_s: float = 2.0) -> list[dict]:
    """What each bridge on the network says of its run (robot, board, loop, rate, control)."""
    out = []
    for reply in session.get(Z.key("*", Z.INFO), timeout=timeout_s):
        try:
            info = json.loads(reply.ok.payload.to_bytes())
        except (AttributeError, ValueError):
            continue   # an error reply, or not ours
        if isinstance(info, dict) and info.get("board"):
            out.append(info)
    return sorted(out, key=lambda i: str(i.get("board")))


class ZenohClient:
    """A remote loop through its bridge. Requests come back with the bridge's answer as a sentence
    (a read-only bridge refuses all but e-stop)."""

    def __init__(self, locator: str | None = None, config_path: str | None = None, board: str | None = None,
                 timeout_s: float = 5.0) -> None:
        self.session = Z.open_session(Z.load_config(config_path, connect=locator or None))
        t_end = time.monotonic() + timeout_s
        found: list[dict] = []
        while time.monotonic() < t_end and not found:
            found = [i for i in robots_on(self.session, min(2.0, timeout_s)) if board in (None, i.get("board"))]
        if not found:
            self.session.close()
            where = f" at {locator}" if locator else ""
            raise HilError(f"no hil robot answers over Zenoh{where}" + (f" with board {board}" if board else "")
                           + "; start one with `hil run … --zenoh` (and check the endpoints)")
        if len(found) > 1:
            self.session.close()
            raise InputError("several hil robots answer over Zenoh; name one with --board: "
                             + ", ".join(f"{i['board']} ({i.get('robot')})" for i in found))
        self._info = found[0]
        self.board = str(self._info["board"])
        self.n = int(self._info["n"])
        self.name = f"{self._info.get('loop', 'remote')} over Zenoh"
        self._lock = threading.Lock()
        self._state: dict = {}
        self._stats: dict = {}
        self._tool: dict = {}
        self._event = ""
        self.received = 0
        self.started = time.monotonic()     # when the subscriptions began (for the rate received)
        self._subs = [self.session.declare_subscriber(Z.key(self.board, what), handler) for what, handler in (
            (Z.STATE, self._on_state), (Z.STATS, self._on_stats), (Z.TOOL, self._on_tool), (Z.EVENTS, self._on_event))]

    def _on_state(self, sample) -> None:
        v = _values(sample.payload.to_bytes())
        with self._lock:
            self._state = v
            self.received += 1

    def _on_stats(self, sample) -> None:
        v = _values(sample.payload.to_bytes())
        with self._lock:
            self._stats = v

    def _on_tool(self, sample) -> None:
        v = _values(sample.payload.to_bytes())
        with self._lock:
            self._tool = v

    def _on_event(self, sample) -> None:
        with self._lock:
            self._event = str(json.loads(sample.payload.to_bytes()).get("text", ""))

    # ------------------------------------------------------------ reading
    def snapshot(self) -> Snapshot:
        with self._lock:
            if not self._state:
                raise HilError(f"no state from {self.board} yet")
            values = {k: 0.0 for k in Z.STATS_KEYS}
            values.update(jitter_hist=np.zeros(20), com=np.zeros(3), T_tool=np.full(16, np.nan))
            values.update(self._stats)
            values.update(self._state)
            if "load" not in values:   # a bridge of an earlier hil publishes none
                values["load"] = np.zeros(len(values["q_meas"]))
            if "T" in self._tool:
                values["T_tool"] = self._tool["T"]
            return Snapshot(values, self._event)

    def info(self) -> dict:
        return dict(self._info)

    def model_description(self) -> dict:
        """The bridge's model: {"spec", "name", "joints", "kind", "urdf"}."""
        for reply in self.session.get(Z.key(self.board, Z.MODEL), timeout=5.0):
            try:
                return json.loads(reply.ok.payload.to_bytes())
            except (AttributeError, ValueError):
                continue
        raise HilError(f"the bridge of {self.board} did not send its model")

    # ------------------------------------------------------------ requests
    def request(self, kind: str, q=None) -> Answer:
        """The remote loop's answer (as LoopClient's): the sentence, and `ok` whether accepted."""
        body = {"kind": kind} if q is None else {"kind": kind, "q": np.asarray(q, float).tolist()}
        for reply in self.session.get(Z.key(self.board, Z.REQUEST), payload=json.dumps(body).encode(), timeout=3.0):
            try:
                answer = json.loads(reply.ok.payload.to_bytes())
                return Answer(str(answer.get("reason", "")), bool(answer.get("ok")))
            except (AttributeError, ValueError):
                continue
        return Answer(f"{kind}: no answer from {self.board} (the bridge is gone or the network is down)", False)

    def estop(self) -> Answer:
        return self.request("estop")

    def enable(self) -> Answer:
        return self.request("enable")

    def disable(self) -> Answer:
        return self.request("disable")

    def clear_fault(self) -> Answer:
        return self.request("clear_fault")

    def start_motion(self) -> Answer:
        return self.request("start")

    def stop_motion(self) -> Answer:
        return self.request("stop")

    def jog(self, q) -> Answer:
        return self.request("jog", q)

    def close(self) -> None:
        self.session.close()
