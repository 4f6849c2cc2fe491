"""The one seqlock of hil: a record written by one process and read by others without a lock.
A sequence word goes odd while the writer writes and even when it is done, so a reader that saw
the same even word before and after its copy has a whole record.

A reader gives up after `Seqlock.TRIES` attempts rather than spin: a writer stopped between its
two increments (its CPU taken for milliseconds, or killed) leaves the word odd meanwhile or for
good, and the real-time loop is among the readers. A reader that may wait asks again later.

Users: the port process's command and state slots (`hil.runtime.port_process`), the loop's
snapshot area (`hil.runtime.shared`), and `SeqlockFile`, a small block of float64 numbers in a
file (the shadow twin's `hil.runtime.shadow` and the physics world's `hil.physics.world`).
"""

from __future__ import annotations

import os

import numpy as np


class Seqlock:
    """The sequence word `words[index]` (a shared int64 or float64 array) guarding one record."""

    TRIES = 100

    def __init__(self, words: np.ndarray, index: int = 0) -> None:
        self.words = words
        self.index = index

    def begin_write(self) -> None:
        self.words[self.index] += 1   # odd: writing

    def end_write(self) -> None:
        self.words[self.index] += 1   # even: whole

    def read(self, copy) -> int | None:
        """Call `copy()` until it ran inside an even, unchanged word: that word, or None when no
        whole copy came within TRIES (what `copy` wrote is then garbage)."""
        words, i = self.words, self.index
        for _ in range(self.TRIES):
            seq = int(words[i])
            if seq & 1:
                continue
            copy()
            if int(words[i]) == seq:
                return seq
        return None


class SeqlockFile:
    """`size` float64 values after the sequence word, in the file at `path` (made when `create`;
    an existing one opened to be written with `writer`, read only otherwise)."""

    def __init__(self, path: str, size: int, create: bool = False, writer: bool = False) -> None:
        self.path = path
        self.size = size
        if create:
            # written whole under a temporary name first: a reader never maps a half-made file
            a = np.lib.format.open_memmap(path + ".tmp.npy", mode="w+", dtype=np.float64, shape=(1 + size,))
            os.replace(path + ".tmp.npy", path)
            self.a = a
        else:
            a = np.load(path, mmap_mode="r+" if writer else "r")
            if a.shape != (1 + size,) or a.dtype != np.float64:
                raise ValueError(f"{path}: a block of {a.shape[0] - 1} numbers, not the {size} expected")
            self.a = a
        self.lock = Seqlock(self.a, 0)
        self._out = np.zeros(size)

    def write(self, values: np.ndarray) -> None:
        self.lock.begin_write()
        self.a[1:] = values
        self.lock.end_write()

    def read(self) -> np.ndarray | None:
        """The last whole record, or None before the first (or when the writer is always mid-write)."""
        out = self._out
        seq = self.lock.read(lambda: np.copyto(out, self.a[1:]))
        return out.copy() if seq else None

    def unlink(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
