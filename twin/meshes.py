"""A URDF robot's visual meshes for the twin: loaded once with trimesh, placed in their links'
frames, reduced to a triangle budget the frame rate allows, and kept in the user's cache.

SO-101's meshes hold about 400 000 triangles; the twin draws every triangle as an item each frame,
so the meshes are reduced by vertex clustering (vertices merged per cell of a grid, the cell grown
until the whole robot fits the budget): outlines and silhouettes keep their place to a cell's
size, small holes and fillets go. The result is cached by the files' contents and the budget.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

TRIANGLE_BUDGET = 4000   # the whole robot (benchmarks/README.md: the twin's frame rate)
CACHE_FORMAT = 2         # what a cached file holds: per link vertices, triangles and per-triangle colours


def _cache_path(model, budget: int) -> Path:
    h = hashlib.sha256(f"{CACHE_FORMAT}|{budget}|".encode())
    for link, file, scale, T, color in model.meta.get("visual_meshes", []):
        st = os.stat(file)
        h.update(json.dumps([link, file, st.st_size, st.st_mtime_ns, scale, T, color]).encode())
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hil" / "meshes" / f"{h.hexdigest()[:32]}.npz"


def _load(model) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per link: vertices (link frame, m), triangles, and each triangle's RGBA (0…1) as its file
    gives it (NaN where it gives none)."""
    import trimesh   # lazy: half a second to import; only URDF robots with meshes need it

    parts: dict[int, list] = {}
    for link, file, scale, T, color in model.meta["visual_meshes"]:
        mesh = trimesh.load(file, force="mesh", process=False)
        v = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale)
        M = np.asarray(T, dtype=np.float64).reshape(4, 4)
        f = np.asarray(mesh.faces, np.int64)
        parts.setdefault(int(link), []).append((v @ M[:3, :3].T + M[:3, 3], f, _face_colors(mesh, len(f), color)))
    out = {}
    for link, pieces in parts.items():
        offset, vs, fs = 0, [], []
        for v, f, _ in pieces:
            vs.append(v)
            fs.append(f + offset)
            offset += len(v)
        out[link] = (np.concatenate(vs), np.concatenate(fs), np.concatenate([c for _, _, c in pieces]))
    return out


def _face_colors(mesh, n: int, material) -> np.ndarray:
    """(n, 4) RGBA 0…1: the URDF's or MJCF's material where it gives one (it wins, as in RViz),
    else the mesh file's own face colours (a PLY's, an OBJ's material), else NaN."""
    if material is not None:
        rgba = np.asarray(list(material) + [1.0] * (4 - len(material)), dtype=np.float64)[:4]
        return np.tile(np.clip(rgba, 0.0, 1.0), (n, 1))
    try:
        if mesh.visual.kind in ("face", "vertex"):
            c = np.asarray(mesh.visual.face_colors, dtype=np.float64)[:, :4] / 255.0
            if c.shape == (n, 4) and np.ptp(c, axis=0).max() + abs(c[0, :3] - 102 / 255).max() > 1e-3:
                return c   # (trimesh's stand-in grey everywhere is no colour)
        elif mesh.visual.kind == "texture" and hasattr(mesh.visual, "material"):
            main = np.asarray(mesh.visual.material.main_color, dtype=np.float64)[:4] / 255.0
            return np.tile(main, (n, 1))
    except (AttributeError, ValueError, TypeError):
        pass
    return np.full((n, 4), np.nan)


def cluster(v: np.ndarray, f: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertices merged per grid cell of `cell` metres (each cell's mean), triangles that collapse
    dropped, and each remaining triangle once: (vertices, triangles, the kept triangles' indices
    in `f`)."""
    k = np.floor(v / cell).astype(np.int64)
    k -= k.min(axis=0)
    span = k.max(axis=0) + 1
    keys = (k[:, 0] * span[1] + k[:, 1]) * span[2] + k[:, 2]     # one integer per cell: a 1-D unique
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    merged = np.zeros((len(counts), 3))
    np.add.at(merged, inverse, v)
    merged /= counts[:, None]
    g = inverse[f]
    keep = np.flatnonzero((g[:, 0] != g[:, 1]) & (g[:, 1] != g[:, 2]) & (g[:, 0] != g[:, 2]))
    g = g[keep]
    s = np.sort(g, axis=1)
    n = len(merged)
    _, first = np.unique((s[:, 0] * n + s[:, 1]) * n + s[:, 2], return_index=True)
    first = np.sort(first)
    g = g[first]
    used, remap = np.unique(g, return_inverse=True)
    return merged[used], remap.reshape(-1, 3), keep[first]


def _reduce(links: dict, budget: int) -> dict:
    total = sum(len(f) for _, f, _ in links.values())
    if total <= budget:
        return links
    # a surface of area A cut into cells of side c keeps about 2·A/c² triangles: start a little
    # below the cell that gives the budget, and grow it
    area = sum(float(np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1).sum()) / 2
               for v, f, _ in links.values())
    cell = 0.7 * float(np.sqrt(2 * area / budget))
    while True:
        out = {}
        for k, (v, f, c) in links.items():
            v2, f2, kept = cluster(v, f, cell)
            if len(f2):   # a part smaller than a cell (a small gear) leaves nothing: its shapes are drawn
                out[k] = (v2, f2, c[kept])
        if sum(len(f) for _, f, _ in out.values()) <= budget:
            return out
        cell *= 1.25


def link_meshes(model, budget: int = TRIANGLE_BUDGET) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The robot's visual meshes per link (vertices, triangles, each triangle's RGBA 0…1 or NaN),
    at most `budget` triangles in all; {} when it has none or they cannot be read (the twin draws
    its shapes)."""
    if not model.meta.get("visual_meshes"):
        return {}
    try:
        path = _cache_path(model, budget)
    except OSError:
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            links = [int(k) for k in json.loads(str(z["links"]))]
            return {k: (z[f"v{k}"], z[f"f{k}"], z[f"c{k}"]) for k in links if len(z[f"f{k}"])}
    except (OSError, KeyError, ValueError):
        pass
    try:
        links = _reduce(_load(model), budget)
    except (OSError, ValueError, ImportError, IndexError, KeyError, AttributeError):
        return {}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {}
        for k, (v, f, c) in links.items():
            arrays |= {f"v{k}": v, f"f{k}": f, f"c{k}": c}
        tmp = path.with_suffix(f".{os.getpid()}.npz")
        np.savez(tmp, links=json.dumps(sorted(links)), **arrays)
        os.replace(tmp, path)
    except OSError:
        pass
    return links
