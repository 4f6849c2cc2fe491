"""LeRobot datasets (format v3.0), written and read without LeRobot: episodes of joint values in
LeRobot's units (`hil.lerobot.units`) that `LeRobotDataset(repo_id, root=DIR)` loads.

    DIR/meta/info.json                           schema: features, fps, counts, path templates
    DIR/meta/stats.json                          per feature min, max, mean, std, count, q01 … q99
    DIR/meta/tasks.parquet                       task text (the index) → task_index
    DIR/meta/episodes/chunk-000/file-000.parquet per episode: length, tasks, where its rows are, stats
    DIR/data/chunk-CCC/file-FFF.parquet          the frames: action, observation.state (float32 ×
                                                 joints, named `{motor}.pos`), timestamp, frame_index,
                                                 episode_index, index, task_index
    DIR/meta/hil.json                            hil's own note (LeRobot reads past it): each motor's
                                                 units, so that an episode in other units is refused

Each episode hil writes goes into a data file of its own (LeRobot packs many into one, and reads
either way: its episodes table says where each episode's rows are), so adding an episode rewrites
only the small metadata files. Each file is written beside its final name and renamed into place.

    append_episode(root, Episode(...))   → the new episode's index
    read_episode(root, n, names)         → EpisodeData (actions and states, LeRobot's units)
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hil.errors import InputError
from hil.inputs import can_create_in, open_regular, parse_json, read_text

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000          # files per chunk folder, as LeRobot's default
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_FILE = "meta/episodes/chunk-000/file-000.parquet"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
INDEX_FEATURES = {"timestamp": "float32", "frame_index": "int64", "episode_index": "int64", "index": "int64",
                  "task_index": "int64"}
VECTORS = ("action", "observation.state")
MAX_EPISODES = 100_000
MAX_FRAMES = 10_000_000


@dataclass(frozen=True)
class Episode:
    """One episode to write: per frame at `fps`, the goal sent (`action`) and the joints measured
    (`state`), both (N, n) in LeRobot's units, columns named `names` (`{motor}.pos`)."""

    names: list[str]
    fps: int
    action: np.ndarray
    state: np.ndarray
    task: str
    robot_type: str
    modes: tuple[str, ...] = ()   # each motor's LeRobot MotorNormMode (hil.lerobot.units)


@dataclass(frozen=True)
class EpisodeData:
    names: list[str]
    fps: int
    action: np.ndarray     # (N, n) float64, LeRobot's units
    state: np.ndarray
    task: str


def _pa():
    try:
        import pyarrow as pa   # lazy: Parquet is the lerobot extra's (pyarrow), needed only here
        import pyarrow.parquet as pq  # lazy: as above
    except ImportError:
        raise InputError("LeRobot datasets are Parquet files: install pyarrow (pip install 'hil-twin[lerobot]')") \
            from None
    return pa, pq


def episode_from_samples(t, q_meas, q_goal, units, fps: int, task: str, robot_type: str) -> Episode:
    """An episode from a run's samples (times t in s, measured joint angles and the goals asked of
    the joints, rad, at the loop's rate): both taken at `fps` from the first sample (linear between
    samples), in LeRobot's numbers (`units`: a `LeRobotUnits`). The state is what the servos read;
    the action the goal (LeRobot's: what the leader, or a policy, asked for)."""
    t = np.asarray(t, dtype=np.float64)
    if len(t) < 2 or not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise InputError("a run of at least two samples at times that do not go back is needed for an episode")
    frames = int(math.floor((t[-1] - t[0]) * fps + 1e-9)) + 1
    at = t[0] + np.arange(frames) / fps

    def resample(q):
        q = np.asarray(q, dtype=np.float64)
        return np.stack([np.interp(at, t, q[:, k]) for k in range(q.shape[1])], axis=1)

    return Episode(list(units.names), fps, units.values(resample(q_goal)), units.values(resample(q_meas)), task,
                   robot_type, tuple(units.modes))


# ---------------------------------------------------------------- writing
def check_append(root: str, ep: Episode) -> None:
    """Refuse now what `append_episode(root, ep)` would refuse (another robot's, fps or units; not
    a dataset; a place that cannot be written), before a run that records into it starts."""
    _check_episode(ep)
    base = Path(root)
    if (base / "meta" / "info.json").exists():
        _check_same(read_info(base), ep, root)
        _check_units(base, ep)
        _read_episodes(base)
        _read_tasks(base)
    elif base.exists() and (not base.is_dir() or any(base.iterdir())):
        raise InputError(f"{root}: not a LeRobot dataset (no meta/info.json) and not an empty folder; "
                         "name a new folder or an existing dataset")
    parent = base if base.exists() else base.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{root}: {parent} cannot be written (permissions): record elsewhere")
    try:   # what the permission bits do not say (a read-only mount, /proc; root passes them all)
        can_create_in(str(parent))
    except OSError as e:
        raise InputError(f"{root}: {parent} cannot be written ({e.strerror or e}): record elsewhere") from None


