"""A walk checked from the joint angles it produces, not from its plan: feet and centre of mass from
forward kinematics through the floating base (rooted at the support sole), the ZMP from the COM's
finite-difference acceleration with the cart-table relation, the support polygon from the soles
actually on the ground; and the refusal of a walk that fails those checks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hil.errors import UnreachableError
from hil.motion import contacts
from hil.motion.contacts import AIR, FLAT
from hil.motion.gait import FEET, WalkParams
from hil.motion.plan_check import check_commands, check_plan
from hil.motion.preview import G
from hil.motion.torques import TorquePlan, body_poses
from hil.robots.legs import legs
from hil.robots.model import SOLE_FRAMES
from hil.safety import support_hull_margin


CONTACT_TOLERANCE = 1e-6   # a sole the plan has down may lie this far off the ground (m)
SLIDE_TOLERANCE = 1e-6     # and move this far while it is down (m)


@dataclass
class WalkResult:
    t: np.ndarray
    q: np.ndarray
    support: np.ndarray           # 0 both, 1 left, 2 right (planned)
    com_w: np.ndarray             # COM in the world, from FK of q
    zmp_w: np.ndarray             # ZMP computed back from com_w
    zmp_ref: np.ndarray
    feet_w: np.ndarray            # (N, 2, 4, 4) world poses of l_sole, r_sole from FK of q
    margin: np.ndarray            # ZMP distance inside the support polygon (m), per sample
    slide: float                  # largest drift of a foot while it is on the ground (m)
    min_foot_z: float             # lowest sole corner (m)
    max_speed_ratio: float
    knee_mid_stance_deg: float    # support knee's distance from straight at mid-stance (deg), worst step
    leg_short_mm: float           # support leg (hip pitch to ankle pitch axis) short of full extension
    ik_worst: float
    report: list[str] = field(default_factory=list)
    com_ref: np.ndarray | None = None
    contact_error: float = 0.0    # largest height (or depth) of a sole corner while the plan has it down (m)
    lowest: np.ndarray | None = None   # per sample, the lowest sole corner (m)
    params: "WalkParams | None" = None  # what it was planned with, every default filled in
    torques: "TorquePlan | None" = None  # the servos' torques and the compensated commands (`plan`)

    @property
    def q_cmd(self) -> np.ndarray:
        """What the servos are told (N, n): the joint angles plus the compliance compensation."""
        return self.q if self.torques is None else self.torques.q_cmd

    def save(self, path: str) -> None:
        """t, the commands `q` (compensated), the plan `q_plan`, the torques `tau`, support, COM, ZMP."""
        extra = {} if self.torques is None else {"q_plan": self.q, "tau": self.torques.tau}
        np.savez(path, t=self.t, q=self.q_cmd, support=self.support, com_w=self.com_w, zmp_w=self.zmp_w,
                 zmp_ref=self.zmp_ref, dynamic_balance_checked=np.array(True), **extra)

    def summary(self) -> str:
        knee = "" if math.isnan(self.knee_mid_stance_deg) else (
            f", support knee at mid-stance {self.knee_mid_stance_deg:.1f}° from straight "
            f"(leg {self.leg_short_mm:.1f} mm short of full extension)")
        stand = self.params.stand if self.params is not None else None
        first = f" (standing {stand:.2f} s before its first shift and after its last)" if stand else ""
        return (f"plan: {self.report[0]}, {self.t[-1]:.1f} s{first}, ZMP margin ≥ {1e3 * self.margin.min():.1f} mm, "
                f"feet slide ≤ {1e3 * self.slide:.2f} mm, peak joint speed {100 * self.max_speed_ratio:.0f}% "
                f"of the limits" + knee)


def refuse_unsafe(model, res: WalkResult) -> None:
    """UnreachableError at the first sample of a planned walk that fails a check (see `plan`)."""
    k = int(np.argmin(np.nan_to_num(res.margin, nan=-np.inf)))
    if not res.margin[k] > 0:
        raise UnreachableError(f"walk: refused: the planned ZMP leaves {model.name}'s support polygon "
                               f"({1e3 * res.margin[k]:.1f} mm) at t = {res.t[k]:.3f} s; try a shorter stride, "
                               "a longer --period, or a home pose the robot walks from (docs/robots.md)")
    if res.min_foot_z < -CONTACT_TOLERANCE:
        k = int(np.argmin(res.lowest))
        raise UnreachableError(f"walk: refused: a sole corner goes {-1e3 * res.min_foot_z:.3f} mm into the ground "
                               f"at t = {res.t[k]:.3f} s; try a larger --lift or a shorter stride")
    if res.contact_error > CONTACT_TOLERANCE or res.slide > SLIDE_TOLERANCE:
        raise UnreachableError(f"walk: refused: a foot on the ground is {1e3 * res.contact_error:.3f} mm off it "
                               f"or slides {1e3 * res.slide:.3f} mm; try a shorter stride or a longer --period")
    # the plan and its commands as the loop will check them (balance: the ZMP's, checked above)
    advice = "try a wider --width, a shorter stride or a smaller --side"
    check_plan(model, res.t, res.q, static_balance=False, where="walk", advice=advice)
    if res.torques is not None:
        check_commands(model, res.t, res.q_cmd, static_balance=False, where="walk",
                       advice=advice + (" or --no-compensation" if res.torques.compensated else ""))


def check_walk(model, t, Q, support, zmp_ref, p: WalkParams, hl, hw, worst, label) -> WalkResult:
    """The checks, from the joint angles alone (FK through the root-switching floating base) and
    what the plan says touches the ground (`support`, codes of hil.motion.contacts)."""
    dt = t[1] - t[0]
    feet_contacts = [contacts.decode(int(c)) for c in support]
    soles = np.stack([model.fk_batch(Q, s) for s in SOLE_FRAMES], axis=1)
    body = body_poses(model, Q, feet_contacts, soles)
    feet = np.matmul(body[:, None], soles)
    com_body = np.array([model.com(q) for q in Q])
    com = np.matmul(body[:, :3, :3], com_body[:, :, None])[..., 0] + body[:, :3, 3]
    # COM acceleration by the finest central second difference the samples allow
    h = 1
    acc = np.zeros_like(com)
    acc[h:-h] = (com[2 * h:] - 2 * com[h:-h] + com[:-2 * h]) / (h * dt) ** 2
    zmp = com[:, :2] - com[:, 2:3] * acc[:, :2] / (G + acc[:, 2:3])
    # the plan says which corners of each sole are down: on the ground, still, the ZMP inside them
    margin, lowest, contact_error, slide = _sole_contacts(feet, feet_contacts, zmp, hl, hw)
    qd = np.diff(Q, axis=0) / dt
    sp = float(np.max(np.abs(qd) / model.velocity_limit))
    knee_dev, short = _support_knees(model, Q, support)
    # the first and last h samples have no second difference: they take their neighbours' value
    margin[:h] = margin[h]
    margin[-h:] = margin[-h - 1]
    res = WalkResult(t, Q, support, com, zmp, zmp_ref, feet, margin, slide, float(lowest.min()), sp, knee_dev, short,
                     float(worst), [label], contact_error=contact_error, lowest=lowest)
    return res


def _sole_contacts(feet: np.ndarray, feet_contacts: list, zmp: np.ndarray, hl: float, hw: float):
    """The corners the plan has down must lie on the ground (`contact_error`: their largest height
    or depth) and must not move while they stay down (`slide`); every corner's lowest height per
    sample (`lowest`); the ZMP's distance inside what is down (`margin`, -inf with fewer than three
    corners down)."""
    names = [[nm for nm, _, _ in contacts.corners(side, FLAT, hl, hw)] for side in FEET]
    corners = np.array([[x, y, 0, 1] for _, x, y in contacts.corners("l", FLAT, hl, hw)]).T
    # which of a foot's four corners each contact code has down
    down = np.zeros((2, 4, 4), dtype=bool)
    for f in range(2):
        for c in range(4):
            for nm, _, _ in contacts.corners(FEET[f], c, hl, hw):
                down[f, c, names[f].index(nm)] = True
    # every corner of both soles at every sample at once: (samples, foot, corner, xyz)
    at = np.matmul(feet, corners)[:, :, :3, :].transpose(0, 1, 3, 2)
    lowest = at[..., 2].min(axis=(1, 2))
    N = len(feet)
    codes = np.array(feet_contacts, dtype=np.int64)               # (samples, foot)
    held = down[np.arange(2)[None, :], codes]                     # (samples, foot, corner)
    contact_error = float(np.abs(at[..., 2][held]).max(initial=0.0))
    # a corner held down stays where it was put down: its distance from there, while it stays down
    k = np.arange(N)[:, None, None]
    began = held & ~np.concatenate([np.zeros((1, 2, 4), dtype=bool), held[:-1]])
    since = np.maximum.accumulate(np.where(began, k, 0), axis=0)
    anchor = np.take_along_axis(at, since[..., None], axis=0)
    slide = float(np.linalg.norm(at - anchor, axis=-1)[held].max(initial=0.0))
    margin = np.full(N, -math.inf)
    for i, (pts, z) in enumerate(zip(at[..., :2], zmp)):
        if held[i].sum() >= 3:
            margin[i] = support_hull_margin(pts[held[i]], z)
    return margin, lowest, contact_error, slide


def _support_knees(model, Q, support) -> tuple[float, float]:
    """The support knee at mid-stance, worst step: degrees from straight and how much shorter the
    leg is than straight, hip-pitch axis to ankle-pitch axis, mm (`knee_bend`). NaN for legs
    without a knee (hil.robots.legs)."""
    leg_of = legs(model)
    if any(leg.knee is None or leg.ankle_pitch is None for leg in leg_of.values()):
        return math.nan, math.nan
    knee_dev = 0.0
    short = 0.0
    in_air = np.array([AIR in contacts.decode(int(c)) for c in support])
    runs = np.flatnonzero(np.diff(np.concatenate([[0], in_air.astype(int), [0]])))
    for a, b in zip(runs[::2], runs[1::2]):
        mid_k = (a + b) // 2
        leg = leg_of["l" if contacts.decode(int(support[mid_k]))[0] != AIR else "r"]
        bend, shorter = knee_bend(model, Q[mid_k], leg)
        knee_dev, short = max(knee_dev, bend), max(short, shorter)
    return knee_dev, short


def knee_bend(model, q: np.ndarray, leg) -> tuple[float, float]:
    """A leg's knee at pose q, from its geometry (whatever the knee's sign, range or zero): the
    angle between thigh and shank (hip-pitch axis → knee axis → ankle-pitch axis, seen along the
    knee's axis) in degrees, 0 when straight; and how much shorter the leg is than straight (mm)."""
    F = model.fk_frames(q)
    hip, knee, ankle = (F[j + 1][:3, 3] for j in (leg.hip_pitch, leg.knee, leg.ankle_pitch))
    axis = model.jacobian(q, leg.ankle_pitch + 1)[3:, leg.knee]   # a revolute joint's column: its axis
    u, v = knee - hip, ankle - knee
    up, vp = u - (u @ axis) * axis, v - (v @ axis) * axis
    bend = math.degrees(math.atan2(abs(float(np.cross(up, vp) @ axis)), float(up @ vp)))
    along = float((u + v) @ axis)
    straight = math.hypot(float(np.linalg.norm(up) + np.linalg.norm(vp)), along)
    return bend, (straight - float(np.linalg.norm(u + v))) * 1e3
