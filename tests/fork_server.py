"""The test worker's fork server: `hil` commands that start without importing anything.

The tests start a few hundred `hil` commands. Each fresh interpreter spends about half a CPU-second
importing NumPy, Numba, MuJoCo and hil and loading the cached kernels before the command does
anything (a third of the suite's CPU on a 2-core machine). This process does that once per test
worker, then forks a copy for each command that tests/fork_client.py hands it: the command's own
process, with the client's standard streams, folder, environment and arguments, running the same
`hil.cli.entry` a fresh interpreter runs, over the same ptys, emulators and loops.

What a fork cannot give is declined (the client then starts a fresh interpreter): an environment
that changes how the project or its libraries import (NUMBA_*, PYTHON*, LD_*), or a working folder
that holds a package of the project (it would be imported from there). The tests of start-up
itself use a fresh interpreter (tests/launch.py: FRESH_HIL).

    python -m tests.fork_server SOCKET
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import pkgutil
import selectors
import signal
import socket
import sys
import threading
import traceback
import types

PACKAGES = ("hil", "firmware_protocol", "twin", "calibration")
IMPORT_TIME_ENV = ("NUMBA_", "PYTHON", "LD_", "MUJOCO_")
PID_FILE_SUFFIX = ".pid"
REQUEST_TIMEOUT_S = 5.0
LOG_ENV = "HIL_TEST_FORK_LOG"   # a file: each command the server declined or could not answer, and why


def _preload() -> None:
    """Every module of the project a command can import (not the `__main__`s, which run), and
    every kernel loaded from the cache."""
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue
            try:
                importlib.import_module(info.name)
            except Exception:   # noqa: BLE001 - an optional library missing: the command imports it and says so
                pass
    from hil.warmup import compile_all

    compile_all()


def _declined(request: dict, base_env: dict) -> str | None:
    """Why a fresh interpreter would import differently from this server (None: it would not)."""
    env = request["env"]
    for key in sorted(set(env) | set(base_env)):
        if key.startswith(IMPORT_TIME_ENV) and env.get(key) != base_env.get(key):
            return f"{key} differs"
    for name in PACKAGES:
        if _shadows(request["cwd"], name):
            return f"{request['cwd']} holds another {name}"
    return None


def _shadows(folder: str, package: str) -> bool:
    """A fresh interpreter started in `folder` would import `package` from there, and that is not
    the one this server imported."""
    here = os.path.join(folder, package)
    if not os.path.exists(here) and not os.path.exists(here + ".py"):
        return False
    return os.path.realpath(here) != os.path.dirname(os.path.realpath(sys.modules[package].__file__))


def _streams(env: dict) -> None:
    """The standard streams buffered as a fresh interpreter buffers them for these descriptors.
    The same objects as before the fork: a default argument `out=sys.stdout` taken when a module
    was imported writes through the same buffer as `print`, in order."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        stream.reconfigure(line_buffering=os.isatty(fd) or fd == 2, write_through=unbuffered)


def _become_the_command(request: dict, fds: list[int], own_fds: list[int]) -> None:
    """In the forked child: the client's process as `python -m hil.cli ARGS` would have made it,
    then the command. Never returns."""
    try:
        for fd in own_fds:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in request.get("ignored", ()):   # as the client was started: ignored across its exec too
            signal.signal(sig, signal.SIG_IGN)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import hil.cli

        main = os.path.join(os.path.dirname(hil.cli.__file__), "__main__.py")
        sys.argv = [main, *request["argv"]]
        sys.orig_argv = [sys.executable, "-m", "hil.cli", *request["argv"]]
        sys.path[0] = request["cwd"]
        module = types.ModuleType("__main__")
        module.__spec__ = importlib.util.spec_from_file_location("hil.cli.__main__", main)
        sys.modules["__main__"] = module
        _streams(request["env"])
    except BaseException:   # noqa: BLE001 - a child never returns into the server
        os._exit(70)
    try:
        hil.cli.entry()   # ends the process itself (hil.process_life), unless something is raised past it
    except SystemExit as e:   # argparse's --help, --version and usage errors: as the interpreter ends
        code = e.code if isinstance(e.code, int) or e.code is None else _said(e.code)
    except KeyboardInterrupt:   # as the interpreter: its traceback, then death by the signal
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:   # noqa: BLE001 - as the interpreter: the traceback, exit 1
        traceback.print_exc()
        code = 1
    from hil.process_life import end_command_process

    end_command_process(code or 0)


