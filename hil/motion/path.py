"""From a G-code program to a joint trajectory for the PUMA: placement, discretisation, closed-form
IK with branch continuity, feed and joint velocity/acceleration limits, and a plan-time check of
the whole path before anything moves.

Frames: the program is in the workpiece frame (mm, z = face normal); `place` puts the workpiece in
the base frame; the tool points into the face (tool z = −workpiece z) with a constant orientation.
Output units: seconds, radians, metres.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil.errors import InputError, UnreachableError
from hil.motion.bounds import MAX_PATH_POINTS, check_count, check_duration
from hil.motion import progress
from hil.kinematics.rotations import rpy_matrix
from hil.motion.gcode import Program, Segment
from hil.motion.path_ik import ClosedFormPath, PathIK, path_ik
from hil.motion.plan_check import PlanRefused, check_plan

RAPID_MM_MIN = 12000.0   # G0 speed along the path before joint limits (200 mm/s)
CORNER_DEG = 2.0         # tangent change above which the path stops at the junction (exact stop)


class PlanError(UnreachableError):
    """The path cannot be run; names the G-code line and the sample."""


def placement(x_mm: float, y_mm: float, z_mm: float, roll_deg: float, pitch_deg: float, yaw_deg: float) -> np.ndarray:
    """T_base_workpiece from the CLI's --place (mm and degrees, R = Rz(yaw) Ry(pitch) Rx(roll))."""
    T = np.eye(4)
    T[:3, :3] = rpy_matrix(*np.radians([roll_deg, pitch_deg, yaw_deg]))
    T[:3, 3] = np.array([x_mm, y_mm, z_mm]) * 1e-3
    return T


def default_place(model) -> list[float]:
    """Where a robot's workpiece goes unless told (x, y, z mm, roll, pitch, yaw °): its own ([path]
    place_mm in its data), else a third of its reach in front of its base, on its base's plane,
    level."""
    own = (model.meta.get("path") or {}).get("place_mm")
    if own is not None:
        return [float(v) for v in own]
    reach = float((model.meta.get("workspace") or {}).get("reach_m", 0.5))
    return [1000.0 * reach / 3, 0.0, 0.0, 0.0, 0.0, 0.0]


@dataclass
class Plan:
    t: np.ndarray            # (N,) s
    q: np.ndarray            # (N, 6) rad
    p_prog: np.ndarray       # (N, 3) m, programmed tool point in the base frame
    line: np.ndarray         # (N,) source line of each sample
    branch: str              # the PUMA's branch, or how the solutions were found (hil.motion.path_ik)
    duration: float
    min_wrist_deg: float | None   # the PUMA's closest pass to its wrist singularity (None on other arms)
    max_speed_ratio: float   # largest |qd| / qd_max over the trajectory
    max_acc_ratio: float
    workpiece_T: np.ndarray
    workpiece_half: np.ndarray
    chord_mm: float
    tool_offset: np.ndarray
    feed_note: str = ""      # where the programmed feed was slowed for the joints' limits, if anywhere

    def save(self, path: str, torques=None) -> None:
        """The plan as a trajectory file; with `torques` (a TorquePlan) `q` holds the compensated
        commands and `q_plan` the plan, `tau` the servos' torques."""
        extra = {} if torques is None else {"q_plan": self.q, "tau": torques.tau}
        np.savez(path, t=self.t, q=self.q if torques is None else torques.q_cmd, p_prog=self.p_prog, line=self.line,
                 workpiece_T=self.workpiece_T, workpiece_half=self.workpiece_half, tool_offset=self.tool_offset,
                 branch=np.array(self.branch), **extra)

    def summary(self) -> str:
        how = f"branch '{self.branch}'" if self.min_wrist_deg is not None else self.branch
        wrist = f"min wrist |θ5| {self.min_wrist_deg:.1f}°, " if self.min_wrist_deg is not None else ""
        return (f"plan: {len(self.t)} samples, {self.duration:.2f} s, chord ≤ {self.chord_mm:g} mm, {how}\n"
                f"check: ranges ok, floor ok, workspace ok, workpiece clearance ok, {wrist}peak joint speed "
                f"{100 * self.max_speed_ratio:.0f}% and acceleration {100 * self.max_acc_ratio:.0f}% of the limits"
                + (f"\nfeed: {self.feed_note}" if self.feed_note else ""))