def append_episode(root: str, ep: Episode) -> int:
    """Add `ep` to the dataset at `root` (made when absent); its episode index. A dataset whose
    joints, fps or robot differ is refused, naming the difference, before anything is written."""
    check_append(root, ep)
    base = Path(root)
    if (base / "meta" / "info.json").exists():
        info, episodes, tasks = read_info(base), _read_episodes(base), _read_tasks(base)
    else:
        info, episodes, tasks = _new_info(ep), [], []
    index = len(episodes)
    if index >= MAX_EPISODES:
        raise InputError(f"{root}: already {index} episodes; start another dataset")
    if ep.task not in tasks:
        tasks.append(ep.task)
    start = episodes[-1]["dataset_to_index"] if episodes else 0
    chunk, file = divmod(index, CHUNKS_SIZE)
    _write_data(base / DATA_PATH.format(chunk_index=chunk, file_index=file), ep, index, start, tasks.index(ep.task))
    stats = _stats(ep, index, start, tasks.index(ep.task))
    episodes.append({"episode_index": index, "tasks": [ep.task], "length": len(ep.action),
                     "data/chunk_index": chunk, "data/file_index": file, "dataset_from_index": start,
                     "dataset_to_index": start + len(ep.action), "meta/episodes/chunk_index": 0,
                     "meta/episodes/file_index": 0, "stats": stats})
    _write_episodes(base, episodes)
    _write_tasks(base, tasks)
    _write_json(base / "meta" / "stats.json", _merged([e["stats"] for e in episodes]))
    info.update(total_episodes=len(episodes), total_frames=start + len(ep.action), total_tasks=len(tasks),
                splits={"train": f"0:{len(episodes)}"})
    _write_json(base / "meta" / "hil.json", {"units": dict(zip(ep.names, ep.modes))})
    _write_json(base / "meta" / "info.json", info)
    return index


def _check_units(base: Path, ep: Episode) -> None:
    path = base / "meta" / "hil.json"
    if not path.exists():
        return   # a dataset LeRobot wrote: its units are its robot's settings, not known here
    note = parse_json(read_text(str(path), "hil's dataset note"), str(path))
    units = note.get("units") if isinstance(note, dict) else None
    if isinstance(units, dict) and units != dict(zip(ep.names, ep.modes)):
        differ = [f"{n}: {units.get(n)} there, {m} here" for n, m in zip(ep.names, ep.modes) if units.get(n) != m]
        raise InputError(f"{base}: its episodes hold other units ({'; '.join(differ)}); record with the same "
                         "--degrees choice, or into another dataset")


def _check_episode(ep: Episode) -> None:
    n = len(ep.names)
    for what, a in (("action", ep.action), ("observation.state", ep.state)):
        if a.ndim != 2 or a.shape[1] != n or len(a) < 1:
            raise InputError(f"an episode's {what} must be (frames, {n}), not {a.shape}")
        if not np.all(np.isfinite(a)):
            raise InputError(f"an episode's {what} holds NaN or infinity (frame {int(np.argwhere(~np.isfinite(a))[0][0])})")
    if len(ep.state) != len(ep.action) or len(ep.action) > MAX_FRAMES:
        raise InputError(f"an episode has {len(ep.action)} actions and {len(ep.state)} states (at most {MAX_FRAMES})")
    if not isinstance(ep.fps, int) or not 1 <= ep.fps <= 1000:
        raise InputError(f"fps {ep.fps!r} must be a whole number 1 … 1000")


def _features(names: list[str]) -> dict:
    vec = {"dtype": "float32", "shape": [len(names)], "names": list(names)}
    return {"action": dict(vec), "observation.state": dict(vec),
            **{k: {"dtype": t, "shape": [1], "names": None} for k, t in INDEX_FEATURES.items()}}


def _new_info(ep: Episode) -> dict:
    return {"codebase_version": CODEBASE_VERSION, "robot_type": ep.robot_type, "total_episodes": 0,
            "total_frames": 0, "total_tasks": 0, "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200, "fps": ep.fps, "splits": {}, "data_path": DATA_PATH, "video_path": None,
            "features": _features(ep.names)}


