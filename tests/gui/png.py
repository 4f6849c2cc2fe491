"""PNG files as arrays for the GUI tests, read by Pillow (decoding a 1280×720 screenshot's
filtered rows in Python took seconds each)."""

from __future__ import annotations

import numpy as np
from PIL import Image


def read_png(path: str) -> np.ndarray:
    """(height, width, channels) uint8 array of a PNG file (RGB or RGBA, as written)."""
    with Image.open(path) as img:
        if img.format != "PNG":
            raise ValueError(f"{path} is not a PNG")
        if img.mode not in ("RGB", "RGBA"):
            img = img.convert("RGBA")
        return np.array(img)
