"""The Zenoh bridge between two Zenoh sessions on localhost (peer mode, no router): a run's state
reaches a remote client decimated to the rate asked, a remote request is refused by a read-only
bridge, an e-stop is accepted, a remote twin draws the remote robot, and the bridge ends with the
run. `hil run --zenoh-control` without access control or TLS is refused before anything starts."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from hil import robots
from hil.errors import HilError
from tests.conftest import loop_slot, wait_for
from tests.gui.png import read_png
from tests.integration.test_runtime import attach, finish

pytest.importorskip("zenoh")
pytestmark = pytest.mark.slow
from tests.launch import HIL, command_pid  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
RATE = 40


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(tmp_path, name: str, **endpoints) -> str:
    """A Zenoh config: peer mode, no multicast scouting (the test's two sessions only)."""
    parts = [f'{k}: {{ endpoints: ["{v}"] }}' for k, v in endpoints.items()]
    path = tmp_path / name
    path.write_text('{ mode: "peer", scouting: { multicast: { enabled: false } }, ' + ", ".join(parts) + " }")
    return str(path)



def test_sessions_go_without_zenoh_s_shared_memory_unless_a_config_names_it(tmp_path):
    """Its segment files in /dev/shm outlive a process killed outright: hil's sessions open without
    it, with Zenoh's defaults and with a config file that does not name it."""
    import json

    from hil.remote.session import load_config

    def shm(config) -> bool:
        return json.loads(config.get_json("transport/shared_memory/enabled"))

    named = tmp_path / "shm.json5"
    named.write_text("{ transport: { shared_memory: { enabled: true } } }")
    assert not shm(load_config(None)) and not shm(load_config(config(tmp_path, "plain.json5")))
    assert shm(load_config(str(named)))

def test_the_bridge_ends_with_the_run(tmp_path):
    from tests.integration.test_lifecycle_runs import child_named

    locator = f"tcp/127.0.0.1:{free_port()}"
    cfg = config(tmp_path, "b.json5", listen=locator)
    proc = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "4", "--zenoh",
                                   "--zenoh-config", cfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid = wait_for(lambda: child_named(command_pid(proc), "hil-zenoh"), timeout_s=60, step_s=0.05)
    out = finish(proc, timeout_s=120)
    assert proc.returncode == 0 and "zenoh bridge: hil/" in out, out
    assert pid, "no bridge process beside the run"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_remote_control_needs_access_control_or_tls(tmp_path):
    cfg = config(tmp_path, "open.json5", listen=f"tcp/127.0.0.1:{free_port()}")
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "2", "--zenoh",
                              "--zenoh-config", cfg, "--zenoh-control"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "access control" in r.stderr and "board emulator" not in r.stdout


def _example(tmp_path, name: str, port: int) -> str:
    """examples/zenoh/NAME with its password files found from here and the robot on `port`."""
    import re

    text = (Path("examples/zenoh") / name).read_text()
    text = text.replace("examples/zenoh/", str(Path("examples/zenoh").resolve()) + "/")
    text = re.sub(r"tcp/0\.0\.0\.0:7447", f"tcp/127.0.0.1:{port}", text)
    out = tmp_path / name
    out.write_text(text)
    return str(out)


def test_the_documented_access_control_lets_the_operator_drive_and_no_one_else(tmp_path):
    """docs/remote.md's example, both sides: the operator's login jogs the robot; a stranger on the
    same network neither finds it nor reaches its request key; its e-stop would be named as remote."""
    from hil.remote.zenoh_client import ZenohClient

    port = free_port()
    robot_cfg = _example(tmp_path, "robot-control.json5", port)
    operator_cfg = _example(tmp_path, "operator.json5", port)
    proc = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "60",
                                   "--enable", "--zenoh", "--zenoh-config", robot_cfg, "--zenoh-control"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        local = attach(proc, "puma560")
        assert local.wait(lambda s: s.enabled == 1.0, timeout_s=30)
        c = ZenohClient(f"tcp/127.0.0.1:{port}", operator_cfg, timeout_s=30)
        try:
            q = local.snapshot().q_meas + np.radians([5, 0, 0, 0, 0, 0])
            answer = c.jog(q)
            assert answer.ok, answer
            assert local.wait(lambda s: abs(s.q_cmd[0] - q[0]) < 1e-3, timeout_s=10) is not None
        finally:
            c.close()
        stranger = config(tmp_path, "stranger.json5", connect=f"tcp/127.0.0.1:{port}")
        with pytest.raises(HilError, match="no hil robot answers"):
            ZenohClient(f"tcp/127.0.0.1:{port}", stranger, timeout_s=3)
        c = ZenohClient(f"tcp/127.0.0.1:{port}", operator_cfg, timeout_s=30)
        try:
            assert c.estop().ok
        finally:
            c.close()
        local.shutdown()
        out = finish(proc, timeout_s=60)
        assert "E-STOP from a remote peer over Zenoh" in out, out
    finally:
        finish(proc)


@pytest.mark.parametrize("change,why", [
    (('default_permission: "deny"', 'default_permission: "allow"'), "allows by default"),
    (('usernames: ["operator"]', 'interfaces: ["lo"]'), "names no certificate or user"),
    (("enabled: true", "enabled: false"), "no access control"),
])
def test_remote_control_is_refused_with_an_access_control_that_lets_anyone_in(tmp_path, change, why):
    cfg = Path(_example(tmp_path, "robot-control.json5", free_port()))
    cfg.write_text(cfg.read_text().replace(*change))
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "2", "--zenoh",
                              "--zenoh-config", str(cfg), "--zenoh-control"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and why in r.stderr and "docs/remote.md" in r.stderr, r.stdout + r.stderr
    assert "board emulator" not in r.stdout


@pytest.fixture(scope="module")
def remote_run(tmp_path_factory):
    with loop_slot():
        yield from _remote_run(tmp_path_factory)


def _remote_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zenoh")
    locator = f"tcp/127.0.0.1:{free_port()}"
    bridge_cfg = config(tmp, "bridge.json5", listen=locator)
    client_cfg = config(tmp, "client.json5")
    proc = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "90",
                                   "--enable", "--zenoh", "--zenoh-config", bridge_cfg, "--zenoh-rate", str(RATE)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    local = attach(proc, "puma560")
    assert local.wait(lambda s: s.enabled == 1.0, timeout_s=30)
    assert wait_for(lambda: "zenoh bridge: hil/" in _said(proc), timeout_s=30), "the bridge did not start"
    yield proc, local, locator, client_cfg
    local.shutdown()
    finish(proc)


_out: list[str] = []


def _said(proc) -> str:
    """What the run has printed so far (read without blocking)."""
    import os
    import select

    while select.select([proc.stdout], [], [], 0)[0]:
        chunk = os.read(proc.stdout.fileno(), 65536).decode(errors="replace")
        if not chunk:
            break
        _out.append(chunk)
    return "".join(_out)


def client(remote_run):
    from hil.remote.zenoh_client import ZenohClient

    _, _, locator, cfg = remote_run
    return ZenohClient(locator, cfg, timeout_s=20)


def test_the_robot_is_listed_and_its_state_arrives_decimated(remote_run):
    proc, local, locator, cfg = remote_run
    r = subprocess.run(HIL + ["robots", "--zenoh", locator, "--zenoh-config", cfg], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "puma560 (6 joints)" in r.stdout and "read-only" in r.stdout, r.stdout + r.stderr
    c = client(remote_run)
    try:
        assert wait_for(lambda: c.received > 0, timeout_s=10)
        n0, t0 = c.received, time.monotonic()
        time.sleep(3.0)
        count, elapsed = c.received - n0, time.monotonic() - t0
        # the loop runs at 500 Hz: no more than the rate asked reaches the network, and it does arrive
        assert count <= RATE * elapsed * 1.2 + 5, count
        assert count >= 0.1 * RATE * elapsed, count
        remote, here = c.snapshot(), local.snapshot()
        assert abs(remote.t - here.t) < 1.0 and remote.q_meas.shape == (6,)
        assert np.abs(remote.q_meas - here.q_meas).max() < np.radians(1)   # holding still: the same pose
        T = robots.load("puma560").fk(here.q_meas)
        assert np.abs(remote.T_tool.reshape(4, 4) - T).max() < 0.01        # the tool pose, from the bridge
        assert c.model_description()["spec"] == "puma560"
    finally:
        c.close()


def test_a_read_only_bridge_refuses_remote_requests(remote_run):
    _, local, _, _ = remote_run
    c = client(remote_run)
    try:
        answer = c.disable()
        assert "refused" in answer and "--zenoh-control" in answer
        assert "refused" in c.jog(np.zeros(6))
        time.sleep(0.5)
        # still enabled: nothing was done (unless the machine stalled the loop into a disable of its
        # own — missed deadlines, the loop's last word then — which no remote asked for)
        here = local.snapshot()
        assert here.enabled == 1.0 or here.event.startswith("missed deadlines"), here.event
    finally:
        c.close()


def test_a_remote_twin_draws_the_remote_robot(remote_run, xdisplay, tmp_path):
    from tests.gui.test_twin import near, projector
    from twin import scene as S

    _, local, locator, cfg = remote_run
    out = tmp_path / "remote.png"
    r = subprocess.run(HIL + ["twin", "--zenoh", locator, "--zenoh-config", cfg, "--screenshot", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "states from" in r.stdout
    m = robots.load("puma560")
    F = m.fk_frames(local.snapshot().q_meas)
    px = projector("puma560")
    img = read_png(str(out))
    forearm_mid = (F[m.frame_index("link3")] @ [0.02, -0.2, 0, 1])[:3]
    assert near(img, px(forearm_mid), S.MEASURED)


def test_an_estop_from_any_peer_is_accepted(remote_run):
    _, local, _, _ = remote_run
    c = client(remote_run)
    try:
        answer = c.estop()
        assert answer.ok and "ESTOP sent" in answer, answer
        assert local.wait(lambda s: s.board_state == 4, timeout_s=10) is not None
    finally:
        c.close()


@pytest.mark.parametrize("text,said", [
    ("{ garbage", "line 1, column 1: expected array, boolean, null, number, object, or string"),
    ('{ mode: "peer" }\n{', "line 2, column 1: expected EOI"),
    ('{ mode: "nonsense" }', "line 1, column 9: unknown variant `nonsense`"),
])
def test_a_zenoh_config_zenoh_cannot_read_is_one_line_naming_where(tmp_path, text, said):
    """Zenoh's parser says what it expected over several lines, with a caret under the file's line
    and the Rust source it came from: said in one line, where in the file and what it expected."""
    from hil.remote.session import load_config

    path = tmp_path / "z.json5"
    path.write_text(text)
    with pytest.raises(HilError) as e:
        load_config(str(path))
    message = str(e.value)
    assert message.startswith(f"--zenoh-config {path}: not a Zenoh config (") and said in message, message
    assert "\n" not in message and ".rs:" not in message, message