def _pieces(s: Segment, chord_mm: float) -> int:
    """How many pieces a segment is cut into: no chord error above `chord_mm` on an arc, 2 mm on any."""
    L = s.length()
    if s.kind != "arc":
        return max(1, int(math.ceil(L / 2.0)))
    r = math.hypot(*(s.start[[i for i in range(3) if i != _normal(s)]] -
                     s.centre[[i for i in range(3) if i != _normal(s)]]))
    dth = 2 * math.acos(max(-1.0, 1 - chord_mm / max(r, 1e-9))) if r > chord_mm else math.pi / 8
    return max(2, int(math.ceil(s.sweep / max(dth, 1e-6))), int(math.ceil(L / 2.0)))


def _check_size(prog: Program, chord_mm: float, speed: float) -> list[int]:
    """Each segment's pieces, once the program is known to be within what hil plans in one go: its
    points along the path and its time at the programmed feeds (before any slowing)."""
    pieces = [_pieces(s, chord_mm) for s in prog.segments]
    split = "split the program into several run one after another"
    check_count(sum(pieces) + 1, MAX_PATH_POINTS, f"points along the path (at --chord-mm {chord_mm:g})",
                prog.source or "the program", f"raise --chord-mm, or {split}")
    seconds = sum(60.0 * s.length() / (RAPID_MM_MIN if s.kind == "rapid" else s.feed_mm_min) for s in prog.segments)
    check_duration(seconds / speed, f"{prog.source or 'the program'} at its feeds"
                   + (f" and --speed {speed:g}" if speed != 1.0 else ""),
                   f"raise {'--speed or ' if speed != 1.0 else ''}its feeds (F), or {split}")
    return pieces


def _discretise(prog: Program, chord_mm: float, pieces: list[int]):
    """Points (mm, workpiece frame) along the program, `pieces[k]` per segment (`_pieces`), with per
    point its segment, exact-stop flag and fraction u of its segment (samples between points are
    taken on the segment itself)."""
    pts, seg_of, stop, u_of = [], [], [], []
    for k, s in enumerate(prog.segments):
        us = np.linspace(0.0, 1.0, pieces[k] + 1)
        first = 0 if not pts else 1
        for u in us[first:]:
            pts.append(s.point(u))
            seg_of.append(k)
            stop.append(False)
            u_of.append(u)
    pts = np.array(pts)
    seg_of = np.array(seg_of)
    stop = np.array(stop)
    stop[0] = stop[-1] = True
    # exact stop at sharp corners and wherever rapid and feed moves meet
    for k in range(1, len(prog.segments)):
        a, b = prog.segments[k - 1], prog.segments[k]
        i = int(np.flatnonzero(seg_of == k)[0]) - 1 if np.any(seg_of == k) else None
        if i is None or i < 0:
            continue
        ta = _tangent(a, 1.0)
        tb = _tangent(b, 0.0)
        ang = math.degrees(math.acos(max(-1.0, min(1.0, float(ta @ tb))))) if np.linalg.norm(ta) and np.linalg.norm(tb) else 180
        if ang > CORNER_DEG or (a.kind == "rapid") != (b.kind == "rapid"):
            stop[i] = True
    return pts, seg_of, stop, np.array(u_of)


def _normal(s: Segment) -> int:
    return {17: 2, 18: 1, 19: 0}[s.plane]


def _tangent(s: Segment, u: float) -> np.ndarray:
    h = 1e-4
    u0, u1 = max(0.0, u - h), min(1.0, u + h)
    d = s.point(u1) - s.point(u0)
    n = np.linalg.norm(d)
    return d / n if n > 0 else d


