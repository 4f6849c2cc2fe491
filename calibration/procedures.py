"""Joint offset calibration: reference pose, direction and scale check, PUMA multi-pose fit.

All procedures talk to the board through `firmware_protocol.link.Link` with an identity joint map
(they measure the raw board frame) and return results in radians; the CLI converts to degrees
and writes the calibration file (`hil.calibration_files`). Model (see `JointMap`): for the physical
angle p the board reads b = sign · p + offset and drives p = b_cmd − offset.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from firmware_protocol import messages as M
from firmware_protocol.joint_map import JointMap
from firmware_protocol.link import Link
from hil.errors import HilError, InputError
from hil.inputs import read_text
from hil.robots import dh_constant
from hil.robots import load as load_robot
from hil.robots.model import Joint, RobotModel


@dataclass
class ReferenceResult:
    offsets: np.ndarray        # rad, per joint
    spread: np.ndarray         # rad, standard deviation of the readings
    samples: int
    warnings: list[str] = field(default_factory=list)


# A joint that moves less than this share of its command (either way) did not show its direction.
STUCK_RATIO = 0.5


@dataclass
class DirectionResult:
    ratio: np.ndarray          # measured / commanded motion per joint (≈ +1 good, ≈ −1 reversed)
    commanded: np.ndarray      # rad
    measured: np.ndarray       # rad
    reversed: list[str] = field(default_factory=list)
    misscaled: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # moved less than half the command: direction unknown

    def signs_over(self, previous: np.ndarray) -> np.ndarray:
        """Each joint's direction (+1, or −1 when reversed) where it followed the command clearly
        (|ratio| > 0.5); `previous` where it did not, since its direction was not seen."""
        found = np.where(self.ratio < 0, -1.0, 1.0)
        return np.where(np.abs(self.ratio) > STUCK_RATIO, found, np.asarray(previous, dtype=float))


def read_samples(link: Link, n: int = 200, timeout_s: float = 10.0, hold_q: np.ndarray | None = None) -> np.ndarray:
    """n fresh measured states (raw board frame), (n, joints), radians. Keeps commanding `hold_q`
    (when enabled; it feeds the watchdog) or HOLD frames, each of which the board answers."""
    out = []
    last_seq = None
    deadline = time.monotonic() + timeout_s
    while len(out) < n:
        if time.monotonic() > deadline:
            raise HilError(f"only {len(out)} of {n} states arrived within {timeout_s:.0f} s")
        s = link.latest()
        if s is not None and s.seq != last_seq:
            last_seq = s.seq
            out.append(s.q.copy())
        if hold_q is None:
            link.send_positions(np.zeros(link.info.n_joints), hold=True)  # any command frame gets a state back
        else:
            link.send_positions(hold_q)
        time.sleep(0.004)
    return np.array(out)


def reference(link: Link, model, q_ref: np.ndarray, signs: np.ndarray | None = None, n: int = 200,
              resolution_rad: float = 2 * math.pi / 4096) -> ReferenceResult:
    """Offsets from the robot held in the known pose q_ref (torque off): offset = mean(b) − sign · q_ref."""
    link.joint_map = JointMap.identity(model.n)
    signs = np.ones(model.n) if signs is None else np.asarray(signs, float)
    B = read_samples(link, n)
    mean = B.mean(axis=0)
    spread = B.std(axis=0)
    offsets = mean - signs * q_ref
    res = ReferenceResult(offsets, spread, len(B))
    moving = [model.joint_names[i] for i in range(model.n) if spread[i] > 3 * resolution_rad]
    if moving:
        res.warnings.append("the robot moved during the capture (spread above the sensor resolution): "
                            + ", ".join(moving) + ". Hold it still and run again")
    big = [f"{model.joint_names[i]} ({math.degrees(offsets[i]):+.1f}°)" for i in range(model.n)
           if abs(offsets[i]) > math.radians(15)]
    if big:
        res.warnings.append("offsets over 15°: " + ", ".join(big) + " — is the robot really in the reference pose?")
    return res


def stream_to(link: Link, q_from: np.ndarray, q_to: np.ndarray, speed: float, rate_hz: float = 100.0,
              send=None) -> None:
    """Move the command from q_from to q_to at `speed` rad/s, streaming at rate_hz (feeds the
    watchdog); `send(q)` in place of `link.send_positions` where each command is checked first."""
    send = send or link.send_positions
    d = q_to - q_from
    T = max(float(np.max(np.abs(d))) / speed, 1.0 / rate_hz)
    n = int(math.ceil(T * rate_hz))
    for k in range(1, n + 1):
        send(q_from + d * k / n)
        time.sleep(1.0 / rate_hz)


def _hold(link: Link, q: np.ndarray, seconds: float, rate_hz: float = 100.0) -> None:
    for _ in range(int(seconds * rate_hz)):
        link.send_positions(q)
        time.sleep(1.0 / rate_hz)


def directions(link: Link, model, amplitude_rad: float = math.radians(5), speed: float = math.radians(10),
               joints: list[int] | None = None, log=print, settle_s: float = 0.4) -> DirectionResult:
    """Jog each joint ±amplitude around where it stands (inside its limits), compare the measured
    motion with the commanded one; flag reversed (ratio < 0) and mis-scaled (|ratio| off by > 10%)."""
    link.joint_map = JointMap.identity(model.n)
    read_samples(link, 2)
    state = link.latest().state
    if state not in (M.BoardState.DISABLED, M.BoardState.ENABLED):
        raise HilError(f"the board is in state {M.BoardState(state).name}; clear its faults first")
    link.enable()
    ratio = np.ones(model.n)
    cmd = np.zeros(model.n)
    meas = np.zeros(model.n)
    # start from the board's own targets (command frame, = where the servos stand after ENABLE):
    # a reading with an unknown offset or sign is not a safe command
    q_cmd = np.array([link.param_get(M.Param.TARGET, j) * 1e-6 for j in range(model.n)])
    try:
        _hold(link, q_cmd, 0.2)
        for j in (range(model.n) if joints is None else joints):
            amp = amplitude_rad
            lo, hi = model.lower[j], model.upper[j]
            if q_cmd[j] + amp > hi:  # stay inside the limits
                amp = -amp
            start = read_samples(link, 20, hold_q=q_cmd).mean(axis=0)
            target = q_cmd.copy()
            target[j] = min(max(target[j] + amp, lo), hi)
            stream_to(link, q_cmd, target, speed)
            _hold(link, target, settle_s)
            end = read_samples(link, 20, hold_q=target).mean(axis=0)
            stream_to(link, target, q_cmd, speed)
            _hold(link, q_cmd, 0.75 * settle_s)
            state = link.latest().state
            if state != M.BoardState.ENABLED:
                # the servos stopped following (watchdog, fault, e-stop): this joint's motion says nothing
                raise HilError(f"the board left ENABLED (now {M.BoardState(state).name}, faults "
                               f"{link.latest().faults:#x}) while {model.joint_names[j]} was jogged; nothing was "
                               "saved. Check power and cable (and the host's load: the board's watchdog trips "
                               "when commands stop for its timeout, 50 ms unless --watchdog-ms gives it more), "
                               "then run again")
            c = target[j] - q_cmd[j]
            m = end[j] - start[j]
            cmd[j], meas[j] = c, m
            ratio[j] = m / c if abs(c) > 1e-9 else 1.0
            log(f"  {model.joint_names[j]:<18} commanded {math.degrees(c):+6.2f}°, measured {math.degrees(m):+6.2f}°"
                + ("   DID NOT FOLLOW" if abs(ratio[j]) <= STUCK_RATIO else "   REVERSED" if ratio[j] < 0
                   else "   MIS-SCALED" if abs(abs(ratio[j]) - 1) > 0.1 else ""))
    finally:
        try:
            link.disable()
        except Exception:  # noqa: BLE001 - the watchdog holds it anyway
            pass
    res = DirectionResult(ratio, cmd, meas)
    res.reversed = [model.joint_names[j] for j in range(model.n) if ratio[j] < -STUCK_RATIO]
    res.stuck = [model.joint_names[j] for j in range(model.n) if abs(ratio[j]) <= STUCK_RATIO]
    res.misscaled = [model.joint_names[j] for j in range(model.n)
                     if abs(ratio[j]) > STUCK_RATIO and abs(abs(ratio[j]) - 1) > 0.1]
    return res


# ------------------------------------------------------------------------------ poses (PUMA)
@dataclass
class PoseFitResult:
    offsets: np.ndarray          # rad, joint offsets (reading − true)
    lengths: dict[str, float]    # fitted DH lengths (m), when asked
    rms_mm: float
    residuals_mm: np.ndarray     # per pose, mm
    sigma: np.ndarray            # 1-sigma uncertainty of each parameter (rad or m)
    condition: float
    names: list[str]
    warnings: list[str] = field(default_factory=list)
    undetermined: list[str] = field(default_factory=list)  # parameters the points do not determine


def load_pose_file(path: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSV: q1..qn in degrees (board readings), x, y, z in mm (measured tool point); '#' comments."""
    rows = []
    for lineno, line in enumerate(read_text(path, "pose file").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p for p in line.replace(";", ",").split(",") if p.strip()]
        try:
            vals = [float(p) for p in parts]
        except ValueError:
            raise InputError(f"{path}, line {lineno}: not numbers: {line[:80]!r}") from None
        if len(vals) != n + 3:
            raise InputError(f"{path}, line {lineno}: expected {n} joint angles (deg) and x, y, z (mm), "
                             f"got {len(vals)} values")
        if not all(math.isfinite(v) and abs(v) < 1e6 for v in vals):
            raise InputError(f"{path}, line {lineno}: every value must be a finite number of sensible size")
        rows.append(vals)
    if len(rows) < 8:
        raise InputError(f"{path}: {len(rows)} poses; the fit needs at least 8")
    a = np.array(rows)
    return np.radians(a[:, :n]), a[:, n:] * 1e-3


