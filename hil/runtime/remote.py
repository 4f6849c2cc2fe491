"""What a remote (`hil ctl`, a script) hands a running loop beyond a mailbox slot: a planned
motion to load, a file to record into. The remote does the slow part (planning, every check of
`hil run --motion`) in its own process and leaves the result as an attachment in this user's
private runtime folder; the loop reads it in a thread of its own, so that no cycle waits on a
disk, and swaps it in between cycles.

The run card (hil.runtime.run_card) tells a remote how the loop plans.
"""

from __future__ import annotations

import json
import os
import secrets
import threading

import numpy as np

from hil.errors import HilError, InputError, message
from hil.runtime.motion_sources import Trajectory
from hil.runtime.shared import TOKEN_MAX, LoopRequest, attachment_path

MOTION_ANSWER_S = 30.0   # a remote waits this long for a loaded motion's answer (read from disk first)
MOTION_KEYS = ("t", "q", "q_plan", "support", "dynamic_balance_checked", "time_scale", "duration")


# ------------------------------------------------------------------ a remote's side
def _new_token() -> int:
    return 1 + secrets.randbelow(TOKEN_MAX - 2)


def post_motion(client, motion) -> "object":
    """Hand a planned `Trajectory` to the loop; the loop's answer (loaded, or refused and why)."""
    token = _new_token()
    path = attachment_path(client.name, token, ".npz")
    arrays = {"t": motion.t, "q": motion.q, "q_plan": motion.q_plan,
              "support": motion.support if motion.support is not None else np.zeros(0, dtype=np.int64),
              "dynamic_balance_checked": np.array(bool(motion.dynamic_balance_checked)),
              "time_scale": np.array(float(motion.time_scale)), "duration": np.array(float(motion.duration))}
    texts = json.dumps({"name": motion.name, "note": motion.note,
                        "balance_checked_by": getattr(motion, "balance_checked_by", "zmp")})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, texts=np.array(texts), **arrays)
        return client.state.wait_answer(client.state.post(LoopRequest.LOAD_MOTION, [token]), MOTION_ANSWER_S)
    finally:
        _remove(path)


def post_record_start(client, path: str):
    token = _new_token()
    where = attachment_path(client.name, token, ".json")
    fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"path": os.path.abspath(path)}, f)
        return client.state.wait_answer(client.state.post(LoopRequest.RECORD_START, [token]), MOTION_ANSWER_S)
    finally:
        _remove(where)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ------------------------------------------------------------------ the loop's side
def read_motion(loop: str, token: int, model):
    """The planned motion behind `token`, as a Trajectory for `model`: every array the right shape,
    finite, its times rising, its joints inside their ranges (the remote planned it with every
    check of a run; this is what a file from another process must at least be)."""
    path = attachment_path(loop, token, ".npz")
    try:
        with np.load(path, allow_pickle=False) as f:
            got = {k: np.asarray(f[k]) for k in (*MOTION_KEYS, "texts")}
    except (OSError, KeyError, ValueError) as e:
        raise InputError(f"the planned motion could not be read ({e})") from None
    texts = json.loads(str(got["texts"]))
    traj = Trajectory(got["t"], got["q"], name=str(texts.get("name", "motion")))
    q_plan = np.asarray(got["q_plan"], dtype=np.float64)
    if traj.q.shape[1] != model.n or q_plan.shape != traj.q.shape or not np.all(np.isfinite(q_plan)):
        raise InputError(f"the planned motion is not for {model.n} joints")
    for Q in (traj.q, q_plan):
        if np.any(Q < model.lower - 1e-6) or np.any(Q > model.upper + 1e-6):
            raise InputError("the planned motion goes outside the joint ranges")
    traj.q_plan = q_plan
    support = got["support"]
    if support.shape == traj.t.shape:
        traj.support = support.astype(np.int64)
    traj.dynamic_balance_checked = bool(got["dynamic_balance_checked"])
    if texts.get("balance_checked_by") == "physics":   # what the loop says of it (its note)
        traj.balance_checked_by = "physics"
    traj.time_scale = float(got["time_scale"])
    traj.note = str(texts.get("note", ""))
    return traj


def record_target(loop: str, token: int) -> str:
    path = attachment_path(loop, token, ".json")
    try:
        with open(path) as f:
            target = json.load(f).get("path")
    except (OSError, ValueError, AttributeError) as e:
        raise InputError(f"where to record could not be read ({e})") from None
    if not isinstance(target, str) or not target:
        raise InputError("no file named to record into")
    return target


class Job:
    """Something slow for the loop done in a thread of its own; `done()` is polled each cycle and
    gives (rid, result, error) once, when it has finished."""

    def __init__(self, rid: int, kind: LoopRequest, work) -> None:
        self.rid, self.kind = rid, kind
        self.result = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name="hil-remote", daemon=True)
        self._thread.start()

    def _run(self, work) -> None:
        try:
            self.result = work()
        except (HilError, OSError, ValueError) as e:
            self.error = message(e)

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
