"""What of a humanoid's feet touches the ground, per sample: one small code for both feet.

Each foot is in the air, flat on the ground, on its toe or on its heel (Tanaka & Sugihara 2014's minimal
support region: the foot rolls on its toe at toe-off and on its heel at heel strike, and only
what touches is constrained and counted in the support polygon). A foot on its toe touches with
its inner toe corner, the big toe's, and one on its heel with its outer heel corner: with a
5-joint leg (hip roll, three pitch joints, ankle roll) a sole pitched on a whole edge must keep
the hip right above it, while a sole on one corner can turn about that corner as the body sways
(docs/robots.md). The other corner of that edge is held a little off the ground (`EDGE_LIFT`).

Codes: 0 both flat, 1 left flat (right in the air), 2 right flat (left in the air), as walks and
motion files have always written them; 16 + left + 4 × right for any other pair, with left and
right each AIR, FLAT, TOE or HEEL. Motion files name them: "both", "left", "right", or
"l_flat+r_heel" and the like.
"""

from __future__ import annotations

import math

import numpy as np

AIR, FLAT, TOE, HEEL = 0, 1, 2, 3
KINDS = ("air", "flat", "toe", "heel")
BOTH, LEFT, RIGHT = 0, 1, 2
UNKNOWN = 3                       # the recorder's "no walk running"
_EXTENDED = 16
EDGE_LIFT = math.radians(1.5)     # roll that holds the other corner of a toe or heel edge off the ground

_LEGACY = {(FLAT, FLAT): BOTH, (FLAT, AIR): LEFT, (AIR, FLAT): RIGHT}
_LEGACY_FEET = {v: k for k, v in _LEGACY.items()}
_NAMES = {BOTH: "both", LEFT: "left", RIGHT: "right"}


def encode(left: int, right: int) -> int:
    """The code of a pair of foot contacts (AIR, FLAT, TOE, HEEL each)."""
    return _LEGACY.get((left, right), _EXTENDED + left + 4 * right)


def decode(code: int) -> tuple[int, int]:
    """(left, right) contacts of a code; ValueError for a code that is none."""
    code = int(code)
    if code in _LEGACY_FEET:
        return _LEGACY_FEET[code]
    if _EXTENDED <= code < _EXTENDED + 16:
        pair = (code - _EXTENDED) % 4, (code - _EXTENDED) // 4
        if pair != (AIR, AIR) and encode(*pair) == code:   # a foot down, and written as `encode` writes it
            return pair
    raise ValueError(f"{code} is not a support code")


def is_valid(codes) -> np.ndarray:
    """Per element: a code that `decode` takes (one with a foot on the ground)."""
    codes = np.asarray(codes)
    ok = np.zeros(codes.shape, dtype=bool)
    for c in VALID_CODES:
        ok |= codes == c
    return ok


def name(code: int) -> str:
    """The code as motion files write it."""
    if code in _NAMES:
        return _NAMES[code]
    left, right = decode(code)
    return f"l_{KINDS[left]}+r_{KINDS[right]}"


def parse(text: str) -> int:
    """A motion file's support name as a code; ValueError saying what is accepted."""
    for code, nm in _NAMES.items():
        if text == nm:
            return code
    parts = text.split("+")
    if len(parts) == 2 and parts[0].startswith("l_") and parts[1].startswith("r_") \
            and parts[0][2:] in KINDS and parts[1][2:] in KINDS:
        code = encode(KINDS.index(parts[0][2:]), KINDS.index(parts[1][2:]))
        if code in VALID_CODES:
            return code
    raise ValueError(f"support must be left, right, both, or l_<c>+r_<c> with <c> one of {', '.join(KINDS)} "
                     f"and a foot on the ground, got {text!r}")


def mirror(code: int) -> int:
    """The code with left and right swapped (a mirrored motion)."""
    left, right = decode(code)
    return encode(right, left)


def corners(side: str, kind: int, hl: float, hw: float) -> list[tuple[str, float, float]]:
    """The corners of a sole that touch: (name, x, y) in the sole's frame; `side` "l" or "r"."""
    inner = -hw if side == "l" else hw
    if kind == FLAT:
        return [(f"{side}_{e}", sx * hl, sy * hw) for e, sx, sy in
                (("toe_left", 1, 1), ("toe_right", 1, -1), ("heel_left", -1, 1), ("heel_right", -1, -1))]
    if kind == TOE:
        return [(f"{side}_toe_{'left' if inner > 0 else 'right'}", hl, inner)]
    if kind == HEEL:
        return [(f"{side}_heel_{'right' if inner > 0 else 'left'}", -hl, -inner)]
    return []


def corner_frame(side: str, kind: int) -> str:
    """The name of the frame at the corner a foot on its toe or heel touches with."""
    return {TOE: f"{side}_toe_contact", HEEL: f"{side}_heel_contact"}[kind]


def edge_roll(side: str, kind: int) -> float:
    """The sole's roll (about its own x axis) that lifts the other corner of the touching edge."""
    lift_left_side = (side == "l") == (kind == TOE)   # the left foot's outer side is +y
    return EDGE_LIFT if lift_left_side else -EDGE_LIFT


VALID_CODES = tuple(sorted({encode(a, b) for a in range(4) for b in range(4) if (a, b) != (AIR, AIR)}))
