"""Kinematics speed, side by side in one run: hil's Numba kernels vs a plain-NumPy baseline and,
when installed (`pip install -e '.[bench]'`), Pinocchio and the Robotics Toolbox on the same robot.

Prints ns per call (the best of several repeats, each the mean over many calls: on a shared VM
the minimum is the least disturbed figure, as `timeit` advises) and ratios against the NumPy
baseline. Calls are timed the way a user writes them, `model.fk(q)` inside a loop, with no
wrapper function around them. Run: `python benchmarks/bench_kinematics.py [--quick]`.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import timeit

import numpy as np

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".numba_cache"))

import hil.robots  # noqa: E402


def per_call_ns(fn, *args, n: int, repeats: int = 9) -> float:
    """Best-of-`repeats` mean time of `fn(*args)` in ns, the call written out in the timed loop."""
    names = [f"a{i}" for i in range(len(args))]
    timer = timeit.Timer(f"fn({', '.join(names)})", globals={"fn": fn, **dict(zip(names, args))})
    fn(*args)
    return min(timer.repeat(repeats, n)) / n * 1e9


# ------------------------------------------------------------------ NumPy baselines
def numpy_tree_fk_all(model, q):
    """All link poses with one 4x4 matmul pair per joint, written plainly in NumPy."""
    poses = []
    for i, j in enumerate(model.joints):
        k = j.axis
        c, s = math.cos(q[i]), math.sin(q[i])
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        R = np.eye(4)
        R[:3, :3] = np.eye(3) + s * K + (1 - c) * (K @ K)
        parent = np.eye(4) if j.parent < 0 else poses[j.parent]
        poses.append(parent @ j.placement @ R)
    return poses


def numpy_dh_fk(dh, q):
    T = np.eye(4)
    for i in range(6):
        ct, st = math.cos(q[i]), math.sin(q[i])
        ca, sa = math.cos(dh["alpha"][i]), math.sin(dh["alpha"][i])
        T = T @ np.array([[ct, -st * ca, st * sa, dh["a"][i] * ct], [st, ct * ca, -ct * sa, dh["a"][i] * st],
                          [0, sa, ca, dh["d"][i]], [0, 0, 0, 1.0]])
    return T


def numpy_dh_jacobian(dh, q):
    T = np.eye(4)
    origins, axes = [], []
    for i in range(6):
        origins.append(T[:3, 3].copy())
        axes.append(T[:3, 2].copy())
        ct, st = math.cos(q[i]), math.sin(q[i])
        ca, sa = math.cos(dh["alpha"][i]), math.sin(dh["alpha"][i])
        T = T @ np.array([[ct, -st * ca, st * sa, dh["a"][i] * ct], [st, ct * ca, -ct * sa, dh["a"][i] * st],
                          [0, sa, ca, dh["d"][i]], [0, 0, 0, 1.0]])
    J = np.zeros((6, 6))
    for i in range(6):
        J[:3, i] = np.cross(axes[i], T[:3, 3] - origins[i])
        J[3:, i] = axes[i]
    return J


def numpy_dh_fk_batch(dh, Q):
    N = Q.shape[0]
    T = np.broadcast_to(np.eye(4), (N, 4, 4)).copy()
    for i in range(6):
        ct, st = np.cos(Q[:, i]), np.sin(Q[:, i])
        ca, sa = math.cos(dh["alpha"][i]), math.sin(dh["alpha"][i])
        A = np.zeros((N, 4, 4))
        A[:, 0, 0], A[:, 0, 1], A[:, 0, 2], A[:, 0, 3] = ct, -st * ca, st * sa, dh["a"][i] * ct
        A[:, 1, 0], A[:, 1, 1], A[:, 1, 2], A[:, 1, 3] = st, ct * ca, -ct * sa, dh["a"][i] * st
        A[:, 2, 1], A[:, 2, 2], A[:, 2, 3] = sa, ca, dh["d"][i]
        A[:, 3, 3] = 1.0
        T = T @ A
    return T


# ------------------------------------------------------------------------- peers
def pinocchio_model(model):
    import pinocchio as pin

    pm = pin.Model()
    ids = []
    for j in model.joints:
        parent = 0 if j.parent < 0 else ids[j.parent]
        placement = pin.SE3(j.placement[:3, :3].copy(), j.placement[:3, 3].copy())
        ids.append(pm.addJoint(parent, pin.JointModelRevoluteUnaligned(np.asarray(j.axis, float)), placement, j.name))
    frame_ids = {}
    for f in range(model.n + 1, len(model.frame_names)):
        link = int(model.frame_link[f])
        O = model._offsets[f]
        fr = pin.Frame(model.frame_names[f], ids[link], pin.SE3(O[:3, :3].copy(), O[:3, 3].copy()),
                       pin.FrameType.OP_FRAME)
        frame_ids[model.frame_names[f]] = pm.addFrame(fr)
    return pm, frame_ids


def rtb_puma(dh):
    import roboticstoolbox as rtb

    links = [rtb.RevoluteDH(a=dh["a"][i], d=dh["d"][i], alpha=dh["alpha"][i]) for i in range(6)]
    return rtb.DHRobot(links, name="puma560-paper")


def row(label, ns, base_ns):
    ratio = f"{base_ns / ns:8.1f}x" if base_ns and ns else ""
    print(f"  {label:<44} {ns:12.0f} ns {ratio}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (for a smoke run)")
    args = ap.parse_args()
    n_single = 2000 if args.quick else 50000
    n_batch = 20000 if args.quick else 200000

    puma = hil.robots.load("puma560")
    hum = hil.robots.load("humanoid17")
    dh = puma.meta["dh"]
    rng = np.random.default_rng(0)
    q = rng.uniform(puma.lower, puma.upper)
    qh = rng.uniform(hum.lower, hum.upper)
    Q = rng.uniform(puma.lower, puma.upper, size=(n_batch, 6))

    import numba
    print(f"hil kinematics benchmark — Python {platform.python_version()}, numpy {np.__version__}, "
          f"numba {numba.__version__}, {os.cpu_count()} cores")
    peers = {}
    try:
        import pinocchio as pin
        peers["pin"] = pin
    except ImportError:
        print("  (Pinocchio not installed: pip install -e '.[bench]')")
    try:
        import roboticstoolbox  # noqa: F401
        peers["rtb"] = True
    except ImportError:
        print("  (Robotics Toolbox not installed: pip install -e '.[bench]')")
    print("ratio = NumPy baseline time / this time (higher is faster)")

    print("\nPUMA 560 FK, tool pose, one call from Python")
    base = per_call_ns(numpy_dh_fk, dh, q, n=n_single // 5)
    row("NumPy DH product (baseline)", base, base)
    row("hil  model.fk(q)", per_call_ns(puma.fk, q, n=n_single), base)
    if "pin" in peers:
        pm, fids = pinocchio_model(puma)
        pd = pm.createData()
        fid = fids["tool"]

        def pin_fk():
            pin.forwardKinematics(pm, pd, q)
            return pin.updateFramePlacement(pm, pd, fid).homogeneous
        np.testing.assert_allclose(pin_fk(), puma.fk(q), atol=1e-12)
        row("Pinocchio forwardKinematics + frame", per_call_ns(pin_fk, n=n_single), base)
    if "rtb" in peers:
        ets = rtb_puma(dh).ets()
        np.testing.assert_allclose(ets.eval(q), puma.fk(q), atol=1e-12)
        row("Robotics Toolbox ets.eval (C++)", per_call_ns(ets.eval, q, n=n_single), base)

    print("\nPUMA 560 Jacobian (6x6, base frame), one call")
    base = per_call_ns(numpy_dh_jacobian, dh, q, n=n_single // 5)
    row("NumPy DH Jacobian (baseline)", base, base)
    row("hil  model.jacobian(q, 'tool')", per_call_ns(puma.jacobian, q, "tool", n=n_single), base)
    if "pin" in peers:
        def pin_jac():
            return pin.computeFrameJacobian(pm, pd, q, fid, pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(pin_jac(), puma.jacobian(q), atol=1e-12)
        row("Pinocchio computeFrameJacobian", per_call_ns(pin_jac, n=n_single), base)
    if "rtb" in peers:
        np.testing.assert_allclose(ets.jacob0(q), puma.jacobian(q), atol=1e-12)
        row("Robotics Toolbox ets.jacob0 (C++)", per_call_ns(ets.jacob0, q, n=n_single), base)

    print(f"\nhumanoid17 FK, all {len(hum.frame_names)} frames, one call")
    base = per_call_ns(numpy_tree_fk_all, hum, qh, n=n_single // 20)
    row("NumPy tree product (baseline)", base, base)
    row("hil  model.fk_frames(q)", per_call_ns(hum.fk_frames, qh, n=n_single), base)
    row("hil  model.com(q)", per_call_ns(hum.com, qh, n=n_single), base)
    if "pin" in peers:
        hm, hfids = pinocchio_model(hum)
        hd = hm.createData()

        def pin_all():
            pin.framesForwardKinematics(hm, hd, qh)
        pin_all()
        np.testing.assert_allclose(hd.oMf[hfids["l_sole"]].homogeneous, hum.fk_frame(qh, "l_sole"), atol=1e-12)
        row("Pinocchio framesForwardKinematics", per_call_ns(pin_all, n=n_single), base)

    print(f"\nPUMA 560 batched FK, {n_batch} configurations, ns per configuration")
    base = min(timeit.repeat(lambda: numpy_dh_fk_batch(dh, Q), number=1, repeat=3)) * 1e9 / n_batch
    ref = numpy_dh_fk_batch(dh, Q)
    row("NumPy vectorised (baseline)", base, base)
    out = puma.fk_batch(Q)
    np.testing.assert_allclose(out, ref, atol=1e-12)
    best = min(timeit.repeat(lambda: puma.fk_batch(Q), number=1, repeat=7)) * 1e9 / n_batch
    row("hil  model.fk_batch(Q) (one core)", best, base)
    if "pin" in peers:
        Qs = Q[: n_batch // 10]

        def pin_loop():
            for qq in Qs:
                pin.forwardKinematics(pm, pd, qq)
        t0 = time.perf_counter_ns()
        pin_loop()
        row("Pinocchio, Python loop", (time.perf_counter_ns() - t0) / len(Qs), base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