def _check_same(info: dict, ep: Episode, root: str) -> None:
    names = info["features"]["action"].get("names")
    if names != ep.names:
        raise InputError(f"{root}: its episodes are of motors {', '.join(names or [])}; this one's are "
                         f"{', '.join(ep.names)}: record into another dataset")
    if info["fps"] != ep.fps:
        raise InputError(f"{root}: its episodes are at {info['fps']} fps, this one at {ep.fps}: use --fps "
                         f"{info['fps']} or another dataset")
    if info.get("robot_type") not in (None, ep.robot_type):
        raise InputError(f"{root}: a dataset of a {info['robot_type']}, this episode is of a {ep.robot_type}")


def _write_data(path: Path, ep: Episode, index: int, start: int, task_index: int) -> None:
    pa, _ = _pa()
    n, frames = len(ep.names), len(ep.action)
    vec = pa.list_(pa.float32(), n)
    columns = {
        "action": pa.FixedSizeListArray.from_arrays(pa.array(ep.action.astype(np.float32).ravel()), n),
        "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(ep.state.astype(np.float32).ravel()), n),
        "timestamp": pa.array((np.arange(frames) / ep.fps).astype(np.float32)),
        "frame_index": pa.array(np.arange(frames, dtype=np.int64)),
        "episode_index": pa.array(np.full(frames, index, dtype=np.int64)),
        "index": pa.array(np.arange(start, start + frames, dtype=np.int64)),
        "task_index": pa.array(np.full(frames, task_index, dtype=np.int64)),
    }
    schema = pa.schema([pa.field("action", vec), pa.field("observation.state", vec),
                        *(pa.field(k, getattr(pa, t)()) for k, t in INDEX_FEATURES.items())])
    _write_table(path, pa.Table.from_pydict(columns, schema=schema))


def _write_table(path: Path, table) -> None:
    _, pq = _pa()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="snappy")
    os.replace(tmp, path)


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=4))
    os.replace(tmp, path)


def _feature_stats(a: np.ndarray) -> dict:
    a = np.asarray(a, dtype=np.float64).reshape(len(a), -1)
    out = {"min": a.min(0), "max": a.max(0), "mean": a.mean(0), "std": a.std(0), "count": np.array([len(a)])}
    for q in QUANTILES:
        out[f"q{round(q * 100):02d}"] = np.quantile(a, q, axis=0)
    return {k: v.tolist() for k, v in out.items()}


def _stats(ep: Episode, index: int, start: int, task_index: int) -> dict:
    frames = len(ep.action)
    return {"action": _feature_stats(ep.action), "observation.state": _feature_stats(ep.state),
            "timestamp": _feature_stats(np.arange(frames) / ep.fps),
            "frame_index": _feature_stats(np.arange(frames)),
            "episode_index": _feature_stats(np.full(frames, index)),
            "index": _feature_stats(np.arange(start, start + frames)),
            "task_index": _feature_stats(np.full(frames, task_index))}


def _merged(per_episode: list[dict]) -> dict:
    """The dataset's stats from its episodes': min, max, count exact; mean and std pooled; the
    quantiles weighted by frames (as LeRobot aggregates them)."""
    out = {}
    for key in per_episode[0]:
        ss = [e[key] for e in per_episode]
        n = np.array([s["count"][0] for s in ss], dtype=np.float64)
        mean = np.array([s["mean"] for s in ss])
        var = np.array([s["std"] for s in ss]) ** 2
        total = n.sum()
        m = (n[:, None] * mean).sum(0) / total
        v = (n[:, None] * (var + (mean - m) ** 2)).sum(0) / total
        f = {"min": np.min([s["min"] for s in ss], 0).tolist(), "max": np.max([s["max"] for s in ss], 0).tolist(),
             "mean": m.tolist(), "std": np.sqrt(v).tolist(), "count": [int(total)]}
        for q in QUANTILES:
            k = f"q{round(q * 100):02d}"
            f[k] = ((n[:, None] * np.array([s[k] for s in ss])).sum(0) / total).tolist()
        out[key] = f
    return out


def _write_episodes(base: Path, episodes: list[dict]) -> None:
    pa, _ = _pa()
    cols: dict[str, list] = {}
    for e in episodes:
        for k, v in e.items():
            if k == "stats":
                for feat, st in v.items():
                    for name, values in st.items():
                        cols.setdefault(f"stats/{feat}/{name}", []).append(values)
            else:
                cols.setdefault(k, []).append(v)
    _write_table(base / EPISODES_FILE, pa.Table.from_pydict(cols))


