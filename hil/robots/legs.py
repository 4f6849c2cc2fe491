"""A humanoid's legs as its kinematic tree says, whatever its joints are called: the chain of
joints from the body to each sole, which of them pitch (turn about the body's left–right axis at
the robot's home pose), and among those the hip, the knee and the ankle (first, middle, last).

What the walker asks of a leg — its knee for `--knee-stretched`, the hip-to-ankle span — comes
from here, so humanoid17, the G1 and a kit's own URDF or MJCF go through the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALIGNMENT = 0.7   # a joint turns about the body's axis nearest its own, when at least this near (45°)


@dataclass(frozen=True)
class Leg:
    side: str                    # "l" or "r"
    sole: str                    # its sole frame
    joints: tuple[int, ...]      # body → sole
    pitch: tuple[int, ...]       # the joints among them that pitch, body → sole
    roll: tuple[int, ...]        # … that roll (about the body's front–back axis)
    hip_pitch: int | None
    knee: int | None             # the middle pitch joint: None for a leg with fewer than three
    ankle_pitch: int | None


def chain(model, frame: str) -> tuple[int, ...]:
    """The joints from the base to the link that carries `frame`, base first."""
    link = int(model.frame_link[model.frame_index(frame)])
    out = []
    while link >= 0:
        out.append(link)
        link = model.joints[link].parent
    return tuple(reversed(out))


def joints_along(model, joints, body_axis: int) -> tuple[int, ...]:
    """Those of `joints` whose axis, at home, lies along the body's axis `body_axis` (0 front–back:
    they roll; 1 left–right: they pitch; 2 up: they yaw)."""
    F = model.fk_frames(model.home)
    out = []
    for j in joints:   # in the body's frame (a hip pitched at home tilts the roll axis below it: the G1's by 30°)
        a = np.abs(F[0][:3, :3].T @ (F[j + 1][:3, :3] @ np.asarray(model.joints[j].axis, dtype=np.float64)))
        if int(np.argmax(a)) == body_axis and a[body_axis] >= ALIGNMENT:
            out.append(j)
    return tuple(out)


def leg(model, side: str) -> Leg:
    """The leg ending at `{side}_sole` (the sole frame every humanoid model has)."""
    sole = f"{side}_sole"
    joints = chain(model, sole)
    other = set(chain(model, f"{'r' if side == 'l' else 'l'}_sole"))
    own = tuple(j for j in joints if j not in other)     # below where the two legs part
    pitch = joints_along(model, own, 1)
    knee = pitch[len(pitch) // 2] if len(pitch) >= 3 else None
    return Leg(side, sole, own, pitch, joints_along(model, own, 0), pitch[0] if pitch else None, knee,
               pitch[-1] if len(pitch) >= 2 else None)


def legs(model) -> dict[str, Leg]:
    return {side: leg(model, side) for side in ("l", "r")}


def leg_length(model) -> float:
    """A leg's length stretched (m): hip pitch → knee → ankle → sole, the shorter of the two legs."""
    F = model.fk_frames(model.home)
    out = []
    for lg in legs(model).values():
        pts = [F[j + 1][:3, 3] for j in lg.pitch] + [F[model.frame_index(lg.sole)][:3, 3]]
        out.append(sum(float(np.linalg.norm(b - a)) for a, b in zip(pts, pts[1:])))
    return min(out)


def knee_bend_deg(model) -> dict[str, float]:
    """Per leg with a knee ("l", "r"), how far its knee is bent at home (degrees between the thigh,
    hip pitch → knee, and the shank, knee → ankle): 0 is a leg stretched straight."""
    F = model.fk_frames(model.home)
    out = {}
    for side, lg in legs(model).items():
        if lg.knee is None:
            continue
        i = lg.pitch.index(lg.knee)
        hip, knee, ankle = (F[j + 1][:3, 3] for j in (lg.pitch[i - 1], lg.knee, lg.pitch[i + 1]))
        a, b = knee - hip, ankle - knee
        cos = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
        out[side] = float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))
    return out
