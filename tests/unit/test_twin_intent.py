"""The twin's decisions without a window (twin/intent.py): what a drag, a Cartesian target, Send
and the safety flags do, and what they say."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil import robots
from hil.safety import COLLISION
from twin.intent import JOG_EVERY_S, TwinIntent

PUMA = robots.load("puma560")


class Recorder:
    """The loop client's requests, as a loop answers them (the live twin tests attach a real loop)."""

    def __init__(self, answer: str = "jog: ramping there") -> None:
        self.calls: list[tuple[str, object]] = []
        self.answer = answer

    def jog(self, q):
        self.calls.append(("jog", np.array(q)))
        return self.answer

    def estop(self):
        self.calls.append(("estop", None))
        return "ESTOP sent (the loop's answer)"


def _colliding_drag(model):
    """(joint, pixels, pose) of a drag from home that ends at the end of the joint's range, in a
    self-collision."""
    checker = TwinIntent(model).checker
    for j in range(model.n):
        for end in (model.lower[j], model.upper[j]):
            q = model.home.copy()
            q[j] = end
            if checker.check(q).flags & COLLISION:
                return j, (end - model.home[j]) / math.radians(0.5) * 1.5, q   # past the end: kept at it
    raise AssertionError(f"no single joint of {model.name} reaches a self-collision")


def test_a_dragged_joint_stays_inside_its_range_and_only_previews():
    intent = TwinIntent(PUMA, Recorder())
    j = PUMA.joint_index("elbow")
    intent.start_drag(j, PUMA.home)
    said = intent.drag(1e6)                                   # far past the end of its range
    assert intent.preview_q[j] == PUMA.upper[j]
    assert np.array_equal(np.delete(intent.preview_q, j), np.delete(PUMA.home, j))
    assert "elbow" in said.panel and "Send" in said.panel and "elbow" in said.event
    assert intent.client.calls == []                          # a drag moves nothing


def test_a_drag_into_a_self_collision_is_dropped_with_the_checks_reason():
    model = robots.load("humanoid17")
    j, px, _ = _colliding_drag(model)
    intent = TwinIntent(model, Recorder())
    intent.start_drag(j, model.home)
    intent.drag(px)
    said = intent.release()
    assert intent.preview_q is None and intent.drag_joint is None
    assert "will not be sent" in said.panel and "collision" in said.panel, said.panel
    assert intent.send().panel == "preview a reachable, safe target first"
    assert intent.client.calls == []


def test_a_safe_drag_kept_after_release_is_sent_once_on_send():
    intent = TwinIntent(PUMA, Recorder())
    intent.start_drag(PUMA.joint_index("shoulder"), PUMA.home)
    intent.drag(10)
    assert intent.release().panel is None and intent.preview_q is not None
    said = intent.send()
    assert "ramps there" in said.panel
    (what, q), = intent.client.calls
    assert what == "jog" and np.array_equal(q, intent.preview_q)


def test_a_refused_send_says_the_loops_words():
    intent = TwinIntent(PUMA, Recorder(answer="jog refused: the board is in ESTOP"))
    intent.start_drag(0, PUMA.home)
    intent.drag(4)
    intent.release()
    said = intent.send()
    assert said.panel == said.event == "jog refused: the board is in ESTOP"


def test_a_cartesian_target_is_previewed_when_reached_and_said_out_of_reach_when_not():
    intent = TwinIntent(PUMA)
    q = PUMA.home.copy()
    q[1] += 0.3
    T = PUMA.fk(q)
    said = intent.preview_target(PUMA.tool_frame, T, PUMA.home)
    assert said.panel.startswith("IK ok") and np.allclose(PUMA.fk(intent.preview_q), T, atol=1e-6)
    far = T.copy()
    far[:3, 3] = [10.0, 0.0, 0.0]
    said = intent.preview_target(PUMA.tool_frame, far, PUMA.home)
    assert said.panel.startswith("out of reach") and intent.preview_q is None
    assert intent.send().panel == "preview a reachable, safe target first"


def test_without_a_loop_nothing_is_sent_and_it_says_so():
    intent = TwinIntent(PUMA)
    intent.start_drag(0, PUMA.home)
    intent.drag(4)
    assert intent.send().panel == "no loop attached"
    assert "no loop attached" in intent.post("enable")
    assert intent.estop() == "E-STOP sent" and intent.estop_sent == 1
    assert intent.jog_sliders(PUMA.home, 100.0) is None


def test_sliders_jog_the_loop_at_a_bounded_rate_and_estop_says_the_loops_answer():
    intent = TwinIntent(PUMA, Recorder())
    for k in range(12):
        intent.jog_sliders(PUMA.home, 100.0 + k * JOG_EVERY_S / 4)   # twelve moves in three periods
    assert [c[0] for c in intent.client.calls] == ["jog"] * 3
    assert intent.estop() == "ESTOP sent (the loop's answer)" and intent.estop_sent == 1


def test_the_links_in_a_self_collision_are_flagged_with_the_reason():
    model = robots.load("humanoid17")
    _, _, q = _colliding_drag(model)
    alone = TwinIntent(model).flagged(q, None, 0)             # no loop: this side's checks judge the pose
    assert len(alone.links) == 2 and alone.reason.startswith("safety: ")
    assert TwinIntent(model).flagged(model.home, None, 0).links == set()
    attached = TwinIntent(model, Recorder())                  # a loop: its flags, on its target
    assert attached.flagged(q, None, 0).links == set()
    flagged = attached.flagged(model.home, q, COLLISION)
    assert flagged.links == alone.links and "safety: " in flagged.reason


@pytest.mark.parametrize("what", ["enable", "disable"])
def test_a_request_by_name_goes_to_the_loop(what):
    class Loop(Recorder):
        def enable(self):
            return ""

        def disable(self):
            return "disable: ACTIVE → DISABLED"
    intent = TwinIntent(PUMA, Loop())
    assert intent.post(what) == {"enable": "enable requested", "disable": "disable: ACTIVE → DISABLED"}[what]
