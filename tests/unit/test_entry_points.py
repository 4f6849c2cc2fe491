"""The ways hil is started: the `hil` script, `python -m hil` and `python -m hil.cli`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import hil


def test_python_dash_m_hil_is_the_cli():
    for argv in ([sys.executable, "-m", "hil", "--version"], [sys.executable, "-m", "hil.cli", "--version"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == f"hil {hil.__version__}", r.stdout + r.stderr


def test_the_parser_is_built_without_the_kernels():
    """`hil --help`, `hil ctl` and the start of every run build the whole parser: it loads neither
    Numba nor the robots nor the loop (a second of every command's start, before anything it was
    asked), only what the options are declared with; nor does `hil ctl status` reading a loop's
    run card, nor the look at the kernel cache before a run (is it cold?)."""
    code = ("import sys; import hil.cli as c; c.build_parser(); import hil.runtime.run_card, hil.cli.ctl_status; "
            "import hil.warmup; hil.warmup.cache_is_cold(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'mujoco', 'dearpygui') "
            "or m.startswith(('hil.robots', 'hil.kinematics', 'hil.runtime.loop', 'hil.runtime.supervisor'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_a_command_s_process_ends_having_kept_everything_its_teardown_would_have(tmp_path):
    """`end_command_process` skips the interpreter's teardown, nothing else: a thread still writing
    is waited for, the atexit handlers run, a file a module still holds open is written and closed
    (a text file over a buffer over a raw file, each layer with its own buffer), the standard
    output is flushed, and the exit status is the command's."""
    code = f"""
import atexit, pathlib, sys, threading, time
from hil.process_life import end_command_process
out = pathlib.Path({str(tmp_path)!r})
def late():
    time.sleep(0.3)
    (out / "thread").write_text("done")
threading.Thread(target=late).start()
atexit.register(lambda: (out / "atexit").write_text("ran"))
held = open(out / "held", "w"); held.write("buffered")
raw = open(out / "raw", "wb", buffering=0); buffered = open(out / "buffered", "wb"); buffered.write(b"bytes")
sys.stdout.write("no newline yet")
end_command_process(3)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stdout == "no newline yet"
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"thread": "done", "atexit": "ran",
                                                                   "held": "buffered", "raw": "",
                                                                   "buffered": "bytes"}


@pytest.mark.parametrize("to", ["process", "other thread"])
def test_a_ctrl_c_while_a_command_s_process_ends_ends_it_at_once_without_a_traceback(to):
    """Waiting for a thread at its end, the process takes a second Ctrl-C as Python would at exit,
    but quietly: exit status 130, no traceback, the thread not waited for — also when the kernel
    gives the signal to the thread waited for, which Python's main thread, blocked in a join, would
    not see until that thread ended."""
    code = """
import signal, sys, threading, time
from hil.process_life import end_command_process

# Ctrl-C as a terminal's foreground process has it, whatever this one inherited from the test's
# process: SIGINT ignored (a background job without job control) or blocked
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])

def waited_for():
    main = threading.main_thread()
    while True:   # say so once the main thread waits for this one inside end_command_process
        frame, names = sys._current_frames().get(main.ident), set()
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        if {"end_command_process", "join"} <= names:
            break
        time.sleep(0.01)
    print("waiting", flush=True)
    if sys.argv[1] == "other thread":
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    time.sleep(60)

threading.Thread(target=waited_for).start()
end_command_process(0)
"""
    proc = subprocess.Popen([sys.executable, "-c", code, to], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "waiting"
        if to == "process":
            proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("the Ctrl-C did not end it; its threads' signals: " + _signals_of(proc.pid)) from None
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err


def _signals_of(pid: int) -> str:
    out = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task")):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            out.append(tid + " " + " ".join(ln.split()[0] + ln.split()[1] for ln in f
                                             if ln.startswith(("SigPnd", "SigBlk", "SigIgn", "SigCgt", "State"))))
    return "; ".join(out)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_output_that_finds_no_room_is_one_line_not_a_traceback():
    """`hil robots > file` on a full disk: what could not be written is said, once, exit 1."""
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "hil", "robots"], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == ("hil robots: error: cannot write its output: No space left on device; free some space "
                                "on that disk or write elsewhere"), r.stderr