def _joint_path(ik: PathIK, pts_mm: np.ndarray, q_near: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, str]:
    """IK along the path, each point's solution continuing from the previous one (the solutions at
    the first point nearest the start pose tried first): the joint path and its solutions' label;
    PlanError at the furthest point any start reached."""
    starts, why = ik.starts(pts_mm[0], q_near)
    if not starts:
        raise PlanError(f"line {lines[0]} (first point): {why}")
    best_err = None
    for n, (q0, label) in enumerate(starts):
        Q = np.empty((len(pts_mm), len(q0)))
        Q[0] = q0
        tick = progress.reporting_every("the IK along the path" + (f" (start {n + 1} of {len(starts)})" if n else ""),
                                        len(pts_mm))
        for k in range(1, len(pts_mm)):
            tick(k)
            q, why = ik.follow(pts_mm[k], Q[k - 1])
            if q is None:
                err = (k, f"line {lines[k]} sample {k}: {why}" + (f" ({label})" if label else ""))
                if best_err is None or k > best_err[0]:
                    best_err = err
                break
            Q[k] = q
        else:
            return Q, label
    raise PlanError(best_err[1] if best_err else "no solution can follow the path")


def _timed(model, ik: PathIK, pts_mm: np.ndarray, Q: np.ndarray, feed: np.ndarray, stop, where, lines: np.ndarray,
           dt: float):
    """The path in time: the feed, slowed where the joints' speed and acceleration limits need it,
    exact stops where the program has them; (the time law's samples, the speed limit along the path)."""
    ds = np.linalg.norm(np.diff(pts_mm, axis=0), axis=1) * 1e-3
    s = np.concatenate([[0.0], np.cumsum(ds)])
    with np.errstate(divide="ignore", invalid="ignore"):
        dq_ds = np.nan_to_num(np.gradient(Q, s, axis=0) if len(s) > 2 else np.zeros_like(Q))
    vmax_j = model.velocity_limit * 0.95
    amax_j = model.acceleration_limit * 0.9
    v_lim = feed.copy()
    with np.errstate(divide="ignore"):
        v_lim = np.minimum(v_lim, np.min(vmax_j / np.maximum(np.abs(dq_ds), 1e-12), axis=1))
    a_lim = np.min(amax_j / np.maximum(np.abs(dq_ds), 1e-12), axis=1)
    a_lim = np.clip(a_lim, 1e-4, 5.0)
    for _ in range(16):
        t, q_t, p_t, line_t, duration, s_t = _time_law(v_lim, a_lim, stop, s, ds, where, lines, Q, ik, dt)
        # the profile above bounds the tangential terms; curvature adds d²q/ds²·v², so check the
        # accelerations actually reached and slow down where they exceed the limits
        qdd = np.diff(q_t, n=2, axis=0) / dt ** 2
        ratio = np.max(np.abs(qdd) / model.acceleration_limit, axis=1) if len(qdd) else np.zeros(0)
        if not len(ratio) or ratio.max() <= 1.0:
            break
        bad = np.flatnonzero(ratio > 1.0) + 1
        # the path points around each offending sample: scale their speed limits by 1/sqrt(r)
        r_path = np.zeros(len(s))
        np.maximum.at(r_path, np.clip(np.searchsorted(s, s_t[bad]), 0, len(s) - 1), ratio[bad - 1])
        for _ in range(3):
            r_path = np.maximum(r_path, np.maximum(np.roll(r_path, 1), np.roll(r_path, -1)))
        slow = r_path > 1.0
        v_lim[slow] = v_lim[slow] / np.sqrt(r_path[slow]) * 0.9
        # speeding up from a stop is bound by the tangential limit alone: lower it there too
        a_lim[slow] = a_lim[slow] / r_path[slow] * 0.95
    return (t, q_t, p_t, line_t, duration, s_t), v_lim


