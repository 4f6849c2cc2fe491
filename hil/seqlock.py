"""A small block of float64 numbers in a file, written by one process and read by others without a
lock: word 0 is a sequence number the writer makes odd while it writes and even when done (a
seqlock), so a reader that saw the same even number before and after its copy has a whole record.

The shadow twin's block (`hil.runtime.shadow`) and the physics emulator's world block
(`hil.physics.world`) are both one of these; the loop's own shared block (`hil.runtime.shared`)
has more in it (requests, answers, events) and keeps its own layout.
"""

from __future__ import annotations

import os

import numpy as np


class SeqlockFile:
    """`size` float64 values after the sequence word, in the file at `path` (made when `create`)."""

    def __init__(self, path: str, size: int, create: bool = False) -> None:
        self.path = path
        self.size = size
        if create:
            # written whole under a temporary name first: a reader never maps a half-made file
            a = np.lib.format.open_memmap(path + ".tmp.npy", mode="w+", dtype=np.float64, shape=(1 + size,))
            os.replace(path + ".tmp.npy", path)
            self.a = a
        else:
            a = np.load(path, mmap_mode="r")
            if a.shape != (1 + size,) or a.dtype != np.float64:
                raise ValueError(f"{path}: a block of {a.shape[0] - 1} numbers, not the {size} expected")
            self.a = a

    def write(self, values: np.ndarray) -> None:
        a = self.a
        a[0] += 1
        a[1:] = values
        a[0] += 1

    def read(self) -> np.ndarray | None:
        """The last whole record, or None before the first (or when the writer is always mid-write)."""
        a = self.a
        for _ in range(10):
            seq = a[0]
            if seq % 2:
                continue
            out = a[1:].copy()
            if a[0] == seq:
                return out if seq > 0 else None
        return None

    def unlink(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
