"""Robot models and kinematics kernels, checked against independent math.

The reference FK here is a plain-NumPy product of the papers' matrices, written from
ROBOTS.md (DH table in mm; the humanoid leg matrices as functions of theta), never
through the model's joint table or the kernels.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import ConfigError, InputError

S = np.diag([1.0, -1.0, 1.0, 1.0])


# ---------------------------------------------------------------- independent references
def dh_standard(theta, d, a, alpha):
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[ct, -st * ca, st * sa, a * ct],
                     [st, ct * ca, -ct * sa, a * st],
                     [0, sa, ca, d],
                     [0, 0, 0, 1.0]])


# ROBOTS.md §1, lengths in mm
PUMA_A_MM = [0, 500, 20, 0, 0, 0]
PUMA_D_MM = [0, 150, 0, 500, 0, 0]
PUMA_ALPHA_DEG = [-90, 0, 90, -90, 90, 0]
PUMA_RANGE_DEG = [(-160, 160), (-225, 45), (-45, 225), (-110, 170), (-100, 100), (-266, 266)]


def puma_fk_reference(q):
    T = np.eye(4)
    for i in range(6):
        T = T @ dh_standard(q[i], PUMA_D_MM[i] / 1000.0, PUMA_A_MM[i] / 1000.0, math.radians(PUMA_ALPHA_DEG[i]))
    return T


def _m(rows, scale=0.1):
    T = np.eye(4)
    T[:3, :] = np.array(rows, dtype=float)
    T[:3, 3] *= scale
    return T


def left_leg_reference(t):
    """body_T_foot of the paper's left leg (ROBOTS.md §2), metres at 1 unit = 0.1 m."""
    c = np.cos(t)
    s = np.sin(t)
    return (_m([[0, 0, 1, 0.281], [c[0], -s[0], 0, 0.240], [s[0], c[0], 0, -0.696]])
            @ _m([[0, 0, -1, 0.060], [-s[1], -c[1], 0, -0.480], [-c[1], s[1], 0, -0.261]])
            @ _m([[s[2], c[2], 0, -0.200], [c[2], -s[2], 0, 0.410], [0, 0, -1, 0]])
            @ _m([[0, c[3], -s[3], 0.615], [0, s[3], c[3], 0], [1, 0, 0, 0.292]])
            @ _m([[c[4], -s[4], 0, -0.351], [-s[4], -c[4], 0, 0.480], [0, 0, -1, -0.031]]))


def random_q(model, rng, k):
    return rng.uniform(model.lower, model.upper, size=(k, model.n))


@pytest.fixture(scope="module")
def puma():
    return robots.load("puma560")


@pytest.fixture(scope="module")
def humanoid():
    return robots.load("humanoid17")


# ------------------------------------------------------------------------------ PUMA
def test_puma_fk_matches_dh_product(puma):
    rng = np.random.default_rng(1)
    for q in random_q(puma, rng, 500):
        np.testing.assert_allclose(puma.fk(q), puma_fk_reference(q), atol=1e-12)


def test_puma_fk_poses_stay_independent_across_calls(puma):
    # fk hands out views of blocks of poses allocated together: poses kept from many calls (past
    # several block boundaries, and through failed calls) must each keep their own value
    rng = np.random.default_rng(2)
    Q = random_q(puma, rng, 200)
    kept = []
    for k, q in enumerate(Q):
        kept.append(puma.fk(q))
        if k % 37 == 0:
            with pytest.raises(InputError):
                puma.fk(np.full(puma.n, np.nan))
    kept[5][:] = 0.0  # writing into one pose must not touch the others
    for k, (q, T) in enumerate(zip(Q, kept)):
        if k != 5:
            np.testing.assert_allclose(T, puma_fk_reference(q), atol=1e-12)
    assert not any(np.shares_memory(kept[0], T) for T in kept[1:])


