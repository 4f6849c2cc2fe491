"""The twin's visual meshes (twin/meshes.py), reduced to its triangle budget."""

from __future__ import annotations

import numpy as np


def test_a_part_smaller_than_the_twins_mesh_cells_is_drawn_by_its_shapes():
    """ToddlerBot's small gears: reduced to the twin's triangle budget, a part smaller than a cell
    collapsed to no triangle at all, and its empty mesh stopped the twin at start (a traceback).
    It is dropped from the meshes now (the twin draws that link's shapes)."""
    from twin import meshes

    box = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], dtype=np.float64)
    faces = np.array([(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6),
                      (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)])
    big = (box * 0.3, faces, np.ones((12, 4)))
    tiny = (box * 1e-4, faces, np.ones((12, 4)))
    out = meshes._reduce({0: big, 1: tiny}, budget=12)
    assert 1 not in out and all(len(f) for _, f, _ in out.values())