def _workpiece(prog: Program, T_place: np.ndarray, workpiece_mm) -> tuple[np.ndarray, np.ndarray]:
    """The workpiece box (pose, half sizes in m): the contour's footprint, from its lowest point down,
    or `workpiece_mm` (its size) under the contour."""
    lo, hi = prog.extents()
    if workpiece_mm is None:
        half_mm = np.array([(hi[0] - lo[0]) / 2, (hi[1] - lo[1]) / 2, 10.0])
        centre_mm = np.array([(hi[0] + lo[0]) / 2, (hi[1] + lo[1]) / 2, lo[2] - 10.0])
    else:
        half_mm = np.asarray(workpiece_mm, float) / 2
        centre_mm = np.array([(hi[0] + lo[0]) / 2, (hi[1] + lo[1]) / 2, lo[2] - half_mm[2]])
    T_wp = T_place.copy()
    T_wp[:3, 3] = T_place[:3, :3] @ (centre_mm * 1e-3) + T_place[:3, 3]
    half = half_mm * 1e-3
    return T_wp, half


def plan_path(model, prog: Program, T_place: np.ndarray, tool_offset: np.ndarray | None = None,
              chord_mm: float = 0.05, rate_hz: float = 500.0, q_start: np.ndarray | None = None,
              workpiece_mm: tuple[float, float, float] | None = None, wrist_margin_deg: float = 2.0,
              speed: float = 1.0, strict: bool = False, orientation: str | None = None) -> Plan:
    """Plan the program on an arm: returns a `Plan` or raises PlanError naming the first bad line.

    The points are solved by the arm's own IK (`hil.motion.path_ik`): the PUMA 560's closed form,
    prioritised LM on any other arm — the tool's axis normal to the workpiece on every arm, its roll
    held where the arm has six joints or more (`orientation` "full"; "axis" leaves it free).
    On the PUMA, near the wrist singularity the path slows wherever the wrist joints need it (the time law's
    joint speed and acceleration bounds); the plan is refused only where even that cannot keep
    them within their limits (with `strict`, wherever the programmed feed would be slowed). A pass
    closer than `wrist_margin_deg` is said in the plan's note. `speed` (0 < f ≤ 1) scales every
    feed, rapids included: a program tried slowly first."""

    if chord_mm <= 0:
        raise InputError("chord tolerance must be positive")
    tool = np.eye(4) if tool_offset is None else np.asarray(tool_offset, float)
    ik = path_ik(model, tool, T_place, orientation)
    q_near = model.home if q_start is None else np.asarray(q_start, float)
    if not 0.0 < speed <= 1.0:
        raise InputError(f"speed {speed:g}: a fraction of the programmed feeds, more than 0 and at most 1")
    pts_mm, seg_of, stop, u_of = _discretise(prog, chord_mm, _check_size(prog, chord_mm, speed))
    segs = prog.segments
    lines = np.array([segs[k].line for k in seg_of])

    Q, label = _joint_path(ik, pts_mm, q_near, lines)

    feed = speed * np.array([(RAPID_MM_MIN if segs[k].kind == "rapid" else segs[k].feed_mm_min) / 60e3
                             for k in seg_of])
    dt = 1.0 / rate_hz
    progress.report("timing the path within the joints' limits")
    (t, q_t, p_t, line_t, duration, s_t), v_lim = _timed(model, ik, pts_mm, Q, feed, stop, (segs, seg_of, u_of),
                                                         lines, dt)
    p_base = (T_place[:3, :3] @ (p_t.T * 1e-3)).T + T_place[:3, 3]
    floor_z = model.meta.get("floor_z_m")
    if floor_z is not None and p_base[:, 2].min() < floor_z:
        k = int(np.argmin(p_base[:, 2]))
        raise PlanError(f"line {line_t[k]} sample {k}: the tool tip reaches z = {p_base[k, 2] * 1e3:.1f} mm, "
                        f"below the floor (z = {floor_z * 1e3:.0f} mm)")

    # plan-time check of the whole path before anything moves (the G-code line of the first bad sample)
    progress.report("checking every sample as the loop will")
    try:
        check_plan(model, t, q_t, where="path")
    except PlanRefused as e:
        raise PlanError(f"line {line_t[e.sample]} sample {e.sample}: {e.reason}" if e.sample is not None
                        else str(e)) from None
    # the PUMA's wrist singularity (θ5 = 0), said when the path passes near it
    wrist = np.degrees(np.abs(q_t[:, 4])) if isinstance(ik, ClosedFormPath) else None
    T_wp, half = _workpiece(prog, T_place, workpiece_mm)
    _check_workpiece(model, q_t, T_wp, half, line_t)
    # velocity and acceleration actually reached (computed back from q)
    qd = np.diff(q_t, axis=0) / dt
    qdd = np.diff(qd, axis=0) / dt
    sp = float(np.max(np.abs(qd) / model.velocity_limit)) if len(qd) else 0.0
    ac = float(np.max(np.abs(qdd) / model.acceleration_limit)) if len(qdd) else 0.0
    _refuse_past_limits(model, qd, qdd, line_t)
    note = _feed_note(feed, v_lim, segs, seg_of, lines)
    if strict and note:
        raise PlanError(f"refused (--strict): {note}; lower the feed (F) or --speed")
    if wrist is not None and wrist.min() < wrist_margin_deg:
        k = int(np.argmin(wrist))
        note = "; ".join(x for x in (note, f"the wrist passes {wrist[k]:.2f}° from its singularity (θ5 = 0) on "
                                           f"line {line_t[k]}, within its joints' limits") if x)
    return Plan(t, q_t, p_base, line_t, label, duration, None if wrist is None else float(wrist.min()), sp, ac,
                T_wp, half, chord_mm, tool, note)


