"""One open serial port and its two ways of moving bytes.

`open_serial` opens a device path or a pyserial URL exclusively, with errors that say what to do.
`PortIO` owns the open port for a `Link`:

- threaded mode (a reader thread blocks in `read_some`; writers share a lock): writes go out
  whole, straight through the file descriptor where there is one;
- poll mode (the real-time loop reads and writes from its own thread): `read_now` and `write`
  never block; what does not fit in the port's buffer waits for the next write, and a new frame
  is dropped while such a backlog remains (the caller counts it).

Every I/O failure surfaces as one of `PORT_ERRORS`; the caller decides that the link is lost.
"""

from __future__ import annotations

import errno
import glob
import os
import select
import termios
import threading
import time

import serial
import serial.tools.list_ports

from firmware_protocol.protocol_errors import DeviceError

PORT_ERRORS = (OSError, termios.error, serial.SerialException)


def is_url(port: str) -> bool:
    """A pyserial URL (`loop://`, `socket://…`, `rfc2217://…`) rather than a device path."""
    return "://" in port


def flock_holders(target: str) -> list[int]:
    """Processes holding an flock on the file (Linux /proc/locks): who opened a port exclusively."""
    try:
        st = os.stat(target)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key and parts[4].isdigit():
            pids.append(int(parts[4]))
    return pids


def _holds_a_pty_master(pid: str) -> bool:
    try:
        return any(os.readlink(fd) == "/dev/ptmx" for fd in glob.glob(f"/proc/{pid}/fd/*"))
    except OSError:
        return False


def port_holders(port: str) -> list[str]:
    """Processes holding `port` open (Linux /proc), as 'name (pid)': the one that locked it when
    /proc/locks says; otherwise every process with it open but the one serving a pty's other end
    (an emulator keeps both ends of its pty open)."""
    try:
        target = os.path.realpath(port)
    except OSError:
        return []
    pids = [str(p) for p in flock_holders(target) if p != os.getpid()]
    if not pids:
        for fd in glob.glob("/proc/[0-9]*/fd/*"):
            try:
                if os.readlink(fd) == target:
                    pid = fd.split("/")[2]
                    if int(pid) != os.getpid() and not (target.startswith("/dev/pts/") and _holds_a_pty_master(pid)):
                        pids.append(pid)
            except OSError:
                continue
    out = []
    for pid in sorted(set(pids)):
        try:
            with open(f"/proc/{pid}/comm") as f:
                out.append(f"{f.read().strip()} ({pid})")
        except OSError:
            continue
    return out


# A port another process holds is asked for again this long before it is said to be busy: a hil
# loop whose board went away probes its old path for a while (0.5 s handshakes), and a device the
# kernel has given that path since (a new adapter, a new pty) is then held for a moment by a
# program that will let it go
BUSY_WAIT_S = 1.0


def open_serial(port: str, baud: int = 1_000_000, timeout_s: float = 0.005,
                busy_wait_s: float = BUSY_WAIT_S) -> serial.SerialBase:
    """Open a port (device path or pyserial URL) exclusively, with errors that say what to do; a
    port held by another process is waited for up to `busy_wait_s`."""
    deadline = time.monotonic() + busy_wait_s
    while True:
        try:
            if is_url(port):
                return serial.serial_for_url(port, baudrate=baud, timeout=timeout_s)
            return serial.Serial(port, baudrate=baud, timeout=timeout_s, exclusive=True)
        except serial.SerialException as e:
            if not (_is_busy(e) and time.monotonic() < deadline):
                raise _open_error(port, e) from e
        time.sleep(0.05)


def _is_busy(e: serial.SerialException) -> bool:
    return "exclusively lock" in str(e) or getattr(e, "errno", None) in (errno.EBUSY, errno.EAGAIN)