def test_jacobian_and_com_from_two_threads(humanoid):
    # jacobian() and com() share one scratch array per model, which is safe only while their kernels
    # keep the GIL: two threads calling them at once must still get each its own answers
    import threading

    rng = np.random.default_rng(3)
    Q = [random_q(humanoid, rng, 300) for _ in range(2)]
    expected = [[(humanoid.jacobian(q, "l_sole"), humanoid.com(q)) for q in Qk] for Qk in Q]
    got = [[], []]

    def work(k):
        for q in Q[k]:
            got[k].append((humanoid.jacobian(q, "l_sole"), humanoid.com(q)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        for (J, c), (J_ref, c_ref) in zip(got[k], expected[k]):
            np.testing.assert_array_equal(J, J_ref)
            np.testing.assert_array_equal(c, c_ref)


def test_a_data_of_its_own_writes_only_its_own_scratch_and_the_model_loads_no_kernel(humanoid):
    rng = np.random.default_rng(5)
    mine, other = humanoid.create_data(), humanoid.create_data()
    assert mine.frames is not other.frames
    for q in random_q(humanoid, rng, 20):
        np.testing.assert_array_equal(mine.jacobian(q, "l_sole"), humanoid.jacobian(q, "l_sole"))
        np.testing.assert_array_equal(mine.com(q), humanoid.com(q))
        np.testing.assert_array_equal(mine.fk(q), humanoid.fk(q))
        before = other.frames.copy()
        mine.jacobian(q, "r_sole")
        np.testing.assert_array_equal(other.frames, before)   # another user's scratch is not written
    # a model sent to another process (pickled) makes its own calls there, used or not
    import pickle
    sent = pickle.loads(pickle.dumps(humanoid))
    np.testing.assert_array_equal(sent.jacobian(q, "l_sole"), humanoid.jacobian(q, "l_sole"))
    # a process that only reads a model's tables never loads the compiled kernels
    code = ("import hil.robots as r, hil.robots.model as m; x = r.load('humanoid17'); x.lower; x.create_data(); "
            "print(m._ENTRIES is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True", out.stdout + out.stderr


def test_puma_home_is_stretched_horizontally(puma):
    T = puma.fk(puma.poses["home"])
    # the paper's home pose: arm out along +y, wrist centre a2 + d4 from the shoulder axis
    assert T[2, 3] == pytest.approx(-0.02, abs=1e-12)
    assert T[1, 3] == pytest.approx(1.0, abs=1e-12)


def test_puma_limits_and_pedestal_loaded(puma):
    np.testing.assert_allclose(np.degrees(puma.lower), [r[0] for r in PUMA_RANGE_DEG], atol=1e-12)
    np.testing.assert_allclose(np.degrees(puma.upper), [r[1] for r in PUMA_RANGE_DEG], atol=1e-12)
    np.testing.assert_allclose(np.degrees(puma.home), [90, 0, 90, 0, 0, 0], atol=1e-12)
    assert puma.meta["floor_z_m"] == pytest.approx(-0.72)


def test_puma_tool_offset_is_separate(puma):
    rng = np.random.default_rng(2)
    offset = np.eye(4)
    offset[:3, 3] = [0.01, -0.02, 0.15]
    tooled = puma.with_tool(offset)
    for q in random_q(puma, rng, 20):
        np.testing.assert_allclose(tooled.fk(q), puma_fk_reference(q) @ offset, atol=1e-12)
        np.testing.assert_allclose(tooled.fk_frame(q, "wrist"), puma_fk_reference(q), atol=1e-12)
    np.testing.assert_allclose(puma.fk(puma.home), puma_fk_reference(puma.home), atol=1e-12)


# -------------------------------------------------------------------------- humanoid
def test_humanoid_left_leg_matches_paper(humanoid):
    rng = np.random.default_rng(3)
    idx = [humanoid.joint_index(n) for n in ("l_hip_roll", "l_hip_pitch", "l_knee", "l_ankle_pitch", "l_ankle_roll")]
    for q in random_q(humanoid, rng, 300):
        np.testing.assert_allclose(humanoid.fk_frame(q, "l_foot"), left_leg_reference(q[idx]), atol=1e-12)


def test_humanoid_right_leg_is_mirror_of_left(humanoid):
    rng = np.random.default_rng(4)
    left = [humanoid.joint_index("l_" + n) for n in ("hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll")]
    right = [humanoid.joint_index("r_" + n) for n in ("hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll")]
    for q in random_q(humanoid, rng, 200):
        q[right] = q[left]
        for a, b in (("l_foot", "r_foot"), ("l_sole", "r_sole"), ("l_hand", "r_hand")):
            if a == "l_hand":
                q[[humanoid.joint_index("r_" + n) for n in ("shoulder_pitch", "shoulder_roll", "elbow")]] = \
                    q[[humanoid.joint_index("l_" + n) for n in ("shoulder_pitch", "shoulder_roll", "elbow")]]
            np.testing.assert_allclose(humanoid.fk_frame(q, b), S @ humanoid.fk_frame(q, a) @ S, atol=1e-12)


def test_humanoid_joint_axes_at_zero(humanoid):
    # ROBOTS.md §2: hip roll x, hip pitch -y, knee y, ankle pitch y, ankle roll x (body frame)
    J = humanoid.jacobian(np.zeros(humanoid.n), "l_foot")
    expected = {"l_hip_roll": [1, 0, 0], "l_hip_pitch": [0, -1, 0], "l_knee": [0, 1, 0],
                "l_ankle_pitch": [0, 1, 0], "l_ankle_roll": [1, 0, 0]}
    for name, axis in expected.items():
        np.testing.assert_allclose(J[3:, humanoid.joint_index(name)], axis, atol=1e-12)
    np.testing.assert_allclose(humanoid.fk_frame(np.zeros(humanoid.n), "l_foot")[:3, 3],
                               [0.0251, 0.0241, -0.2681], atol=1e-12)


def test_humanoid_home_stands_flat(humanoid):
    for side in ("l_sole", "r_sole"):
        T = humanoid.fk_frame(humanoid.home, side)
        np.testing.assert_allclose(T[:3, :3], np.eye(3), atol=1e-3)
    com = humanoid.com(humanoid.home)
    soles = [humanoid.fk_frame(humanoid.home, s)[:3, 3] for s in ("l_sole", "r_sole")]
    assert abs(com[0] - soles[0][0]) < 0.005 and abs(com[1]) < 1e-12


def test_humanoid_masses_plausible(humanoid):
    assert 1.5 <= humanoid.total_mass <= 2.0
    assert humanoid.meta["scale_m_per_unit"] == 0.1
    for f in ("body", "l_sole", "r_sole", "l_hand", "r_hand", "head"):
        humanoid.frame_index(f)


# ------------------------------------------------------------------ both robots
@pytest.mark.parametrize("name", ["puma560", "humanoid17"])
def test_all_rotations_proper_and_orthonormal(name):
    m = robots.load(name)
    rng = np.random.default_rng(5)
    for q in random_q(m, rng, 100):
        F = m.fk_frames(q)
        R = F[:, :3, :3]
        np.testing.assert_allclose(R @ np.transpose(R, (0, 2, 1)), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)
        np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)
        np.testing.assert_array_equal(F[:, 3, :], np.broadcast_to([0, 0, 0, 1.0], (F.shape[0], 4)))


@pytest.mark.parametrize("name", ["puma560", "humanoid17"])
def test_fk_frames_consistent_with_single_frame(name):
    m = robots.load(name)
    q = random_q(m, np.random.default_rng(6), 1)[0]
    F = m.fk_frames(q)
    for i, f in enumerate(m.frame_names):
        np.testing.assert_allclose(m.fk_frame(q, f), F[i], atol=1e-13)


def _rot_log(R):
    """Rotation vector of R (angle-axis), independent of the kernels."""
    c = (np.trace(R) - 1.0) / 2.0
    angle = math.acos(max(-1.0, min(1.0, c)))
    if angle < 1e-12:
        return np.zeros(3)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w * angle / (2 * math.sin(angle))


@pytest.mark.parametrize("name,frames", [("puma560", ["tool", "link3"]),
                                         ("humanoid17", ["l_sole", "r_hand", "head_camera", "r_foot"])])
def test_jacobian_matches_finite_differences(name, frames):
    m = robots.load(name)
    rng = np.random.default_rng(7)
    h = 1e-6
    for q in random_q(m, rng, 10):
        for f in frames:
            J = m.jacobian(q, f)
            T0 = m.fk_frame(q, f)
            num = np.zeros_like(J)
            for k in range(m.n):
                dq = np.zeros(m.n)
                dq[k] = h
                Tp, Tm = m.fk_frame(q + dq, f), m.fk_frame(q - dq, f)
                num[:3, k] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
                num[3:, k] = (_rot_log(Tp[:3, :3] @ T0[:3, :3].T) - _rot_log(Tm[:3, :3] @ T0[:3, :3].T)) / (2 * h)
            np.testing.assert_allclose(J, num, atol=1e-7)


def test_puma_jacobian_default_is_tool(puma):
    q = puma.poses["rest"]
    np.testing.assert_allclose(puma.jacobian(q), puma.jacobian(q, "tool"))


def test_com_against_hand_computation_at_zero(humanoid):
    # the data file gives each centre of mass in the body frame at q = 0: the COM at q = 0 is
    # their mass-weighted mean, computed here straight from the file (mirrored ones: y -> -y)
    data = tomllib.loads(robots.DATA_DIR.joinpath("humanoid17.toml").read_text())
    total, acc = 0.0, np.zeros(3)
    for e in data["mass"]:
        c = np.array(e["com"]) * 0.1
        total += e["mass_kg"]
        acc += e["mass_kg"] * c
        if e.get("mirror"):
            total += e["mass_kg"]
            acc += e["mass_kg"] * c * [1, -1, 1]
    np.testing.assert_allclose(humanoid.com(np.zeros(humanoid.n)), acc / total, atol=1e-12)
    assert humanoid.total_mass == pytest.approx(total)


def test_puma_com_against_dh_reference(puma):
    rng = np.random.default_rng(8)
    # link masses and centres of mass as in the data file (Armstrong, Khatib & Burdick's; link i
    # frame = DH frame i-1 @ Rz(q_i))
    coms = {2: (17.4, [0.068, 0.006, 0.2275]), 3: (4.8, [0, -0.070, 0.014]), 4: (0.82, [0, 0, 0.481]),
            5: (0.34, [0, 0, 0]), 6: (0.09, [0, 0, 0.032])}
    for q in random_q(puma, rng, 20):
        frames = [np.eye(4)]
        for i in range(6):
            frames.append(frames[-1] @ dh_standard(q[i], PUMA_D_MM[i] / 1e3, PUMA_A_MM[i] / 1e3,
                                                   math.radians(PUMA_ALPHA_DEG[i])))
        total, acc = 0.0, np.zeros(3)
        for link, (mass, c) in coms.items():
            ct, st = math.cos(q[link - 1]), math.sin(q[link - 1])
            Rz = np.array([[ct, -st, 0, 0], [st, ct, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
            p = (frames[link - 1] @ Rz @ np.append(c, 1.0))[:3]
            total += mass
            acc += mass * p
        np.testing.assert_allclose(puma.com(q), acc / total, atol=1e-12)


@pytest.mark.parametrize("name", ["puma560", "humanoid17"])
def test_com_jacobian_matches_finite_differences(name):
    m = robots.load(name)
    rng = np.random.default_rng(9)
    h = 1e-6
    for q in random_q(m, rng, 5):
        Jc = m.com_jacobian(q)
        num = np.zeros_like(Jc)
        for k in range(m.n):
            dq = np.zeros(m.n)
            dq[k] = h
            num[:, k] = (m.com(q + dq) - m.com(q - dq)) / (2 * h)
        np.testing.assert_allclose(Jc, num, atol=1e-8)


@pytest.mark.parametrize("name", ["puma560", "humanoid17"])
def test_fk_batch_equals_single_calls(name):
    m = robots.load(name)
    Q = random_q(m, np.random.default_rng(10), 257)
    out = m.fk_batch(Q)
    assert out.shape == (257, 4, 4)
    for k in range(0, 257, 16):
        np.testing.assert_allclose(out[k], m.fk(Q[k]), atol=1e-14)
    np.testing.assert_allclose(m.fk_batch(Q[:, :])[-1], m.fk(Q[-1]), atol=1e-14)


def test_kernels_compose_inside_other_kernels(puma):
    # the kernels are plain njit functions: a user's own kernel can call them
    from numba import njit

    from hil.kinematics import kernels as K

    @njit
    def tool_height(Q, kin, f):
        out = np.empty((4, 4))
        h = np.empty(Q.shape[0])
        for k in range(Q.shape[0]):
            K.fk_frame_into(Q[k], kin, f, out)
            h[k] = out[2, 3]
        return h

    Q = random_q(puma, np.random.default_rng(11), 10)
    kin, _ = puma.tables
    h = tool_height(Q, kin, puma.frame_index("tool"))
    np.testing.assert_allclose(h, [puma_fk_reference(q)[2, 3] for q in Q], atol=1e-12)


def _rodrigues(axis, angle):
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    K_ = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    R = np.eye(4)
    R[:3, :3] = np.eye(3) + math.sin(angle) * K_ + (1 - math.cos(angle)) * K_ @ K_
    return R


def test_every_axis_kind_against_rodrigues(tmp_path):
    # the kernels take shortcuts for joints about ±x, ±y, ±z; a chain with each kind and a
    # tilted axis, checked against a plain Rodrigues product
    axes = [[0, 0, 1], [0, -1, 0], [1, 0, 0], [0, 0, -1], [0, 1, 0], [-1, 0, 0], [1, 2, 2]]
    c, s_ = math.cos(0.3), math.sin(0.3)
    placement = np.array([[c, -s_, 0, 0.1], [s_ * 0.6, c * 0.6, -0.8, 0.02], [s_ * 0.8, c * 0.8, 0.6, -0.05]])
    text = '[robot]\nname = "axes"\ntool_frame = "tip"\n'
    parent = "base"
    for i, ax in enumerate(axes):
        text += (f'[[joint]]\nname = "j{i}"\nparent = "{parent}"\nplacement = {placement.tolist()}\n'
                 f'axis = {ax}\nlower_deg = -170\nupper_deg = 170\nvelocity_deg_s = 90\n'
                 'acceleration_deg_s2 = 900\n')
        parent = f"j{i}"
    text += f'[[frame]]\nname = "tip"\nlink = "{parent}"\ntranslation = [0.1, 0.2, 0.3]\n'
    text += f'[[mass]]\nlink = "{parent}"\nmass_kg = 1.0\ncom = [0.0, 0.0, 0.0]\n'
    p = tmp_path / "axes.toml"
    p.write_text(text)
    model = robots.load(str(p))
    A = np.eye(4)
    A[:3, :] = placement
    tip = np.eye(4)
    tip[:3, 3] = [0.1, 0.2, 0.3]
    Q = random_q(model, np.random.default_rng(12), 50)
    for q in Q:
        T = np.eye(4)
        links = []
        for ax, qi in zip(axes, q):
            T = T @ A @ _rodrigues(ax, qi)
            links.append(T)
        np.testing.assert_allclose(model.fk(q), T @ tip, atol=1e-12)
        frames = model.fk_frames(q)
        for i in range(len(axes)):
            np.testing.assert_allclose(frames[model.frame_index(f"j{i}")], links[i], atol=1e-12)
    np.testing.assert_allclose(model.fk_batch(Q), [model.fk(q) for q in Q], atol=1e-12)


@pytest.mark.parametrize("name", ["puma560", "humanoid17"])
def test_strided_q_gives_the_same_answers(name):
    # a column of a trajectory array is a strided view; the compiled entries must not assume
    # a contiguous vector
    model = robots.load(name)
    Q2 = np.zeros((model.n, 3))
    Q2[:, 0] = random_q(model, np.random.default_rng(13), 1)[0]
    Q2[:, 1:] = 99.0
    q = Q2[:, 0]
    assert not q.flags.c_contiguous
    qc = q.copy()
    for method in ("fk", "fk_frames", "jacobian", "com", "com_jacobian"):
        np.testing.assert_array_equal(getattr(model, method)(q), getattr(model, method)(qc), err_msg=method)


# ------------------------------------------------------------------------- bad input
def test_bad_inputs_name_the_value(puma, humanoid):
    with pytest.raises(InputError, match=r"shape \(6,\).*got shape \(5,\)"):
        puma.fk(np.zeros(5))
    q = np.zeros(6)
    q[2] = np.nan
    with pytest.raises(InputError, match=r"q\[2\] \(elbow\) is nan"):
        puma.fk(q)
    q[2] = np.inf
    with pytest.raises(InputError, match=r"q\[2\] \(elbow\) is inf"):
        puma.jacobian(q)
    with pytest.raises(InputError, match="unknown frame 'nose'"):
        humanoid.jacobian(np.zeros(17), "nose")
    with pytest.raises(InputError, match=r"q\[3\] \(l_ankle_pitch\) is nan"):
        humanoid.com(np.where(np.arange(17) == 3, np.nan, 0.0))
    with pytest.raises(InputError, match=r"Q\[1, 0\] \(waist\) is nan"):
        puma.fk_batch([[0.0] * 6, [np.nan] + [0.0] * 5])
    with pytest.raises(InputError, match=r"shape \(N, 6\)"):
        puma.fk_batch(np.zeros((3, 5)))
    with pytest.raises(InputError, match="q must"):
        puma.fk("not numbers")
    with pytest.raises(ConfigError, match="unknown robot 'puma600'.*shipped robots: humanoid17, koch, puma560, so100, so101"):
        robots.load("puma600")


def test_bad_data_file_is_rejected(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[robot]\nname = "x"\ntool_frame = "t"\n[[joint]]\nname = "j"\nparent = "base"\n'
                 'placement = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, -1, 0]]\naxis = [0, 0, 1]\n'
                 'lower_deg = -10\nupper_deg = 10\nvelocity_deg_s = 1\nacceleration_deg_s2 = 1\n')
    with pytest.raises(ConfigError, match="joint 'j'.*not a proper rotation"):
        robots.load(str(p))
    p.write_text("[robot\nname=")
    with pytest.raises(ConfigError, match="bad.toml"):
        robots.load(str(p))
    # a length past 10 km is a unit mistake, not a robot: in a placement, a frame's translation, a DH length
    puma = (Path(robots.__file__).parent / "data" / "puma560.toml").read_text()
    assert "a_m = [0.0, 0.5," in puma
    p.write_text(puma.replace("a_m = [0.0, 0.5,", "a_m = [0.0, 500e3,"))
    with pytest.raises(ConfigError, match=r"\.a_m: 500000 m is past 10000 m: a unit mistake"):
        robots.load(str(p))
    p.write_text('[robot]\nname = "x"\ntool_frame = "t"\n[[joint]]\nname = "j"\nparent = "base"\n'
                 'placement = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1e20]]\naxis = [0, 0, 1]\n'
                 'lower_deg = -10\nupper_deg = 10\nvelocity_deg_s = 1\nacceleration_deg_s2 = 1\n')
    with pytest.raises(ConfigError, match="joint 'j'.*past 10000 m"):
        robots.load(str(p))


def test_inline_sincos_matches_the_math_library():
    """The kernels' own sin/cos (Cody–Waite reduction + series) against libm, over joint-sized and
    large angles, quadrant edges and zeros; beyond 1e5 rad it hands over to libm. Compiled with
    the kernels' own options (fused multiply-add on), so the check covers the code they run."""
    from hil._jit import kernel
    from hil.kinematics.kernels import _sincos

    @kernel(cache=False)
    def both(x, s, c):
        for i in range(x.shape[0]):
            s[i], c[i] = _sincos(x[i])

    rng = np.random.default_rng(7)
    edges = [k * math.pi / 4 + d for k in range(-16, 17) for d in (-1e-12, 0.0, 1e-12)]
    x = np.concatenate([rng.uniform(-4.0, 4.0, 20000), rng.uniform(-1e4, 1e4, 5000),
                        rng.uniform(-1e7, 1e7, 100), edges, [0.0, -0.0, 1e-300, -5e-324]])
    s = np.empty_like(x)
    c = np.empty_like(x)
    both(x, s, c)
    ref_s = np.array([math.sin(v) for v in x])
    ref_c = np.array([math.cos(v) for v in x])
    assert np.max(np.abs(s - ref_s)) <= 4.5e-16
    assert np.max(np.abs(c - ref_c)) <= 4.5e-16


def test_the_entry_points_types_are_numbas_own():
    """`entry_point` types arrays itself (Numba's `typeof` would import numpy.ma): for every layout,
    dtype and write flag a kernel meets, the type is the one Numba's dispatcher would pick, and the
    entry it compiles is the dispatcher's own (the same compiled function, called directly)."""
    import numba

    from hil._jit import entry_point, kernel, numba_type

    a = np.arange(24.0).reshape(4, 6)
    frozen = a.copy()
    frozen.flags.writeable = False
    for value in (a, np.asfortranarray(a), a[:, ::2], a[0], frozen, np.zeros(3, np.int32), np.zeros((2, 2), np.bool_),
                  1.5, 3, (a, 2.0)):
        assert numba_type(value) == numba.typeof(value), value

    @kernel(cache=False)
    def total(x, k):
        return x.sum() * k

    entry = entry_point(total, a[:, ::2], 2.0)
    assert entry is not total and entry(a[:, ::2], 2.0) == 2.0 * a[:, ::2].sum()
    assert list(total.overloads) == [(numba.typeof(a[:, ::2]), numba.float64)]


def test_a_robot_declares_its_kind_and_board_and_a_humanoid_has_soles(tmp_path):
    import hil.robots as R
    from hil.errors import ConfigError

    assert (R.load("humanoid17").kind, R.load("humanoid17").board) == ("humanoid", "humanoid17")
    assert (R.load("puma560").kind, R.load("puma560").board) == ("arm", "puma6")
    text = (R.DATA_DIR / "humanoid17.toml").read_text()
    crab = tmp_path / "crab.toml"
    crab.write_text(text.replace('kind = "humanoid"', 'kind = "crab"', 1))
    with pytest.raises(ConfigError, match="kinds are 'arm' and 'humanoid'"):
        R.load(str(crab))
    soleless = tmp_path / "soleless.toml"
    soleless.write_text(text.replace('"l_sole"', '"l_toe"').replace('"r_sole"', '"r_toe"'))
    with pytest.raises(ConfigError, match="needs frames named l_sole and r_sole"):
        R.load(str(soleless))