def _refuse_past_limits(model, qd: np.ndarray, qdd: np.ndarray, line_t: np.ndarray) -> None:
    """PlanError at the first sample whose joint speed or acceleration (from q) is past its limit:
    the time law slows the path wherever it can, so what is left cannot be followed (a wrist
    through its singularity at a speed its joints cannot turn at, for one)."""
    for what, d, limit, slack in (("speed", qd, model.velocity_limit, 1.001),
                                  ("acceleration", qdd, model.acceleration_limit, 1.02)):
        over = np.abs(d) > limit * slack
        if over.any():
            k, j = np.argwhere(over)[0]
            unit = "°/s" if what == "speed" else "°/s²"
            raise PlanError(f"line {line_t[min(k + 1, len(line_t) - 1)]} sample {k + 1}: {model.joint_names[j]} "
                            f"needs {math.degrees(abs(d[k, j])):.0f} {unit} (limit {math.degrees(limit[j]):.0f}) "
                            "even slowed down; tilt or move the workpiece, or lower the feed")


def _feed_note(feed: np.ndarray, v_lim: np.ndarray, segs, seg_of: np.ndarray, lines) -> str:
    """Where the joints' speed or acceleration limits hold the tool below its programmed feed (m/s):
    said, not done silently ("" when the feed is kept everywhere outside the exact stops)."""
    cut = [k for k in range(len(feed)) if segs[seg_of[k]].kind != "rapid" and v_lim[k] < 0.99 * feed[k]]
    if not cut:
        return ""
    k = min(cut, key=lambda i: v_lim[i] / feed[i])
    where = sorted({int(lines[i]) for i in cut})
    shown = ", ".join(map(str, where[:8])) + (" …" if len(where) > 8 else "")
    return (f"the joints' limits hold the tool below the programmed feed on line(s) {shown}: at worst "
            f"{v_lim[k] * 60e3:.0f} of F{feed[k] * 60e3:.0f} mm/min (line {int(lines[k])})")