def _said(message) -> int:
    print(message, file=sys.stderr)
    return 1


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds = b"", []
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk, ancdata, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_LEN(3 * 4))
        if not chunk:
            raise OSError("the client went away")
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += list(memoryview(payload).cast("i"))
        data += chunk
    return json.loads(data[4:]), fds


class Server:
    def __init__(self, path: str) -> None:
        self.path = path
        self.base_env = dict(os.environ)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)
        self.children: dict[int, tuple[int, socket.socket, int]] = {}   # pidfd -> (pid, its client, the client's pid)

    def _log(self, line: str) -> None:
        if os.environ.get(LOG_ENV):
            with open(os.environ[LOG_ENV], "a") as f:
                print(line, file=f)

    def _own_fds(self) -> list[int]:
        return [self.listener.fileno(), self.selector.fileno()] + \
            [fd for pidfd, (_pid, conn, _client) in self.children.items() for fd in (pidfd, conn.fileno())]

    def _accept(self, _key) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(REQUEST_TIMEOUT_S)   # a client stopped before it asked holds no one else up
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError):
            conn.close()
            return
        conn.settimeout(None)
        why = "not three standard streams" if len(fds) != 3 else _declined(request, self.base_env)
        if why:
            self._log(f"fresh interpreter for {request.get('argv')}: {why}")
            for fd in fds:
                os.close(fd)
            conn.sendall(b"fresh\n")
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_the_command(request, fds, self._own_fds() + [conn.fileno()])
        for fd in fds:
            os.close(fd)
        client_pid = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        client_pid = int.from_bytes(client_pid[:4], sys.byteorder)
        with open(self._pid_file(client_pid), "w") as f:
            f.write(str(pid))
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn, client_pid)
        self.selector.register(pidfd, selectors.EVENT_READ, self._ended)
        self.selector.register(conn, selectors.EVENT_READ, self._client_gone)
        conn.sendall(f"pid {pid}\n".encode())

    def _pid_file(self, client_pid: int) -> str:
        return f"{self.path}.{client_pid}{PID_FILE_SUFFIX}"

    def _ended(self, key) -> None:
        pidfd = key.fd
        pid, conn, client_pid = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        if conn.fileno() in self.selector.get_map():
            self.selector.unregister(conn)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        said = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}"
        try:
            conn.sendall(said.encode() + b"\n")
        except OSError:
            pass
        conn.close()
        try:
            os.unlink(self._pid_file(client_pid))
        except OSError:
            pass

    def _client_gone(self, key) -> None:
        """The client was killed (SIGKILL is not passed on): so is its command."""
        for pidfd, (pid, conn, _client) in self.children.items():
            if conn is key.fileobj:
                try:
                    if not conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                        os.kill(pid, signal.SIGKILL)
                        self.selector.unregister(conn)
                except BlockingIOError:
                    pass
                except OSError:
                    os.kill(pid, signal.SIGKILL)
                    self.selector.unregister(conn)
                return

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select():
                try:
                    key.data(key)
                except OSError as e:   # a client gone while it was answered: the others go on being served
                    self._log(f"{key.data.__name__}: {e}")


def main(path: str) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG: ends with its worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # a Ctrl-C to the test run is the worker's to handle
    _preload()
    gc.collect()
    gc.freeze()   # what the imports made: out of every command's collections, which would touch (and copy) its pages
    try:   # each command's end is watched through a pidfd (Linux 5.3)
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return   # clients start afresh
    if threading.active_count() != 1:
        return   # a Python thread would be missing from the forks, its locks perhaps held: clients start afresh
    Server(path).serve()


if __name__ == "__main__":
    main(sys.argv[1])