def _write_tasks(base: Path, tasks: list[str]) -> None:
    """Written as pandas writes a frame whose index is the task text (LeRobot reads it with pandas
    and looks tasks up by that index)."""
    pa, _ = _pa()
    pandas_meta = {"index_columns": ["task"], "column_indexes": [
        {"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
         "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
                     "metadata": None},
                    {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
                     "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.0"}
    schema = pa.schema([pa.field("task_index", pa.int64()), pa.field("task", pa.string())],
                       metadata={b"pandas": json.dumps(pandas_meta).encode()})
    table = pa.Table.from_pydict({"task_index": list(range(len(tasks))), "task": tasks}, schema=schema)
    _write_table(base / "meta" / "tasks.parquet", table)


# ---------------------------------------------------------------- reading
def read_info(base: Path) -> dict:
    path = base / "meta" / "info.json"
    info = parse_json(read_text(str(path), "LeRobot dataset info"), str(path))
    if not isinstance(info, dict):
        raise InputError(f"{path}: not a LeRobot dataset's info (an object with features, fps, …)")
    version = info.get("codebase_version")
    if not isinstance(version, str) or not version.startswith("v3."):
        raise InputError(f"{path}: codebase_version {version!r}; hil reads LeRobot datasets v3.x (LeRobot's "
                         "convert_dataset_v21_to_v30 converts older ones)")
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or not 0 < fps <= 1000:
        raise InputError(f"{path}: fps = {fps!r} must be a number 1 … 1000")
    features = info.get("features")
    if not isinstance(features, dict):
        raise InputError(f"{path}: no features table")
    for key in VECTORS:
        ft = features.get(key)
        names = ft.get("names") if isinstance(ft, dict) else None
        if isinstance(names, dict):   # older writers: {"motors": [...]}
            names = next(iter(names.values()), None)
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise InputError(f"{path}: feature {key!r} does not name its motors (names: [\"shoulder_pan.pos\", …])")
        ft["names"] = names
    return info


MAX_PARQUET_BYTES = 2 * 2**30


def _read_table(path: Path, what: str):
    """A Parquet file read whole, once it is a regular file of sensible size whose row count (said
    in its footer, before anything is decoded) is within MAX_FRAMES."""
    _, pq = _pa()
    with open_regular(str(path), what, MAX_PARQUET_BYTES) as f:
        try:
            pf = pq.ParquetFile(f)
            if pf.metadata.num_rows > MAX_FRAMES or pf.metadata.num_columns > 10_000:
                raise InputError(f"{path}: {pf.metadata.num_rows} rows of {pf.metadata.num_columns} columns, more "
                                 f"than a {what} hil reads ({MAX_FRAMES} rows)")
            return pf.read()
        except InputError:
            raise
        except Exception as e:   # noqa: BLE001 - pyarrow raises many kinds on a damaged file
            raise InputError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None


def _read_episodes(base: Path) -> list[dict]:
    rows = _read_table(base / EPISODES_FILE, "LeRobot episodes table").to_pylist()
    need = ("episode_index", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index", "data/file_index")
    out = []
    for k, r in enumerate(rows):
        if any(not isinstance(r.get(key), int) for key in need) or r["episode_index"] != k:
            raise InputError(f"{base / EPISODES_FILE}: row {k} is not episode {k} with {', '.join(need)}")
        stats = {}
        for key, v in r.items():
            if key.startswith("stats/"):
                _, feat, name = key.split("/", 2)
                stats.setdefault(feat, {})[name] = v
        out.append({**{k2: v for k2, v in r.items() if not k2.startswith("stats/")}, "stats": stats})
    return out


def _read_tasks(base: Path) -> list[str]:
    table = _read_table(base / "meta" / "tasks.parquet", "LeRobot tasks table")
    if "task" not in table.column_names or "task_index" not in table.column_names:
        raise InputError(f"{base}/meta/tasks.parquet: no task and task_index columns")
    pairs = sorted(zip(table.column("task_index").to_pylist(), table.column("task").to_pylist()))
    return [t for _, t in pairs]


def read_episode(root: str, n: int) -> EpisodeData:
    """Episode `n` of the dataset at `root`; InputError naming the file, the column and the row
    for anything missing, out of place or not finite."""
    base = Path(root)
    if not (base / "meta" / "info.json").is_file():
        raise InputError(f"{root}: not a LeRobot dataset (no meta/info.json)")
    info = read_info(base)
    episodes = _read_episodes(base)
    if not 0 <= n < len(episodes):
        raise InputError(f"{root}: no episode {n}; it has {len(episodes)} (0 … {len(episodes) - 1})"
                         if episodes else f"{root}: it has no episodes")
    ep = episodes[n]
    path = base / info.get("data_path", DATA_PATH).format(chunk_index=ep["data/chunk_index"],
                                                          file_index=ep["data/file_index"])
    table = _read_table(path, "LeRobot data file")
    names = info["features"]["action"]["names"]
    idx = np.asarray(table.column("episode_index").to_numpy()) if "episode_index" in table.column_names else None
    if idx is None:
        raise InputError(f"{path}: no episode_index column")
    rows = np.flatnonzero(idx == n)
    if len(rows) != ep["length"]:
        raise InputError(f"{path}: episode {n} has {len(rows)} rows; its episodes table says {ep['length']}")
    arrays = {key: _vector(table, key, rows, len(info["features"][key]["names"]), path) for key in VECTORS}
    tasks = ep.get("tasks") or [""]
    return EpisodeData(names, int(info["fps"]), arrays["action"], arrays["observation.state"], str(tasks[0]))


def _vector(table, key: str, rows: np.ndarray, n: int, path: Path) -> np.ndarray:
    if key not in table.column_names:
        raise InputError(f"{path}: no {key!r} column")
    try:
        a = np.array(table.column(key).to_pylist(), dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{path}: column {key!r} is not rows of {n} numbers") from None
    if a.ndim != 2 or a.shape[1] != n:
        raise InputError(f"{path}: column {key!r} has rows of {a.shape[1:] or 'no'} values; info.json names {n}")
    a = a[rows]
    bad = np.argwhere(~np.isfinite(a))
    if len(bad):
        r, c = bad[0]
        raise InputError(f"{path}: column {key!r} holds {a[r, c]} at frame {r} (value {c + 1} of {n}); "
                         "every value must be a finite number")
    return a


def dataset_units(root: str) -> dict[str, str] | None:
    """Each motor's units as hil wrote them (meta/hil.json), or None for a dataset LeRobot wrote."""
    path = Path(root) / "meta" / "hil.json"
    if not path.exists():
        return None
    note = parse_json(read_text(str(path), "hil's dataset note"), str(path))
    units = note.get("units") if isinstance(note, dict) else None
    return units if isinstance(units, dict) else None


def episode_trajectory(data: EpisodeData, units, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(t, q): an episode's actions as joint angles (rad) at its frame times, for a robot whose
    motors (`units`, a `LeRobotUnits`) are the episode's — refused, naming them, when they are not."""
    missing = [n for n in units.names if n not in data.names]
    extra = [n for n in data.names if n not in units.names]
    if missing or extra:
        said = "; ".join(x for x in (f"missing {', '.join(missing)}" if missing else "",
                                     f"not the robot's: {', '.join(extra)}" if extra else "") if x)
        raise InputError(f"{where}: the episode's motors are not {units.config.robot}'s ({said}); replay it on the "
                         f"robot it was recorded on (its motors: {', '.join(data.names)})")
    order = [data.names.index(n) for n in units.names]
    return smooth_frames(units.angles(data.action[:, order]), data.fps)


SUBSTEPS = 8   # samples per frame of a smoothed episode (240 Hz from LeRobot's usual 30 fps)


def smooth_frames(q: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """(t, q) through every frame, SUBSTEPS samples a frame, on a monotone cubic (PCHIP: no
    overshoot past any two frames, so no joint goes beyond where the frames go; its speed is
    continuous). Played as straight lines between frames, an episode's speed would jump at each
    frame — an acceleration the loop's checks rightly refuse."""
    q = np.asarray(q, dtype=np.float64)
    n = len(q)
    if n < 2:
        return np.zeros(1), q[:1].copy()
    h = 1.0 / fps
    delta = np.diff(q, axis=0) / h                      # (n-1, j) slopes of the segments
    m = np.zeros_like(q)                                 # tangents: 0 at the ends and where the slope turns
    same = delta[:-1] * delta[1:] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        harmonic = 2.0 / (1.0 / delta[:-1] + 1.0 / delta[1:])
    m[1:-1] = np.where(same, harmonic, 0.0)
    s = np.arange(SUBSTEPS) / SUBSTEPS                   # within a segment
    h00, h10, h01, h11 = (2 * s**3 - 3 * s**2 + 1), (s**3 - 2 * s**2 + s), (-2 * s**3 + 3 * s**2), (s**3 - s**2)
    seg = (h00[None, :, None] * q[:-1, None] + h10[None, :, None] * h * m[:-1, None]
           + h01[None, :, None] * q[1:, None] + h11[None, :, None] * h * m[1:, None])
    out = np.concatenate([seg.reshape(-1, q.shape[1]), q[-1:]])
    return np.arange(len(out)) * (h / SUBSTEPS), out