def _open_error(port: str, e: serial.SerialException) -> DeviceError:
    err = getattr(e, "errno", None)
    text = str(e)
    if err == errno.EACCES or "Permission denied" in text:
        return DeviceError(errno.EACCES,
                           f"cannot open {port}: permission denied. Add yourself to the `dialout` group "
                           "(sudo usermod -aG dialout $USER, then log in again) or install the udev rule "
                           "from the README")
    if err == errno.ENOENT or "No such file" in text or "could not open port" in text and "[Errno 2]" in text:
        return DeviceError(errno.ENOENT, f"cannot open {port}: no such port. Run `hil ports` to list serial "
                                         "ports, or `hil run --dry-run` to use the built-in emulator")
    if _is_busy(e):
        who = port_holders(port)
        held = f" (held by {', '.join(who)})" if who else ""
        return DeviceError(errno.EBUSY, f"cannot open {port}: the port is busy{held}. Close the other "
                                        "program (or `hil` instance) using it")
    if os.path.exists(port) and not os.path.realpath(port).startswith("/dev/"):
        return DeviceError(errno.ENOTTY, f"cannot open {port}: it is a file, not a serial port. Give the "
                                         "board's device (`hil ports` lists them), or use --dry-run")
    if err == errno.ENOTTY or "Inappropriate ioctl" in text:
        return DeviceError(errno.ENOTTY, f"cannot open {port}: not a serial port (the device does not take a "
                                         "serial line's settings). `hil ports` lists the serial ports")
    return DeviceError(err or errno.EIO, f"cannot open {port}: {text}")


def usb_serial_number(port: str) -> str | None:
    """The USB serial number of the adapter behind `port` (None for a pty, a URL or no number)."""
    if is_url(port):
        return None
    real = os.path.realpath(port)
    for p in serial.tools.list_ports.comports():
        if os.path.realpath(p.device) == real:
            return p.serial_number
    return None


class PortIO:
    """An open port, read and written in threaded or poll mode (see the module docstring)."""

    def __init__(self, port: str, baud: int, threaded: bool) -> None:
        self.port = port
        self.threaded = threaded
        self.ser = open_serial(port, baud)
        self._lock = threading.Lock()
        self._backlog = b""
        try:
            self.fd: int | None = None if is_url(port) else self.ser.fileno()
        except (AttributeError, OSError, serial.SerialException):
            self.fd = None

    def set_low_latency(self) -> bool | None:
        """Ask the adapter for its shortest latency timer: True if set, False if the device has
        none (cdc-acm, ptys), None where the question does not apply (a URL)."""
        if not hasattr(self.ser, "set_low_latency_mode") or is_url(self.port):
            return None
        try:
            self.ser.set_low_latency_mode(True)  # FTDI: 1 ms latency timer instead of 16 ms
            return True
        except (ValueError, OSError, termios.error):
            return False

    def discard_input(self) -> None:
        self.ser.reset_input_buffer()

    def read_some(self) -> bytes:
        """What has arrived, waiting up to the port's timeout (5 ms) for at least one byte."""
        return self.ser.read(max(1, self.ser.in_waiting))

    def read_now(self) -> bytes:
        """What has arrived, without waiting."""
        if self.fd is None or self.threaded:
            return self.ser.read(self.ser.in_waiting)
        if not select.select([self.fd], [], [], 0)[0]:
            return b""
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return b""
        if not data:  # readable but empty: the device went away (pyserial's rule too)
            raise OSError(errno.EIO, "device reports readiness to read but returned no data (disconnected)")
        return data

    def write(self, data: bytes) -> bool:
        """Send a frame; False if poll mode dropped it behind an unsent backlog."""
        with self._lock:
            if self.fd is not None and not self.threaded:
                return self._write_without_blocking(data)
            if self.fd is not None:
                n = os.write(self.fd, data)  # pyserial's write adds a select() round per call
                if n < len(data):
                    self.ser.write(data[n:])
            else:
                self.ser.write(data)
        return True

    def _write_without_blocking(self, data: bytes) -> bool:
        if self._backlog:
            n = self._write_what_fits(self._backlog)
            self._backlog = self._backlog[n:]
            if self._backlog:
                return False
        n = self._write_what_fits(data)
        if n < len(data):
            self._backlog = data[n:]
        return True

    def _write_what_fits(self, data: bytes) -> int:
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0

    def close(self) -> None:
        self.fd = None
        self._backlog = b""
        try:
            self.ser.close()
        except PORT_ERRORS:
            pass


def list_ports() -> list[serial.tools.list_ports_common.ListPortInfo]:
    """Serial ports the OS lists (USB adapters, ACM devices, built-in UARTs; never ptys)."""
    return sorted(serial.tools.list_ports.comports(), key=lambda p: p.device)
