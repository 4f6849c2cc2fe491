"""The X display, asked through Xlib with ctypes: whether one can be opened, and its screen's size.
Never through DearPyGui, which aborts the process when there is no display; no toolkit needed."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time


def _x11():
    lib = ctypes.util.find_library("X11") or "libX11.so.6"
    x11 = ctypes.CDLL(lib)
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    x11.XDefaultScreen.argtypes = [ctypes.c_void_p]
    x11.XDisplayWidth.argtypes = x11.XDisplayHeight.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return x11


def display_available(display: str | None = None, wait_s: float = 0.0) -> bool:
    """True if the X display (default: $DISPLAY) can be opened, trying again for `wait_s` (an X
    server on a busy machine can be slow to take a connection)."""
    disp = os.environ.get("DISPLAY") if display is None else display
    if not disp:
        return False
    deadline = time.monotonic() + wait_s
    while True:
        try:
            x11 = _x11()
            d = x11.XOpenDisplay(disp.encode())
            if d:
                x11.XCloseDisplay(d)
                return True
        except (OSError, AttributeError):
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def screen_size(default: tuple[int, int] = (1280, 720)) -> tuple[int, int]:
    """The default screen's size in pixels on $DISPLAY, else `default`."""
    disp = os.environ.get("DISPLAY")
    if not disp:
        return default
    try:
        x11 = _x11()
        d = x11.XOpenDisplay(disp.encode())
        if not d:
            return default
        try:
            screen = x11.XDefaultScreen(d)
            return int(x11.XDisplayWidth(d, screen)), int(x11.XDisplayHeight(d, screen))
        finally:
            x11.XCloseDisplay(d)
    except (OSError, AttributeError):
        return default
