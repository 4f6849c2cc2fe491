"""Safety checks shared by the loop (every cycle) and the planners (whole paths before motion).

`SafetyChecker(model)` turns the model's data into the kernel's tables once: the links' capsules
and boxes (a mesh's part bounded both ways), the part pairs that may collide (not on the same or
adjacent links, not touching at the home pose by any pairing of their bounds), the PUMA workspace
and floor (ROBOTS.md §1) and the humanoid's support polygon (both soles' rectangles). Units:
metres, radians, seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil.robots.model import Shape
from hil.safety import _kernel as SK
from hil.safety._kernel import (BALANCE, COLLISION, FLAG_NAMES, FLOOR, HELD, I_STEP, I_TO_TARGET,  # noqa: F401
                                I_TRACK, LIMIT, NONFINITE, RATE, WORKSPACE, stall_step)

WORKSPACE_BOUNDS = ("z < a2+d4", "|y| < a2+d4", "x < a2+d4", "y²+z² < (a2+d4)²+a3²", "x > -(a2+d4)·cos 20°",
                    "the reach sphere")
# said after a self-collision between the shapes that bound a URDF mesh: they hold every vertex, so
# each reaches past the part somewhere (a capsule past a bracket's flat face, a box's corner past a
# rounded casting)
MESH_SHAPES_HINT = (" (the shapes around their meshes, which can reach past the parts themselves: `hil twin --shapes` "
                    "draws them; links that come this close by design go in a side file's [collision] allowed)")


def flag_names(flags: int) -> list[str]:
    """Names of the set flag bits, most serious first."""
    order = (NONFINITE, COLLISION, FLOOR, WORKSPACE, BALANCE, LIMIT, RATE)
    return [FLAG_NAMES[b] for b in order if flags & b]


def check_shapes(model) -> list:
    """The model's shapes as the collision, floor and workspace checks see them (what `hil twin
    --shapes` draws): capsules, and boxes with their axes."""
    table, names = _collision_shapes(model)
    out = []
    for c, name, sh in zip(table, names, model.shapes):
        if c[SK.C_KIND] == SK.SHAPE_BOX:
            out.append(Shape(int(c[SK.C_LINK]), "box", tuple(map(float, c[SK.C_P0:SK.C_P0 + 3])),
                             half=tuple(map(float, c[SK.C_HALF:SK.C_HALF + 3])), name=name,
                             axes=tuple(map(float, c[SK.C_AXES:SK.C_AXES + 9])), group=sh.group))
        else:
            out.append(Shape(int(c[SK.C_LINK]), "capsule", tuple(map(float, c[SK.C_P0:SK.C_P0 + 3])),
                             tuple(map(float, c[SK.C_P1:SK.C_P1 + 3])), float(c[SK.C_RADIUS]), name=name,
                             group=sh.group))
    return out


def _collision_shapes(model) -> tuple[np.ndarray, list[str]]:
    """The kernel's shape table (`caps`, C_* columns) and each row's name."""
    rows, names = [], []
    part, held = -1, None
    for sh in model.shapes:
        row = np.zeros(SK.C_WIDTH)
        row[SK.C_LINK] = sh.link
        if not sh.group or (sh.link, sh.group) != held:
            part += 1
            held = (sh.link, sh.group) if sh.group else None
        row[SK.C_PART] = part
        if sh.kind == "capsule":
            row[SK.C_P0:SK.C_P0 + 3], row[SK.C_P1:SK.C_P1 + 3] = sh.p0, sh.p1
            row[SK.C_RADIUS], row[SK.C_KIND] = sh.radius, SK.SHAPE_CAPSULE
        else:
            row[SK.C_P0:SK.C_P0 + 3] = row[SK.C_P1:SK.C_P1 + 3] = sh.p0
            row[SK.C_KIND] = SK.SHAPE_BOX
            row[SK.C_AXES:SK.C_AXES + 9] = sh.rotation().ravel()
            row[SK.C_HALF:SK.C_HALF + 3] = sh.half
        rows.append(row)
        names.append(sh.name)
    return np.array(rows, dtype=np.float64).reshape(-1, SK.C_WIDTH), names


def _parts(model, caps: np.ndarray) -> tuple[list[list[list[int]]], list[str]]:
    """The parts the shapes bound (the table's C_PART): per part, its bounds (each a list of rows
    of the shape table: a mesh's capsules, its box), and per shape row the name of its part. A
    shape of no group is a part with one bound."""
    parts: list[list[list[int]]] = []
    for i, sh in enumerate(model.shapes):
        if int(caps[i, SK.C_PART]) == len(parts):
            parts.append([[], []])          # its capsules, its boxes: the cheaper measured first
        parts[-1][1 if sh.kind == "box" else 0].append(i)
    names = [sh.group or sh.name for sh in model.shapes]
    return [[b for b in bounds if b] for bounds in parts], names


def _part_pairs(model, caps: np.ndarray, parts: list) -> np.ndarray:
    """The kernel's `pairs` (P_* columns): every two parts on different, non-adjacent links that
    the robot's file does not allow to touch, each pairing of their bounds, each pair of shapes."""
    parent = {i: j.parent for i, j in enumerate(model.joints + model.followers)}
    allowed = {tuple(p) for p in model.meta.get("allowed_collisions", ())}
    rows = []
    n_pairs = 0
    for i, part_a in enumerate(parts):
        la = int(caps[part_a[0][0], SK.C_LINK])
        for part_b in parts[i + 1:]:
            lb = int(caps[part_b[0][0], SK.C_LINK])
            if la == lb or parent.get(la, -2) == lb or parent.get(lb, -2) == la or (min(la, lb), max(la, lb)) in allowed:
                continue
            pairing = 0
            for bound_a in part_a:
                for bound_b in part_b:
                    rows += [(a, b, n_pairs, pairing) for a in bound_a for b in bound_b]
                    pairing += 1
            n_pairs += 1
    return np.array(rows, dtype=np.int64).reshape(-1, SK.P_WIDTH)


def _split(rows: np.ndarray, column: int) -> list[np.ndarray]:
    """Consecutive runs of rows with the same value in `column`."""
    if not len(rows):
        return []
    cuts = np.flatnonzero(np.diff(rows[:, column])) + 1
    return np.split(rows, cuts)


def _workspace_settings(model, floor: bool | None) -> np.ndarray:
    """The kernel's `ws` (WS_* slots): the floor, and the PUMA's wrist-centre bounds or a reach sphere."""
    ws = np.zeros(SK.WS_LEN)
    meta = model.meta
    floor_z = meta.get("floor_z_m")
    if (floor_z is not None if floor is None else floor) and floor_z is not None:
        ws[SK.WS_FLOOR_Z] = float(floor_z)
        ws[SK.WS_FLOOR_ON] = 1.0
    wsm = meta.get("workspace")
    if wsm and "dh" in meta:
        a, d = meta["dh"]["a"], meta["dh"]["d"]
        ws[SK.WS_KIND] = SK.WS_PUMA
        ws[SK.WS_FRAME] = model.frame_index("wrist")
        # the paper bounds the wrist centre with a2 + d4; with the d2 shoulder offset the
        # stretched arm reaches sqrt((a2 + |(a3, d4)|)^2 + d2^2), which we use instead
        true_reach = math.hypot(a[1] + math.hypot(a[2], d[3]), d[1])
        ws[SK.WS_REACH] = max(float(wsm.get("reach_m", a[1] + d[3])), true_reach)
        ws[SK.WS_A3] = float(a[2])
        ws[SK.WS_COS_LOWER] = math.cos(math.radians(float(wsm.get("lower_x_angle_deg", 20.0))))
    elif wsm and "reach_m" in wsm:
        # any other robot: its tool frame within a sphere about the base origin
        ws[SK.WS_KIND] = SK.WS_SPHERE
        ws[SK.WS_FRAME] = model.frame_index(model.tool_frame)
        ws[SK.WS_REACH] = float(wsm["reach_m"])
    return ws


def _balance_settings(model, balance: bool | None) -> np.ndarray:
    """The kernel's `bal` (BAL_* slots): a humanoid's soles and the margin its COM keeps inside them."""
    bal = np.zeros(SK.BAL_LEN)
    if balance if balance is not None else model.floating:
        half = model.sole_half
        bal[SK.BAL_ON] = 1.0
        bal[SK.BAL_SOLE_L] = model.frame_index("l_sole")
        bal[SK.BAL_SOLE_R] = model.frame_index("r_sole")
        bal[SK.BAL_HALF_LENGTH], bal[SK.BAL_HALF_WIDTH] = half[0], half[1]
        bal[SK.BAL_MARGIN] = float((model.meta.get("balance") or {}).get("margin_m", 0.0))
        bal[SK.BAL_CONTACT_TOL] = 0.003
    return bal


@dataclass
class Verdict:
    """Outcome of checking one pose: flag bits and a sentence per problem."""

    flags: int
    reasons: list[str]

    def __bool__(self) -> bool:
        return self.flags == 0


class SafetyChecker:
    """Limits, rate, floor, workspace, self-collision and balance for one model."""

    def __init__(self, model, floor: bool | None = None, balance: bool | None = None) -> None:
        self.model = model
        self.kin, self.mt = model.tables
        caps, self.shape_names = _collision_shapes(model)
        self.caps = caps
        self.parts, self.part_names = _parts(model, caps)
        self.pairs = _part_pairs(model, caps, self.parts)
        self.ws = _workspace_settings(model, floor)
        self.bal = _balance_settings(model, balance)
        self.poses = np.empty((len(model.frame_names), 4, 4))
        self.wpts = np.zeros((len(caps), SK.W_WIDTH))
        self.info = np.empty(SK.INFO_LEN)
        self.scratch = np.empty(32)
        self.no_sag = np.zeros((1, model.n))     # no compliance compensation
        self.q_loaded = np.empty(model.n)
        self.tried = np.zeros(model.n)   # after `step`: the clamped step it checked (held or not)
        # drop the part pairs already in contact at home (designed contact, e.g. the trunk in the
        # pedestal) by any pairing of their bounds: near a joint, where two castings meet, each bound
        # reaches past the parts somewhere (a box's corners, a capsule's girth), and one that touches
        # at home would touch in the first motion
        if len(self.pairs):
            SK.check_pose_core(model.home, self.no_sag[0], self.kin, self.mt, self.caps, self.pairs, self.ws, self.bal,
                               self.poses, self.wpts, self.info, self.scratch, self.q_loaded)
            keep = [rows for rows in _split(self.pairs, SK.P_PARTS)
                    if all(self._home_clearance(pairing) > 0.0 for pairing in _split(rows, SK.P_PAIRING))]
            self.pairs = np.concatenate(keep) if keep else np.zeros((0, SK.P_WIDTH), dtype=np.int64)

    def _home_clearance(self, rows: np.ndarray) -> float:
        """The clearance of one pairing's shape pairs at the pose `wpts` holds (home)."""
        self.info[SK.I_CLEARANCE], self.info[SK.I_PAIR] = math.inf, -1.0
        SK.closest_parts(self.caps, rows, self.wpts, self.info)
        return float(self.info[SK.I_CLEARANCE])

    @property
    def reach_m(self) -> float:
        """The workspace's reach (m): the PUMA's bound on its wrist centre, or the reach sphere's radius."""
        return float(self.ws[SK.WS_REACH])

    def check_static_balance(self, on: bool) -> None:
        """Switch the COM-over-the-soles check (a walk leaves the static polygon by design; its ZMP is
        checked instead)."""
        if self.bal[SK.BAL_SOLE_L] != self.bal[SK.BAL_SOLE_R]:  # soles were found: a humanoid
            self.bal[SK.BAL_ON] = 1.0 if on else 0.0

    # ------------------------------------------------------------------ loop
    def step(self, q_target: np.ndarray, q_prev: np.ndarray, dt: float, rate_scale: float,
             q_cmd: np.ndarray, q_meas: np.ndarray | None = None, sag: np.ndarray | None = None) -> int:
        """The per-cycle filter (see `_kernel.safety_step`); writes q_cmd, returns flag bits;
        `info` then holds the largest step, tracking error and distance to the target. `sag`: the
        compliance compensation inside q_target (balance is also judged at q − sag)."""
        m = self.model
        return SK.safety_step(q_target, q_prev, q_prev if q_meas is None else q_meas,
                              self.no_sag[0] if sag is None else sag, m.lower, m.upper,
                              m.velocity_limit, dt, rate_scale, self.kin,
                              self.mt, self.caps, self.pairs, self.ws, self.bal, q_cmd, self.poses, self.wpts,
                              self.info, self.scratch, self.q_loaded, self.tried)

    # ---------------------------------------------------------------- checks
    def check(self, q, sag: np.ndarray | None = None) -> Verdict:
        """Check one pose (limits, floor, workspace, collision, balance) with reasons in words;
        `sag`: the compliance compensation inside q (see `_kernel.check_pose_core`)."""
        q = self.model._as_q(q)
        Q = q.reshape(1, -1)
        flags = np.zeros(1, dtype=np.int64)
        SK.check_path(Q, self._sag_rows(sag, 1), self.kin, self.mt, self.caps, self.pairs, self.ws, self.bal,
                      self.model.lower, self.model.upper, self.poses, self.wpts, self.info, self.scratch,
                      self.q_loaded, flags)
        return Verdict(int(flags[0]), self.explain(int(flags[0]), q, sag))

    def check_path(self, Q: np.ndarray, sag: np.ndarray | None = None) -> tuple[int, np.ndarray]:
        """(first bad row or -1, flags per row) for configurations Q (N, n); `sag` (N, n): each
        row's compliance compensation (see `_kernel.check_pose_core`)."""
        Q = np.ascontiguousarray(Q, dtype=np.float64)
        flags = np.zeros(Q.shape[0], dtype=np.int64)
        first = SK.check_path(Q, self._sag_rows(sag, Q.shape[0]), self.kin, self.mt, self.caps, self.pairs,
                              self.ws, self.bal, self.model.lower, self.model.upper, self.poses, self.wpts, self.info,
                              self.scratch, self.q_loaded, flags)
        return int(first), flags

    def _sag_rows(self, sag, rows: int) -> np.ndarray:
        if sag is None:
            return self.no_sag
        sag = np.ascontiguousarray(sag, dtype=np.float64).reshape(-1, self.model.n)
        if sag.shape[0] != rows and sag.shape[0] != 1:
            raise ValueError(f"sag has {sag.shape[0]} rows for {rows} poses")
        return sag

    def colliding_links(self, q) -> tuple[set[int], str]:
        """The two links (−1: the base) whose shapes come closest in pose q when they touch, and
        the sentence saying so; (empty, "") when nothing collides."""
        verdict = self.check(q)
        if not verdict.flags & COLLISION:
            return set(), ""
        p = int(self.info[SK.I_PAIR])
        a, b = self.pairs[p, :2] if p >= 0 else (0, 0)
        reason = next((r for r in verdict.reasons if r.startswith("self-collision")), "self-collision")
        return {int(self.caps[a, SK.C_LINK]), int(self.caps[b, SK.C_LINK])}, reason

    def explain(self, flags: int, q: np.ndarray | None = None, sag: np.ndarray | None = None) -> list[str]:
        """Sentences for the flags; with q (and its compliance compensation `sag`), recomputes the
        details (pair, bound, margin)."""
        m = self.model
        out = []
        if q is not None and flags & (FLOOR | WORKSPACE | COLLISION | BALANCE):
            SK.check_pose_core(np.asarray(q, float), self._sag_rows(sag, 1)[0], self.kin, self.mt, self.caps,
                               self.pairs, self.ws, self.bal, self.poses, self.wpts, self.info, self.scratch,
                               self.q_loaded)
        if flags & NONFINITE:
            out.append("the target is not finite")
        if flags & LIMIT and q is not None:
            out += ["joint limit: " + v for v in m.limit_violations(q)] or ["joint limit"]
        elif flags & LIMIT:
            out.append("joint limit")
        if flags & FLOOR:
            out.append(f"floor: a link reaches {self.info[SK.I_FLOOR] * 1e3:+.1f} mm relative to the floor "
                       f"(z = {self.ws[SK.WS_FLOOR_Z] * 1e3:.0f} mm)")
        if flags & WORKSPACE:
            b = int(self.info[SK.I_WS])
            what = "the wrist centre" if self.ws[SK.WS_KIND] == SK.WS_PUMA else f"the tool frame {m.tool_frame!r}"
            bound = WORKSPACE_BOUNDS[b] if b >= 0 else "a bound"
            if b == 5:
                bound += f" (r = {self.reach_m * 1e3:.0f} mm)"
            out.append(f"workspace: {what} violates {bound}")
        if flags & COLLISION:
            p = int(self.info[SK.I_PAIR])
            a, b = self.pairs[p, :2] if p >= 0 else (0, 0)
            depth = -self.info[SK.I_CLEARANCE] * 1e3
            names = (self.part_names[a], self.part_names[b])
            out.append(f"self-collision: {names[0]} and {names[1]} overlap by "
                       + (f"{depth:.1f} mm" if depth >= 0.05 else "less than 0.1 mm")
                       + (MESH_SHAPES_HINT if set(names) & set(m.meta.get("mesh_shapes", ())) else ""))
        if flags & BALANCE:
            inside, need = self.info[SK.I_COM_MARGIN] * 1e3, self.bal[SK.BAL_MARGIN] * 1e3
            where = f"{-inside:.1f} mm outside" if inside < 0 else f"only {inside:.1f} mm inside the edge of"
            out.append(f"balance: the centre of mass is {where} the support polygon (it must stay {need:.0f} mm "
                       "inside)")
        if flags & RATE:
            out.append("velocity limit")
        return out


def support_hull_margin(points, p) -> float:
    """Signed distance (m) of the point p (x, y) inside the convex hull of points (n, 2): + inside,
    − outside (the distance to the nearest edge's line). The loop's balance check's own margin."""
    pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1)
    return float(SK.hull_margin(pts, len(pts) // 2, float(p[0]), float(p[1])))
