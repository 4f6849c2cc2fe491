"""The centre of mass a ZMP reference asks for: preview control of the cart-table model (Kajita et
al. 2003; paper 000), the walk's balance in the sagittal and lateral planes. Units SI."""

from __future__ import annotations

import functools

import numpy as np


G = 9.81


@functools.lru_cache(maxsize=32)
def preview_gains(dt: float, zc: float, horizon: int, q_e: float = 1.0, r: float = 1e-6):
    """Kajita's preview controller for the cart-table model (jerk input): (A, B, C, Gi, Gx, Gd),
    read-only. Kept per arguments: a walk asks for the same gains for each standing lead it
    tries and again when it is planned slower (a Riccati iteration in Python, 10 ms each)."""
    A = np.array([[1, dt, dt * dt / 2], [0, 1, dt], [0, 0, 1.0]])
    B = np.array([[dt ** 3 / 6], [dt * dt / 2], [dt]])
    C = np.array([[1, 0, -zc / G]])
    At = np.zeros((4, 4))
    At[0, 0] = 1
    At[0, 1:] = (C @ A)[0]
    At[1:, 1:] = A
    Bt = np.vstack([C @ B, B])
    Qt = np.zeros((4, 4))
    Qt[0, 0] = q_e
    P = Qt.copy()
    for _ in range(5000):  # discrete Riccati equation by iteration
        S = r + (Bt.T @ P @ Bt)[0, 0]
        Pn = Qt + At.T @ P @ At - (At.T @ P @ Bt) @ (Bt.T @ P @ At) / S
        if np.abs(Pn - P).max() < 1e-12 * max(1.0, np.abs(P).max()):
            P = Pn
            break
        P = Pn
    S = r + (Bt.T @ P @ Bt)[0, 0]
    K = (Bt.T @ P @ At) / S
    Gi, Gx = K[0, 0], K[0, 1:]
    Ac = At - Bt @ K
    It = np.array([[1.0], [0], [0], [0]])
    X = -Ac.T @ P @ It
    Gd = np.zeros(horizon)
    Gd[0] = -Gi
    for j in range(1, horizon):
        Gd[j] = ((Bt.T @ X) / S)[0, 0]
        X = Ac.T @ X
    for a in (A, B, C, Gx, Gd):
        a.setflags(write=False)
    return A, B, C, Gi, Gx, Gd


def preview_com(zmp_ref: np.ndarray, dt: float, zc: float, c0: np.ndarray, preview_s: float = 1.6) -> np.ndarray:
    """COM xy (N, 2) whose cart-table ZMP tracks zmp_ref (N, 2), by preview control."""
    N = len(zmp_ref)
    H = int(preview_s / dt)
    A, B, C, Gi, Gx, Gd = preview_gains(dt, zc, H)
    ref = np.vstack([zmp_ref, np.repeat(zmp_ref[-1:], H, axis=0)])
    out = np.zeros((N, 2))
    # the cart-table state (position, speed, acceleration) steps in scalars: the same sums as the
    # matrices' (A x + B u, C x), a tenth of the time of 3-vectors in NumPy sample by sample
    (a01, a02), a12 = A[0, 1:], A[1, 2]
    b0, b1, b2 = B[:, 0]
    c2 = C[0, 2]
    g0, g1, g2 = Gx
    for d in range(2):
        ahead = np.correlate(ref[1:, d], Gd, mode="valid")[:N]   # the preview term, Gd · ref[k+1 … k+H]
        r = ref[:N, d].tolist()
        x0, x1, x2 = float(c0[d]), 0.0, 0.0
        e_sum = 0.0
        col = [0.0] * N
        for k, f in enumerate(ahead.tolist()):
            e_sum += x0 + c2 * x2 - r[k]
            u = -Gi * e_sum - (g0 * x0 + g1 * x1 + g2 * x2) - f
            col[k] = x0
            x0, x1, x2 = x0 + a01 * x1 + a02 * x2 + b0 * u, x1 + a12 * x2 + b1 * u, x2 + b2 * u
        out[:, d] = col
    return out