def fit_poses(model, q_read: np.ndarray, p_meas: np.ndarray, fit_lengths: bool = False,
              tool: np.ndarray | None = None) -> PoseFitResult:
    """Levenberg–Marquardt fit of joint offsets (and optionally a2, d4) to measured tool points."""
    n = model.n
    names = [f"offset {j}" for j in model.joint_names]
    if fit_lengths:
        names += ["a2", "d4"]
    tool = np.eye(4) if tool is None else tool
    base_dh = model.meta["dh"]

    def model_for(x):
        if not fit_lengths:
            return model
        return _puma_with_lengths(load_robot(model.name), base_dh, x[n], x[n + 1]).with_tool(tool)

    mt = model.with_tool(tool)

    def residual(x):
        m = model_for(x) if fit_lengths else mt
        return np.concatenate([m.fk(q - x[:n])[:3, 3] - p for q, p in zip(q_read, p_meas)])

    x = np.zeros(len(names))
    if fit_lengths:
        x[n], x[n + 1] = base_dh["a"][1], base_dh["d"][3]
    lam = 1e-3
    r = residual(x)
    for _ in range(100):
        J = np.zeros((len(r), len(x)))
        for k in range(len(x)):
            dx = np.zeros_like(x)
            dx[k] = 1e-7
            J[:, k] = (residual(x + dx) - residual(x - dx)) / 2e-7
        A = J.T @ J
        g = J.T @ r
        step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
        r_new = residual(x + step)
        if r_new @ r_new < r @ r:
            x, r = x + step, r_new
            lam = max(lam / 10, 1e-12)
            if np.linalg.norm(step) < 1e-13:
                break
        else:
            lam *= 10
            if lam > 1e8:
                break
    J = np.zeros((len(r), len(x)))
    for k in range(len(x)):
        dx = np.zeros_like(x)
        dx[k] = 1e-7
        J[:, k] = (residual(x + dx) - residual(x - dx)) / 2e-7
    dof = max(len(r) - len(x), 1)
    s2 = float(r @ r) / dof
    sigma, undetermined, cond = _identifiability(J, s2)
    res_mm = np.linalg.norm(r.reshape(-1, 3), axis=1) * 1e3
    out = PoseFitResult(x[:n].copy(), {"a2": float(x[n]), "d4": float(x[n + 1])} if fit_lengths else {},
                        float(np.sqrt(np.mean(res_mm ** 2))), res_mm, sigma, cond, names)
    out.undetermined = [names[i] for i in undetermined]
    if out.undetermined:
        out.warnings.append(f"the measured points do not determine {', '.join(out.undetermined)} (a change of "
                            "them moves no measured point): add poses that rotate those joints with the tool "
                            "point off their axes, or measure a point away from the flange axis")
    elif cond > 1e4:
        weak = [names[i] for i in np.argsort(-sigma)[:3]]
        out.warnings.append(f"the pose set is poorly conditioned (condition number {cond:.3g}); the least "
                            f"determined parameters are {', '.join(weak)}. Add poses that move them more")
    return out


