"""The bent-knee and the knee-stretched walk side by side: figures for benchmarks/README.md and the
figure docs/walk-bent-vs-stretched.png (COM height, knees, ZMP against the support region, the soles'
pitch over time, each computed back from the planned joint angles by the plan's own check).

Run: `python benchmarks/fig_walks.py [--steps 6] [--out docs/walk-bent-vs-stretched.png]`
(needs matplotlib: `pip install -e '.[plot]'`).
"""

from __future__ import annotations

import argparse
import os
import textwrap

import numpy as np

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".numba_cache"))

from hil import robots  # noqa: E402
from hil.motion import contacts, walking  # noqa: E402
from hil.motion.limits import check_limits  # noqa: E402


def support_band(res, hl: float, hw: float, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sample, the extent along `axis` (0 x, 1 y) of what the plan has on the ground (whole
    soles, or the one corner of a foot on its toe or heel)."""
    lo, hi = np.zeros(len(res.t)), np.zeros(len(res.t))
    for k in range(len(res.t)):
        pts = []
        for f, (side, kind) in enumerate(zip("lr", contacts.decode(int(res.support[k])))):
            for _, x, y in contacts.corners(side, kind, hl, hw):
                pts.append((res.feet_w[k, f] @ [x, y, 0, 1])[axis])
        lo[k], hi[k] = min(pts), max(pts)
    return lo, hi


def knee_from_straight(model, res) -> np.ndarray:
    """Per sample, each knee's angle from straight (deg), (N, 2) for left and right."""
    return np.column_stack([np.degrees(res.q[:, model.joint_index(f"{s}_knee")] - model.lower[model.joint_index(f"{s}_knee")])
                            for s in "lr"])


def support_knee(model, res) -> np.ndarray:
    """The support knee's angle from straight (deg) per sample (NaN in double support)."""
    both = knee_from_straight(model, res)
    out = np.full(len(res.t), np.nan)
    for k, (left, right) in enumerate(contacts.decode(int(c)) for c in res.support):
        if contacts.AIR in (left, right):
            out[k] = both[k, 0] if right == contacts.AIR else both[k, 1]
    return out


def knee_through_mid_stance(model, res, share: float = 0.3) -> float:
    """The support knee's largest angle from straight over the middle `share` of each stance (deg)."""
    knee = support_knee(model, res)
    single = (~np.isnan(knee)).astype(int)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], single, [0]])))
    return max(float(np.max(knee[a + int((0.5 - share / 2) * (b - a)):a + int((0.5 + share / 2) * (b - a))]))
               for a, b in zip(edges[::2], edges[1::2]))


def knees_in_double_support(model, res) -> tuple[float, float]:
    """Both knees from straight over the double supports between the steps (deg): mean and largest."""
    both = knee_from_straight(model, res)
    down = np.array([contacts.AIR not in contacts.decode(int(c)) for c in res.support])
    steps = np.flatnonzero(~down)
    between = down & (np.arange(len(down)) > steps[0]) & (np.arange(len(down)) < steps[-1])
    return float(both[between].mean()), float(both[between].max())


def figures(model, label: str, res) -> str:
    rep = check_limits(model, res.t, res.q)
    ds_mean, ds_max = knees_in_double_support(model, res)
    return (f"| {label} | {res.t[-1]:.1f} s | {1e3 * res.margin.min():.1f} mm | {res.knee_mid_stance_deg:.1f}° / "
            f"{knee_through_mid_stance(model, res):.1f}° | {ds_mean:.0f}° / {ds_max:.0f}° | "
            f"{1e3 * np.ptp(res.com_w[:, 2]):.1f} mm | {100 * rep.speed_ratio:.0f} % | "
            f"{100 * rep.accel_ratio:.0f} % | {res.contact_error:.1e} m / {res.slide:.1e} m |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                  "walk-bent-vs-stretched.png"))
    args = ap.parse_args()
    model = robots.load("humanoid17")
    hl, hw = model.sole_half
    walks = {}
    for label, stretched in (("bent-knee", False), ("knee-stretched", True)):
        walks[label] = walking.plan(model, walking.WalkParams(steps=args.steps, knee_stretched=stretched),
                                    say=lambda s: None)
    print("| walk | duration | ZMP margin ≥ | support knee from straight: at mid-stance / through its middle 30 % "
          "| knees in double support, mean / largest | COM height range "
          "| peak joint speed / limit | peak joint acceleration / limit | feet down: off the ground / slide |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, res in walks.items():
        print(figures(model, label, res))

    import matplotlib   # lazy: the figure needs matplotlib, the table above does not
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    fig, axes = plt.subplots(5, 2, figsize=(12, 12), sharex="col")
    for col, (label, res) in enumerate(walks.items()):
        t = res.t
        ax = axes[0, col]
        ax.plot(t, res.com_w[:, 2] * 1e3, color="0.3")
        ax.set_title(textwrap.fill(f"{label}: {res.summary().split(', ', 1)[1].split(', peak')[0]}", 90), fontsize=8)
        ax.set_ylabel("COM height (mm)")
        ax = axes[1, col]
        knees = knee_from_straight(model, res)
        ax.plot(t, knees[:, 0], color="tab:blue", lw=0.6, label="left")
        ax.plot(t, knees[:, 1], color="tab:orange", lw=0.6, label="right")
        ax.plot(t, support_knee(model, res), color="tab:purple", lw=2, label="the support knee")
        ax.set_ylabel("knees from\nstraight (deg)")
        ax.legend(fontsize=7, loc="upper right")
        ax.set_ylim(bottom=0)
        for row, axis, name in ((2, 0, "x"), (3, 1, "y")):
            ax = axes[row, col]
            lo, hi = support_band(res, hl, hw, axis)
            ax.fill_between(t, lo * 1e3, hi * 1e3, color="tab:green", alpha=0.25, lw=0,
                            label="support region (what touches the ground)")
            ax.plot(t, res.zmp_w[:, axis] * 1e3, color="tab:red", lw=1, label="ZMP (from the joint motion)")
            ax.plot(t, res.com_w[:, axis] * 1e3, color="0.4", lw=0.8, label="COM")
            ax.set_ylabel(f"{name} (mm)")
        axes[2, col].legend(fontsize=7, loc="upper left")
        ax = axes[4, col]
        for f, (side, colour) in enumerate((("left", "tab:blue"), ("right", "tab:orange"))):
            F = res.feet_w[:, f]
            pitch = np.degrees(np.arctan2(-F[:, 2, 0], np.hypot(F[:, 0, 0], F[:, 1, 0])))
            down = np.array([contacts.decode(int(c))[f] != contacts.AIR for c in res.support])
            ax.plot(t, np.where(down, pitch, np.nan), color=colour, lw=1.5, label=f"{side} sole, on the ground")
            ax.plot(t, np.where(down, np.nan, pitch), color=colour, lw=0.5, ls=":")
        ax.set_ylabel("sole pitch (deg)\n+ heel up")
        ax.legend(fontsize=7, loc="upper left")
        axes[4, col].set_xlabel("t (s)")
    fig.suptitle(f"humanoid17, {args.steps} steps of 3 cm: bent-knee and knee-stretched walks "
                 "(each slowed to its joints' limits by `hil walk`)", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=90)
    print(f"wrote {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
