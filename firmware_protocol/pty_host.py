"""What every emulator here needs to serve on a pseudo-terminal: the pty itself (raw, with an
optional stable symlink) and an end when the process that started it ends."""

from __future__ import annotations

import ctypes
import os
import signal
import tty


def exit_with_parent(parent: int) -> None:
    """SIGTERM (a clean stop) when the process that started us dies, however it died."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        raise SystemExit(0)


def open_pty(link: str | None = None) -> tuple[int, int, str]:
    """(master, slave, path): a raw pty, non-blocking on the master; `link`, if given, is made to
    point at it (atomically, like udev's by-id links)."""
    master, slave = os.openpty()
    tty.setraw(slave)  # raw and no echo before anything is written
    os.set_blocking(master, False)
    path = os.ttyname(slave)
    if link:
        tmp = link + ".tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(path, tmp)
        os.replace(tmp, link)
    return master, slave, path


def close_pty(master: int, slave: int, path: str, link: str | None) -> None:
    """Close both ends and take away `link` if it still names this pty (a stale by-id name would
    send the next run to whatever pty gets the number)."""
    os.close(master)
    os.close(slave)
    if link:
        try:
            if os.readlink(link) == path:
                os.unlink(link)
        except OSError:
            pass


def stopped_code(signals: list[int], code: int) -> int:
    """An emulator's exit code: 128 + the signal that stopped it (as a shell reports), else its own."""
    return 128 + signals[0] if signals else code