def _identifiability(J: np.ndarray, s2: float, rel_tol: float = 1e-8) -> tuple[np.ndarray, list[int], float]:
    """(1σ of each parameter, the parameters the data cannot determine, condition number of the
    determined part). A parameter is undetermined when a direction the Jacobian does not see
    (singular value below rel_tol of the largest) has a large share of it; the others' σ come from
    the pseudo-inverse restricted to what the data sees."""
    _, sv, Vt = np.linalg.svd(J, full_matrices=True)
    m = J.shape[1]
    sv = np.concatenate([sv, np.zeros(m - len(sv))]) if len(sv) < m else sv
    seen = sv > rel_tol * max(sv[0], 1e-300)
    null = Vt[~seen]  # rows: directions in parameter space with no effect on the residual
    share = np.sum(null ** 2, axis=0) if len(null) else np.zeros(m)
    undetermined = [k for k in range(m) if share[k] > 1e-3]
    inv = np.where(seen, 1.0 / np.where(seen, sv, 1.0) ** 2, 0.0)
    cov = s2 * (Vt.T * inv) @ Vt
    sigma = np.sqrt(np.maximum(np.diag(cov), 0.0))
    sigma[undetermined] = np.inf
    cond = float(sv[seen][0] / sv[seen][-1]) if seen.any() else math.inf
    return sigma, undetermined, cond


def _puma_with_lengths(model, dh, a2: float, d4: float):
    """The same PUMA with a2 and d4 replaced (for the length fit)."""

    a = np.array(dh["a"], float)
    d = np.array(dh["d"], float)
    a[1], d[3] = a2, d4
    joints = []
    for i, j in enumerate(model.joints):
        placement = np.eye(4) if i == 0 else dh_constant(a[i - 1], d[i - 1], dh["alpha"][i - 1])
        joints.append(Joint(j.name, j.parent, placement, j.axis, j.lower, j.upper, j.velocity_limit,
                            j.acceleration_limit))
    last = dh_constant(a[5], d[5], dh["alpha"][5])
    frames = {"wrist": (5, last), "tool": (5, last)}
    meta = dict(model.meta)
    meta["dh"] = {"a": a, "d": d, "alpha": np.array(dh["alpha"])}
    return RobotModel(model.name, joints, frames, "tool", model.base_frame, model.link_names, model.home,
                      model.poses, model.shapes, model.masses, np.zeros((model.n + 1, 3)), meta)
