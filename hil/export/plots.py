"""A recording as one PNG (`hil plot RUN.npy`): per joint commanded against measured, the tracking
error, the safety flags and board faults over time, the loop period's histogram, and for a
humanoid the ZMP and the support polygon in the ground plane. Matplotlib without a display."""

from __future__ import annotations

import math

import numpy as np

from hil.errors import HilError
from hil.motion import contacts
from hil.motion.walking import WalkParams, check_walk
from hil.robots.model import SOLE_FRAMES
from hil.runtime.recorder import LOOP_MOTION
from hil.safety import FLAG_NAMES

FLAG_BITS = tuple(FLAG_NAMES[1 << b] for b in range(8))   # bit b of the recorded safety_flags


def _pyplot():
    try:
        import matplotlib  # lazy: matplotlib is optional and takes 0.5 s
    except ImportError:
        raise HilError("plots need matplotlib: pip install -e '.[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")   # no display needed
    import matplotlib.pyplot as plt  # lazy: matplotlib is optional and takes 0.5 s

    return plt


def _zmp_panel(ax, model, data, rate_hz: float) -> float | None:
    """Draws the ZMP over the soles on the ground; returns the worst margin (m), None without a walk."""

    moving = np.flatnonzero(data["loop_flags"] & LOOP_MOTION)
    if len(moving) < 20 or "support" not in data.dtype.names or not contacts.is_valid(data["support"][moving]).all():
        return None   # no motion, or one that does not say which foot it stands on
    # the motion's own clock: the loop advances it one nominal period per moving cycle whatever the
    # wall clock did, so the commands are evenly spaced on it (on the wall clock's jittered times a
    # second derivative turns the jitter into metres of ZMP)
    t = np.arange(len(moving)) / rate_hz
    # the planned joints (the commands less their compliance compensation; the commands themselves
    # in an older recording): a ZMP is a second derivative, and measured positions carry the
    # encoders' quantisation (0.09° on a 12-bit servo), which it turns into metres
    field = "q_plan" if "q_plan" in data.dtype.names else "q_cmd"
    Q = np.ascontiguousarray(data[field][moving], dtype=np.float64)
    support = data["support"][moving].astype(np.int64)
    hl, hw = model.sole_half
    res = check_walk(model, t, Q, support, np.zeros((len(t), 2)), WalkParams(rate_hz=rate_hz), hl, hw, 0.0, "run")
    corners = np.array([[-hl, -hw, 0, 1], [hl, -hw, 0, 1], [hl, hw, 0, 1], [-hl, hw, 0, 1], [-hl, -hw, 0, 1]])
    switches = np.flatnonzero(np.diff(support)) + 1
    for k in [0, *switches, len(t) - 1]:
        for f, colour in ((0, "tab:blue"), (1, "tab:orange")):
            C = (res.feet_w[k, f] @ corners.T).T
            if C[:, 2].max() < 1e-3:
                ax.plot(C[:, 0] * 1e3, C[:, 1] * 1e3, color=colour, lw=1.0)
    ax.plot(res.com_w[:, 0] * 1e3, res.com_w[:, 1] * 1e3, color="0.4", lw=1, label="centre of mass")
    ax.plot(res.zmp_w[:, 0] * 1e3, res.zmp_w[:, 1] * 1e3, color="tab:red", lw=1, label="ZMP")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    worst = float(np.min(res.margin))
    ax.set_title("ZMP of the planned motion and the soles on the ground (left blue, right orange); "
                 f"margin ≥ {worst * 1e3:.1f} mm", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return worst


def plot_recording(path_png: str, data: np.ndarray, meta: dict, model, shadow: np.ndarray | None = None) -> list[str]:
    """Write the figure; returns the panels drawn. `shadow`: the shadow twin's rows (hil run
    --shadow): each joint's residual measured − predicted is drawn under its measurement."""
    plt = _pyplot()
    n = model.n
    cols = min(n, 6)
    joint_rows = math.ceil(n / cols)
    humanoid = model.floating
    fig = plt.figure(figsize=(3.0 * cols, 2.2 * joint_rows + 3.2 + (4.0 if humanoid else 0)), dpi=90)
    grid = fig.add_gridspec(joint_rows + 1 + (2 if humanoid else 0), cols)
    t = data["t"]
    has_shadow = shadow is not None and len(shadow) > 0
    names = list(meta.get("joints") or model.joint_names)
    _joint_panels(fig, grid, cols, data, names, n, shadow if has_shadow else None)
    row = joint_rows
    third = max(cols // 3, 1)
    _tracking_panel(fig.add_subplot(grid[row, :third]), data)
    _flags_panel(fig.add_subplot(grid[row, third:2 * third]), data)
    rate = _period_panel(fig.add_subplot(grid[row, 2 * third:]), data, meta)
    panels = ["joints", "tracking error", "safety flags", "period histogram"]
    if has_shadow:
        panels.insert(1, "shadow residuals")
    if humanoid and set(SOLE_FRAMES) <= set(model.frame_names):
        ax = fig.add_subplot(grid[row + 1:, :])
        worst = _zmp_panel(ax, model, data, rate or 200.0)
        if worst is not None:
            panels.append(f"ZMP and support polygon (margin ≥ {worst * 1e3:.1f} mm)")
        else:
            ax.set_axis_off()
            ax.text(0.5, 0.5, "no ZMP: the recording has no motion that says which foot it stands on",
                    ha="center", va="center", fontsize=9, transform=ax.transAxes)
    fig.suptitle(f"{meta.get('robot', model.name)}: {len(t)} cycles, {t[-1] - t[0] if len(t) else 0:.1f} s",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path_png)
    plt.close(fig)
    return panels


def _joint_panels(fig, grid, cols: int, data: np.ndarray, names: list, n: int, shadow) -> None:
    """Per joint, commanded against measured (deg); the shadow's residual under it, where there is one."""
    t = data["t"]
    for j in range(n):
        ax = fig.add_subplot(grid[j // cols, j % cols])
        cmd, meas = np.degrees(data["q_cmd"][:, j]), np.degrees(data["q_meas"][:, j])
        ax.plot(t, meas, color="tab:blue", lw=0.8, label="measured")
        ax.plot(t, cmd, color="tab:green", lw=1.2, label="commanded")
        mid = 0.5 * (max(cmd.max(), meas.max()) + min(cmd.min(), meas.min()))
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, mid - 1.0), max(hi, mid + 1.0))   # at least 2°: a still joint is not all noise
        if shadow is not None:
            ax.plot(shadow["t"], np.degrees(shadow["residual"][:, j]) + mid, color="tab:orange", lw=0.8,
                    label="residual (+ mid)")
        ax.set_title(names[j] if j < len(names) else f"joint {j}", fontsize=8)
        ax.tick_params(labelsize=7)
        if j == 0:
            ax.set_ylabel("deg", fontsize=8)
            ax.legend(fontsize=6, loc="best")


def _tracking_panel(ax, data: np.ndarray) -> None:
    err = np.degrees(np.abs(data["q_cmd"] - data["q_meas"]).max(axis=1))
    ax.plot(data["t"], err, color="tab:red", lw=1)
    ax.set_title("tracking error, worst joint (deg)", fontsize=9)
    ax.set_xlabel("t (s)", fontsize=8)


def _flags_panel(ax, data: np.ndarray) -> None:
    """Each safety flag and the board's faults, marked where they were up."""
    t = data["t"]
    flags = data["safety_flags"].astype(np.int64)
    for b, name in enumerate(FLAG_BITS):
        on = (flags >> b) & 1 == 1
        ax.plot(t[on], np.full(on.sum(), b), "|", ms=6, color="tab:purple")
    faulted = data["faults"] != 0
    ax.plot(t[faulted], np.full(faulted.sum(), len(FLAG_BITS)), "|", ms=6, color="tab:red")
    ax.set_yticks(range(len(FLAG_BITS) + 1), [*FLAG_BITS, "board fault"], fontsize=7)
    ax.set_ylim(-0.5, len(FLAG_BITS) + 0.5)
    ax.set_title("safety flags and board faults", fontsize=9)
    if len(t):
        ax.set_xlim(t[0], t[-1] + 1e-3)
    ax.set_xlabel("t (s)", fontsize=8)


def _period_panel(ax, data: np.ndarray, meta: dict) -> float:
    """The loop period's histogram about its nominal; the loop's rate (Hz: the recording's, else
    the median period's; 0 without periods)."""
    period = data["period_us"][1:].astype(float)
    rate = float(meta.get("rate_hz") or (1e6 / np.median(period) if len(period) else 0))
    if len(period):
        ax.hist(period - 1e6 / rate, bins=60, color="tab:gray", log=True)
    ax.set_title(f"loop period − {1e6 / rate:.0f} µs (µs)" if rate else "loop period", fontsize=9)
    return rate