def _time_law(v_lim, a_lim, stop, s, ds, on_path, lines, Q, ik: PathIK, dt):
    """Speed profile (forward/backward passes), piecewise-quadratic s(t), exact IK per sample.
    `on_path`: (segments, segment of each path point, its fraction u): every sample is taken on
    its segment's own curve (an arc's circle or helix, not the chord between path points)."""
    v = v_lim.copy()
    v[stop] = 0.0
    for _ in range(3):
        for i in range(1, len(v)):  # forward: accelerate within limits
            v[i] = min(v[i], math.sqrt(v[i - 1] ** 2 + 2 * a_lim[i] * ds[i - 1]))
        for i in range(len(v) - 2, -1, -1):  # backward: brake in time
            v[i] = min(v[i], math.sqrt(v[i + 1] ** 2 + 2 * a_lim[i] * ds[i]))
    # time at each path point; between points the path speed changes at a constant rate, so s(t)
    # is piecewise quadratic and the joint accelerations stay bounded (no velocity steps)
    t_pts = np.zeros(len(s))
    for i in range(1, len(s)):
        vm = max((v[i] + v[i - 1]) / 2, 1e-6)
        t_pts[i] = t_pts[i - 1] + ds[i - 1] / vm
    duration = float(t_pts[-1])
    check_duration(duration, "the path, slowed where its joints' speed and acceleration limits need it",
                   "place the workpiece where the joints move less, or split the program")
    t = np.arange(0.0, duration + dt, dt)
    t[-1] = min(t[-1], duration)
    seg = np.clip(np.searchsorted(t_pts, t, side="right") - 1, 0, len(s) - 2)
    tau = np.maximum(t_pts[seg + 1] - t_pts[seg], 1e-12)
    acc = (v[seg + 1] - v[seg]) / tau
    dtl = t - t_pts[seg]
    s_t = np.minimum(s[seg] + v[seg] * dtl + 0.5 * acc * dtl ** 2, s[seg + 1])
    idx = np.clip(np.searchsorted(s, s_t, side="right") - 1, 0, len(s) - 2)
    frac = np.where(ds[idx] > 0, (s_t - s[idx]) / np.maximum(ds[idx], 1e-15), 0.0)
    segs, seg_of, u_of = on_path
    seg_t = seg_of[idx + 1]
    u_from = np.where(seg_of[idx] == seg_t, u_of[idx], 0.0)   # a segment's first chord starts at u = 0
    u_t = u_from + (u_of[idx + 1] - u_from) * frac
    p_t = np.array([segs[k].point(u) for k, u in zip(seg_t, u_t)])
    line_t = lines[idx + (frac > 0.5)]
    # exact IK at every time sample (FK of q lies on the programmed path), continuing the branch
    q_t = np.empty((len(t), Q.shape[1]))
    for k in range(len(t)):
        near = Q[idx[k]] + (Q[idx[k] + 1] - Q[idx[k]]) * frac[k]
        q = ik.exact(p_t[k], near)
        if q is None:
            raise PlanError(f"line {line_t[k]} sample {k}: the IK solution is lost between path points")
        q_t[k] = q
    return t, q_t, p_t, line_t, duration, s_t


def _tool_links(model) -> set[int]:
    """The links that carry the tool: the tool frame's link, the wrist link that holds it, and every
    link beyond them (a tool reaches past its flange by little: the wrist is at the work too)."""
    tool = int(model.frame_link[model.frame_index(model.tool_frame)])
    out = {tool}
    if tool >= 0 and model.joints[tool].parent >= 0:
        out.add(model.joints[tool].parent)
    for i, j in enumerate(model.joints):
        if j.parent in out:
            out.add(i)
    return out


def _check_workpiece(model, Q: np.ndarray, T_wp: np.ndarray, half: np.ndarray, lines: np.ndarray) -> None:
    """The arm's links stay out of the box — not the tool, which touches the workpiece by design: the
    links that carry it, and the shapes the robot's data names as the tool's (`tool_shapes`)."""
    inv = np.linalg.inv(T_wp)
    carry, named = _tool_links(model), set((model.meta.get("path") or {}).get("tool_shapes", ()))
    shapes = [s for s in model.shapes if s.link >= 0 and s.link not in carry and s.name not in named]
    step = max(1, len(Q) // 400)
    for k in range(0, len(Q), step):
        F = model.fk_frames(Q[k])
        for sh in shapes:
            T = inv @ F[sh.link + 1]
            for u in np.linspace(0, 1, 7):
                p = np.array(sh.p0) + u * (np.array(sh.p1) - np.array(sh.p0))
                pl = T[:3, :3] @ p + T[:3, 3]
                d = np.maximum(np.abs(pl) - half, 0.0)
                dist = np.linalg.norm(d) if np.any(d > 0) else -float(np.min(half - np.abs(pl)))
                if dist < sh.radius:
                    raise PlanError(f"line {lines[k]} sample {k}: the {sh.name} would hit the workpiece "
                                    f"({(sh.radius - dist) * 1e3:.1f} mm into it)")
