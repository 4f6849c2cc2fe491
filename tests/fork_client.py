"""`hil ARGS…` for the tests, started from the test worker's fork server (tests/fork_server.py).

Run as `python -I -S tests/fork_client.py ARGS…` (no site, no project import: a few ms). It hands
its standard streams, working folder, environment and arguments to the server, which forks a
process that already imported hil and runs the command there. This process stands for that
command until it ends: it passes on the signals it is sent, and exits as the command did (its
code, or the same signal). Where no server answers, or the server declines (an environment or a
folder a fresh interpreter would import differently), it becomes `python -m hil.cli ARGS…` itself.
Standard library only: it must start before anything of the project can be imported.
"""

import array
import json
import os
import signal
import socket
import sys

SOCKET_ENV = "HIL_TEST_FORK_SOCKET"
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGALRM, signal.SIGCONT, signal.SIGWINCH)


def _as_a_fresh_interpreter(args: list) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "hil.cli", *args])


def _request(args: list, ignored: list) -> bytes:
    body = json.dumps({"argv": args, "cwd": os.getcwd(), "env": dict(os.environ), "ignored": ignored}).encode()
    return len(body).to_bytes(4, "big") + body


def main() -> None:
    args = sys.argv[1:]
    path = os.environ.get(SOCKET_ENV)
    child = []
    pending = []

    def pass_on(signum, _frame):
        if child:
            os.kill(child[0], signum)
        else:
            pending.append(signum)

    # a signal this process was started ignoring (a background job's SIGINT) starts ignored in the
    # command too, as across an exec, and the command sets its own handling as `hil` does (a run's
    # Ctrl-C): it is passed on all the same, as it reaches an exec'd `hil`
    ignored = [int(sig) for sig in PASSED_ON if signal.getsignal(sig) == signal.SIG_IGN]
    for sig in PASSED_ON:
        signal.signal(sig, pass_on)
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        conn.sendmsg([_request(args, ignored)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        replies = conn.makefile("rb")
        first = replies.readline().split()
    except (OSError, TypeError):
        first = []
    if len(first) != 2 or first[0] != b"pid":
        for sig in PASSED_ON:
            signal.signal(sig, signal.SIG_IGN if int(sig) in ignored else signal.SIG_DFL)
        _as_a_fresh_interpreter(args)
    child.append(int(first[1]))
    for signum in pending:
        os.kill(child[0], signum)
    end = replies.readline().split()
    if len(end) == 2 and end[0] == b"signal":
        signum = int(end[1])
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    os._exit(int(end[1]) if len(end) == 2 and end[0] == b"exit" else 1)


if __name__ == "__main__":
    main()
