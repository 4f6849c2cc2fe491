"""Motion files: keyframes of named joint angles, played back at any loop rate.

Format (TOML; JSON with the same keys works too)::

    name = "wave"
    robot = "humanoid17"
    interpolation = "cubic"        # or "linear"
    start = "home"                 # named pose that unlisted joints take (default: home)
    mirror = false                 # true: play it with left and right swapped
    dynamic = false                # true for walking motions (every keyframe annotated with support):
                                   # balance is judged by the ZMP computed back from the motion

    [[keyframe]]
    duration_s = 0.6               # time to reach this keyframe from the previous one
    support = "both"               # optional: "left", "right" or "both" (the foot the robot stands on),
                                   # or each foot's contact, e.g. "l_toe+r_flat" (hil.motion.contacts)
    joints = { r_shoulder_roll = 80.0, r_elbow = 40.0 }   # degrees; others keep their previous value
    mirror_to = "left"             # optional: also set the other side's joints to the same values

The first keyframe is reached from the robot's current pose (the loop ramps in). Angles in
degrees at this boundary, radians inside. Mirroring uses the model's convention: the mirrored pose
of the left side has the same joint angles on the right side (ROBOTS.md §2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hil.errors import ConfigError, InputError, did_you_mean
from hil.inputs import parse_json, parse_toml, read_text
from hil.motion import contacts
from hil.motion.bounds import MAX_KEYFRAMES, check_count, check_duration
from hil.motion.walking import WalkParams, check_walk


@dataclass
class Keyframe:
    time_s: float        # absolute time at which this keyframe is reached
    q: np.ndarray        # rad, all joints
    support: str | None


@dataclass
class KeyframeMotion:
    name: str
    robot: str
    interpolation: str
    keyframes: list[Keyframe]
    q_start: np.ndarray
    dynamic: bool = False   # a walking motion: balance is judged by its ZMP, not the static COM

    @property
    def duration(self) -> float:
        return self.keyframes[-1].time_s if self.keyframes else 0.0

    def sample(self, t: float) -> np.ndarray:
        """Joint angles (rad) at time t; keyframe 0 is reached at its time from q_start."""
        return self.samples(np.array([float(t)]))[0]

    def samples(self, t: np.ndarray) -> np.ndarray:
        """Joint angles (N, n) at times t (N,): linear, or cubic Hermite with Catmull-Rom tangents and
        zero velocity at the first and last keyframe; one pass over all samples at once."""
        times = np.array([0.0] + [k.time_s for k in self.keyframes])
        qs = np.array([self.q_start] + [k.q for k in self.keyframes])
        t = np.clip(np.asarray(t, dtype=np.float64), 0.0, times[-1])
        i = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2)
        t0, t1 = times[i], times[i + 1]
        h = t1 - t0
        u = np.where(h > 0, (t - t0) / np.where(h > 0, h, 1.0), 1.0)[:, None]
        if self.interpolation == "linear":
            return qs[i] + u * (qs[i + 1] - qs[i])
        tangents = np.zeros_like(qs)
        if len(qs) > 2:
            tangents[1:-1] = (qs[2:] - qs[:-2]) / (times[2:] - times[:-2])[:, None]
        m0, m1 = tangents[i] * h[:, None], tangents[i + 1] * h[:, None]
        h00 = 2 * u ** 3 - 3 * u ** 2 + 1
        h10 = u ** 3 - 2 * u ** 2 + u
        h01 = -2 * u ** 3 + 3 * u ** 2
        h11 = u ** 3 - u ** 2
        return h00 * qs[i] + h10 * m0 + h01 * qs[i + 1] + h11 * m1

    def check_dynamic(self, model, rate_hz: float) -> None:
        """For a dynamic motion: the ZMP computed back from the joint motion must stay inside the
        support polygon, and feet on the ground must not slide (ConfigError otherwise)."""

        t, Q = self.trajectory(rate_hz)
        support = self.support_codes(t, missing=contacts.parse("both"))
        hl, hw = model.sole_half
        res = check_walk(model, t, Q, support, np.zeros((len(t), 2)), WalkParams(rate_hz=rate_hz), hl, hw, 0.0,
                         self.name)
        if res.margin.min() < 0:
            k = int(np.argmin(res.margin))
            raise ConfigError(f"{self.name}: the ZMP leaves the support polygon by {-1e3 * res.margin[k]:.1f} mm "
                              f"at t = {t[k]:.2f} s")
        if res.slide > 0.002:
            raise ConfigError(f"{self.name}: a foot on the ground slides {1e3 * res.slide:.1f} mm")

    def time_scaled(self, k: float) -> "KeyframeMotion":
        """The same motion k times slower (every keyframe's time × k)."""
        frames = [Keyframe(f.time_s * k, f.q.copy(), f.support) for f in self.keyframes]
        return KeyframeMotion(self.name, self.robot, self.interpolation, frames, self.q_start.copy(), self.dynamic)

    def support_at(self, t: float) -> str | None:
        for k in self.keyframes:
            if t <= k.time_s:
                return k.support
        return self.keyframes[-1].support if self.keyframes else None

    def support_codes(self, t: np.ndarray, missing: int = contacts.UNKNOWN) -> np.ndarray:
        """`support_at` for every time in t at once, as hil.motion.contacts codes (`missing` where a
        keyframe says nothing)."""
        codes = np.array([missing if k.support is None else contacts.parse(k.support) for k in self.keyframes],
                         dtype=np.int64)
        times = np.array([k.time_s for k in self.keyframes])
        return codes[np.minimum(np.searchsorted(times, np.asarray(t, dtype=np.float64), side="left"), len(times) - 1)]

    def trajectory(self, rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
        t = np.arange(0.0, self.duration + 1e-12, 1.0 / rate_hz)
        if t[-1] < self.duration:
            t = np.append(t, self.duration)
        return t, self.samples(t)


def _mirror_name(name: str) -> str | None:
    if name.startswith("l_"):
        return "r_" + name[2:]
    if name.startswith("r_"):
        return "l_" + name[2:]
    return None


def load_motion(path: str | Path, model) -> KeyframeMotion:
    """Read and validate a motion file; ConfigError names the file, keyframe and joint."""
    path = Path(path)
    text = read_text(str(path), "motion file")
    try:
        where = f"motion file {path}"
        data = parse_json(text, where) if path.suffix == ".json" else parse_toml(text, where)
    except InputError as e:
        raise ConfigError(str(e)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"motion file {path}: expected a table of keys (name, keyframes, …), got {type(data).__name__}")
    return motion_from_dict(data, model, str(path))


def motion_from_dict(data: dict, model, where: str = "motion") -> KeyframeMotion:
    name = str(data.get("name", Path(where).stem))
    _check_header(data, model, where)
    interp = data.get("interpolation", "cubic")
    start_pose = data.get("start", "home")
    swap = bool(data.get("mirror", False))
    frames = data.get("keyframe")
    q = model.poses[start_pose].copy()
    t = 0.0
    out = []
    for k, kf in enumerate(frames, 1):
        w = f"{where}: keyframe {k}"
        if not isinstance(kf, dict):
            raise ConfigError(f"{w}: must be a table")
        dur = _duration(kf, t, w)
        support = kf.get("support")
        if support is not None:
            try:
                code = contacts.parse(support if isinstance(support, str) else repr(support))
            except ValueError as e:
                raise ConfigError(f"{w}: {e}") from None
            support = contacts.name(contacts.mirror(code) if swap else code)
        q = _keyframe_pose(kf, q, model, swap, w)
        t += dur
        out.append(Keyframe(t, q, support))
    dynamic = bool(data.get("dynamic", False))
    if dynamic and any(k.support is None for k in out):
        raise ConfigError(f"{where}: a dynamic motion needs a support annotation in every keyframe")
    return KeyframeMotion(name, model.name, interp, out, model.poses[start_pose].copy(), dynamic)


def _check_header(data: dict, model, where: str) -> None:
    """A motion for this robot (not a robot file), its interpolation, start pose and keyframes."""
    robot = data.get("robot", model.name)
    if isinstance(robot, dict) or "joint" in data or "dh" in data:
        raise ConfigError(f"{where} describes a robot (its [robot] table), not a motion: give it as --robot "
                          f"{where} (`hil robots --robot {where}` shows it); motions are in examples/*.toml")
    if robot != model.name:
        raise ConfigError(f"{where}: written for robot {robot!r}, not {model.name!r}: play it with --robot {robot} "
                          "(or change its `robot`)")
    interp = data.get("interpolation", "cubic")
    if interp not in ("cubic", "linear"):
        raise ConfigError(f"{where}: interpolation must be 'cubic' or 'linear', got {interp!r}")
    start_pose = data.get("start", "home")
    if start_pose not in model.poses:
        raise ConfigError(f"{where}: start pose {start_pose!r} unknown; poses: {', '.join(model.poses)}")
    frames = data.get("keyframe")
    if not isinstance(frames, list) or not frames:
        raise ConfigError(f"{where}: needs at least one [[keyframe]]")
    check_count(len(frames), MAX_KEYFRAMES, "keyframes", where, "split it into several files")


def _duration(kf: dict, t: float, w: str) -> float:
    """A keyframe's duration_s: a positive number, the motion still within the longest hil plays."""
    dur = kf.get("duration_s")
    if isinstance(dur, bool) or not isinstance(dur, (int, float)):
        raise ConfigError(f"{w}: needs duration_s (seconds, a number), got {dur!r}")
    if not dur > 0:
        raise ConfigError(f"{w}: duration_s must be positive, got {kf.get('duration_s')!r}")
    check_duration(t + dur, w, "split it into several files")
    return dur


def _keyframe_pose(kf: dict, before: np.ndarray, model, swap: bool, w: str) -> np.ndarray:
    """The pose a keyframe reaches: the one before it, with its joints (degrees, each in its range)
    set; `mirror_to` copies them to the other side, the motion's `mirror` swaps the sides."""
    joints = kf.get("joints", {})
    if not isinstance(joints, dict):
        raise ConfigError(f"{w}: joints must be a table of joint = degrees")
    mirror_to = kf.get("mirror_to")
    q = before.copy()
    items = list(joints.items())
    if mirror_to is not None:
        if mirror_to not in ("left", "right"):
            raise ConfigError(f"{w}: mirror_to must be 'left' or 'right'")
        items += [(_mirror_name(n), v) for n, v in joints.items() if _mirror_name(n)]
    for jname, deg in items:
        if swap and _mirror_name(jname):
            jname = _mirror_name(jname)
        if jname not in model.joint_names:
            raise ConfigError(f"{w}: unknown joint {jname!r}{did_you_mean(jname, model.joint_names)}; joints: "
                              f"{', '.join(model.joint_names)}")
        if isinstance(deg, bool) or not isinstance(deg, (int, float)):
            raise ConfigError(f"{w}: joint {jname} = {deg!r} is not a number (degrees)")
        val = float(deg)
        i = model.joint_index(jname)
        rad = math.radians(val)
        if not (math.isfinite(val) and model.lower[i] <= rad <= model.upper[i]):
            raise ConfigError(f"{w}: joint {jname} = {val:g}° is outside its range "
                              f"[{math.degrees(model.lower[i]):.1f}, {math.degrees(model.upper[i]):.1f}]°")
        q[i] = rad
    return q


def save_motion(path: str | Path, motion: KeyframeMotion, model) -> None:
    """Write a motion file (TOML) with every joint in every keyframe."""
    lines = [f'name = "{motion.name}"', f'robot = "{model.name}"', f'interpolation = "{motion.interpolation}"']
    if motion.dynamic:
        lines.append("dynamic = true   # a walking motion: hil play checks its ZMP, not the static COM")
    lines.append("")
    t_prev = 0.0
    for k in motion.keyframes:
        lines.append("[[keyframe]]")
        lines.append(f"duration_s = {k.time_s - t_prev:.6f}")
        if k.support:
            lines.append(f'support = "{k.support}"')
        joints = ", ".join(f"{n} = {math.degrees(v):.4f}" for n, v in zip(model.joint_names, k.q))
        lines.append(f"joints = {{ {joints} }}")
        lines.append("")
        t_prev = k.time_s
    Path(path).write_text("\n".join(lines))


def from_walk(res, model, name: str, frame_s: float = 0.01):
    """A planned walk as a dynamic keyframe motion (one keyframe every `frame_s`, each with its
    support foot), for `hil walk --motion-out`. Paper 000's driver used 30 ms frames; cubic
    interpolation between frames that far apart moves a foot on the ground by a tenth of a
    millimetre, and the ZMP of the finest difference sees it at each change of support."""
    rate = 1.0 / (res.t[1] - res.t[0])
    frames = []
    for tk in np.arange(frame_s, res.t[-1] + 1e-9, frame_s):
        k = int(min(round(tk * rate), len(res.t) - 1))
        sup = contacts.name(int(res.support[k]))
        frames.append(Keyframe(float(res.t[k]), res.q[k].copy(), sup))
    return KeyframeMotion(name, model.name, "cubic", frames, res.q[0].copy(), dynamic=True)
