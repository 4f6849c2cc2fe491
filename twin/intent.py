"""What the operator asks of the twin, apart from its window: the pose previewed (a dragged link, a
Cartesian target), what the safety checks say of it, which links they flag, and the requests sent
to the loop. Every decision the twin takes about motion is made here and answered as a sentence;
twin/app.py only shows the sentences and draws the poses, so all of it is tested without a window
(tests/unit/test_twin_intent.py).

Nothing here moves a robot by itself: a preview is only drawn until Send, and a preview the checks
refuse is dropped with their reasons, never sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hil.kinematics import Task, ik_lm
from hil.safety import BALANCE, COLLISION, WORKSPACE, SafetyChecker

DRAG_RAD_PER_PX = math.radians(0.5)   # a joint dragged in the view turns half a degree per pixel
JOG_EVERY_S = 0.05                    # a slider dragged sends at most this often: the loop ramps between


@dataclass
class Flagged:
    """What the safety checks flag in the view: links to colour, whether the balance is flagged
    (the support polygon turns that colour) and the reason to show (None: keep the last one)."""

    links: set[int] = field(default_factory=set)
    balance: bool = False
    reason: str | None = None


@dataclass
class Said:
    """A decision's words: `panel` beside the Cartesian controls, `event` in the event line (None:
    nothing there)."""

    panel: str | None = None
    event: str | None = None


class TwinIntent:
    """The operator's intent for one model and (when attached) the loop's client."""

    def __init__(self, model, client=None) -> None:
        self.model = model
        self.client = client
        self.preview_q: np.ndarray | None = None   # drawn in pink; what Send asks the loop to go to
        self.drag_joint: int | None = None         # the joint whose link is being dragged
        self._drag_q0: np.ndarray | None = None
        self.estop_sent = 0
        self._last_jog = -math.inf
        self._checker: SafetyChecker | None = None

    @property
    def checker(self) -> SafetyChecker:
        if self._checker is None:   # built on first use: a screenshot without checks never pays for it
            self._checker = SafetyChecker(self.model)
        return self._checker

    # ------------------------------------------------------------------ previews
    def start_drag(self, joint: int, q_meas: np.ndarray) -> None:
        """A link picked in the view: its joint turns from the preview shown, else the measured pose."""
        q0 = self.preview_q if self.preview_q is not None else q_meas
        self.drag_joint, self._drag_q0 = joint, np.array(q0, dtype=np.float64)

    def drag(self, dx_px: float) -> Said:
        """The dragged joint turned by the mouse's travel, kept inside its range: previewed only."""
        j, m = self.drag_joint, self.model
        q = self._drag_q0.copy()
        q[j] = float(np.clip(q[j] + dx_px * DRAG_RAD_PER_PX, m.lower[j], m.upper[j]))
        self.preview_q = q
        deg = math.degrees(q[j])
        return Said(f"{m.joint_names[j]} → {deg:.1f}° (pink preview, within its range): Send moves the robot there",
                    f"dragging {m.joint_names[j]}: {deg:.1f}° — Send (Cartesian tab) to move")

    def release(self) -> Said:
        """The drag ends: a preview the checks refuse is dropped, with their reasons."""
        said = Said()
        if self.drag_joint is not None and self.preview_q is not None:
            verdict = self.checker.check(self.preview_q)
            if not verdict:
                said.panel = "; ".join(verdict.reasons) + " — will not be sent"
                self.preview_q = None
        self.drag_joint = None
        return said

    def preview_target(self, frame: str, T: np.ndarray, q_meas: np.ndarray) -> Said:
        """IK to `T` (a humanoid: the frame's position, by LM; an arm: the pose, its own IK) from the
        measured pose; previewed when reached and safe, else nothing to send and why."""
        m = self.model
        if m.floating:
            res = ik_lm(m, [Task(frame, T[:3, 3], mask="position")], q_meas)
        else:
            res = m.ik(T, q_near=q_meas)
        self.preview_q = None
        if not res.success:
            return Said(f"out of reach: {res.reason}. Nothing will be sent")
        verdict = self.checker.check(res.q)
        if not verdict:
            return Said("IK ok, but: " + "; ".join(verdict.reasons) + " — will not be sent")
        self.preview_q = res.q
        return Said(f"IK ok ({res.branch or 'LM'}), preview shown in pink")

    def drop(self) -> None:
        self.preview_q = None

    def send(self) -> Said:
        """The preview to the loop, which ramps there at a bounded speed (its own checks again)."""
        if self.preview_q is None:
            return Said("preview a reachable, safe target first")
        if self.client is None:
            return Said("no loop attached")
        reply = self.client.jog(self.preview_q)
        if isinstance(reply, str) and "refused" in reply:
            return Said(reply, reply)
        return Said("sent: the loop ramps there at a bounded speed", "preview sent: the loop ramps there at a bounded speed")

    # ------------------------------------------------------------------ requests
    def estop(self) -> str:
        self.estop_sent += 1
        reply = self.client.estop() if self.client is not None else None
        return reply if isinstance(reply, str) and reply else "E-STOP sent"   # a remote loop answers

    def post(self, what: str) -> str:
        """A request by name (enable, disable, clear_fault, …) to the loop; its answer."""
        if self.client is None:
            return f"{what}: no loop attached (start one with `hil run`)"
        reply = getattr(self.client, what)()
        return reply if isinstance(reply, str) and reply else f"{what} requested"

    def jog_sliders(self, q: np.ndarray, now: float) -> str | None:
        """The sliders' pose to the loop, at most every JOG_EVERY_S; a refusal's words, else None."""
        if self.client is None or now - self._last_jog <= JOG_EVERY_S:
            return None
        self._last_jog = now
        reply = self.client.jog(q)
        return reply if isinstance(reply, str) and "refused" in reply else None

    # ------------------------------------------------------------------ judging
    def flagged(self, q_meas: np.ndarray, q_target: np.ndarray | None, safety_flags: int) -> Flagged:
        """Links to colour as the safety checks flag them — the two in a self-collision, the tool's
        when it leaves the workspace: attached, as the loop flags its target (what its checks
        judged); without a loop, as this side's checks judge the shown pose."""
        out = Flagged()
        if self.client is not None:
            flags = safety_flags
            q = q_target if flags & (COLLISION | WORKSPACE) and q_target is not None else None
        else:
            q = q_meas
            flags = self.checker.check(q).flags
            if flags:
                out.reason = "safety: " + "; ".join(self.checker.explain(flags, q))
        out.balance = bool(flags & BALANCE)
        if q is None:
            return out
        if flags & COLLISION:
            pair, reason = self.checker.colliding_links(q)
            out.links |= pair
            if reason and self.client is not None:
                out.reason = f"safety: {reason}"
        if flags & WORKSPACE:
            out.links.add(int(self.model.frame_link[self.model.frame_index(self.model.tool_frame)]))
        return out
