"""On-disk cache of trie arrays, keyed by the vocabulary fingerprint (numpy ``.npz``, no pickle).

1. ``save(key, tries, arrays)`` writes the arrays of named TokenTries and of extra named
   arrays to ``<cache dir>/tries/<sha256(key)>.npz`` (a temporary file, then an atomic
   rename), with the format version, the key itself and a CRC-32 of every array.
2. ``load(key, vocab_size)`` reads it back with ``allow_pickle=False`` and trusts nothing:
   the format and key must match, the CRC must hold, and every trie must pass
   ``valid_layout`` (the bounds and orderings the walk kernels rely on: they index without
   checks). Any failure is a miss: the caller rebuilds and overwrites the file.

The cache directory is ``$TETHER_CACHE_DIR`` if set (an empty value turns the cache
off), else ``$XDG_CACHE_HOME/tether`` or ``~/.cache/tether``. Writing is best effort: a
read-only or full disk just means no cache. Only vocabularies of at least
``MIN_TOKENS`` tokens are worth caching (smaller ones build in milliseconds); the
``MAX_FILES`` most recently used files are kept (about 20 MB each for 262k tokens).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.tokens.trie import TokenTrie

FORMAT = "tether-trie-cache-1"  # bump when the layout of TokenTrie or of a saved index changes
MIN_TOKENS = 32768
MAX_FILES = 8  # the least recently used files beyond these are deleted after each save
_FIELDS = ("byte", "token", "end", "depth")
_DTYPES = {"byte": np.dtype(np.uint8), "token": np.dtype(np.int32), "end": np.dtype(np.int32),
           "depth": np.dtype(np.int32), "dup_ids": np.dtype(np.int32),
           "dup_vals": np.dtype(np.int32), "meta": np.dtype(np.int64)}


def cache_dir() -> Path | None:
    """The directory of the trie cache, or None when the cache is turned off."""
    root = os.environ.get("TETHER_CACHE_DIR")
    if root is not None:
        return Path(root) / "tries" if root else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tether" / "tries"


def cache_path(key: str) -> Path | None:
    """The file that holds ``key`` (its sha256 names it), or None when the cache is off."""
    root = cache_dir()
    if root is None:
        return None
    return root / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".npz")


def save(key: str, tries: Mapping[str, TokenTrie],
         arrays: Mapping[str, NDArray[Any]] = {}) -> Path | None:
    """Write ``tries`` and ``arrays`` under ``key``; return the file, or None if not written.

    Names must not contain ``.`` or ``/``. Errors of the file system are swallowed (the
    cache is an optimisation); a concurrent writer of the same key is harmless (each
    writes its own temporary file and renames it over the same content).
    """
    path = cache_path(key)
    if path is None:
        return None
    out: dict[str, NDArray[Any]] = {}
    for name, trie in tries.items():
        dup_ids = np.flatnonzero(trie.dup_next >= 0).astype(np.int32)
        out.update({f"t.{name}.{f}": getattr(trie, f) for f in _FIELDS})
        out[f"t.{name}.dup_ids"] = dup_ids
        out[f"t.{name}.dup_vals"] = trie.dup_next[dup_ids]
        out[f"t.{name}.meta"] = np.array([trie.max_depth, trie.n_nodes, trie.vocab_size], np.int64)
    out.update({f"a.{name}": np.ascontiguousarray(a) for name, a in arrays.items()})
    out["format"] = np.frombuffer(FORMAT.encode(), np.uint8)
    out["key"] = np.frombuffer(key.encode(), np.uint8)
    out["crc"] = np.array([_crc(out)], np.int64)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as f:
            np.savez(f, **out)  # type: ignore[arg-type]  # stub: **out could bind allow_pickle
        os.replace(tmp, path)
        _evict(path.parent)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return None
    return path


def load(key: str, vocab_size: int, fingerprint: str = ""
         ) -> tuple[dict[str, TokenTrie], dict[str, NDArray[Any]]] | None:
    """The tries and arrays saved under ``key``, or None (no file, or one that fails a check).

    ``vocab_size`` must be every saved trie's; the loaded tries get ``fingerprint``.
    """
    path = cache_path(key)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {name: npz[name] for name in npz.files}
    except Exception:  # noqa: BLE001  a damaged file makes zipfile/zlib/numpy raise many kinds
        return None
    if (_text(data.get("format")) != FORMAT or _text(data.get("key")) != key
            or "crc" not in data):
        return None
    try:
        os.utime(path)  # recently used: kept by _evict
    except OSError:  # a read-only cache is still read
        pass
    crc = data.pop("crc")
    if crc.shape != (1,) or crc.dtype != np.int64 or int(crc[0]) != _crc(data):
        return None
    tries: dict[str, TokenTrie] = {}
    arrays: dict[str, NDArray[Any]] = {}
    names = {n.split(".")[1] for n in data if n.startswith("t.")}
    for name in names:
        trie = _trie(data, name, vocab_size, fingerprint)
        if trie is None:
            return None
        tries[name] = trie
    for n, a in data.items():
        if n.startswith("a."):
            arrays[n[2:]] = a
    return tries, arrays


def valid_layout(byte: NDArray[Any], token: NDArray[Any], dup_next: NDArray[Any],
                 end: NDArray[Any], depth: NDArray[Any], max_depth: int,
                 vocab_size: int) -> bool:
    """True if the arrays are safe for the walk kernels: dtypes and shapes of a TokenTrie;
    node 0 the root (depth 0, ``end`` = all nodes); every other node ``1 <= depth <=
    max_depth``, one deeper at most than the node before, with ``p < end[p] <= n`` (a
    walk always moves forward); token ids in ``[-1, vocab_size)``; ``dup_next`` chains
    ascending (no cycle) within the vocabulary."""
    n = len(byte)
    if not (n >= 1 and byte.dtype == np.uint8 and byte.shape == (n,)
            and all(a.dtype == np.int32 and a.shape == (n,) and a.flags.c_contiguous
                    for a in (token, end, depth))
            and dup_next.dtype == np.int32 and dup_next.shape == (vocab_size,)
            and byte.flags.c_contiguous and dup_next.flags.c_contiguous):
        return False
    if depth[0] != 0 or end[0] != n or not 0 <= max_depth < 2**31:
        return False
    if n > 1:
        d = depth[1:]
        if d.min() < 1 or d.max() > max_depth or (np.diff(depth) > 1).any():
            return False
        if (end[1:] <= np.arange(1, n)).any() or end.max() > n:
            return False
    if token.min() < -1 or token.max() >= vocab_size:
        return False
    if vocab_size:
        links = np.flatnonzero(dup_next != -1)
        if len(links) and ((dup_next[links] <= links).any() or dup_next.max() >= vocab_size):
            return False
    return True


def _trie(data: Mapping[str, NDArray[Any]], name: str, vocab_size: int,
          fingerprint: str) -> TokenTrie | None:
    part = {}
    for f, dtype in _DTYPES.items():
        a = data.get(f"t.{name}.{f}")
        if a is None or a.dtype != dtype or a.ndim != 1:
            return None
        part[f] = a
    meta = part["meta"]
    if meta.shape != (3,) or int(meta[2]) != vocab_size:
        return None
    max_depth, n_nodes = int(meta[0]), int(meta[1])
    ids, vals = part["dup_ids"], part["dup_vals"]
    if ids.shape != vals.shape or (len(ids) and (ids.min() < 0 or ids.max() >= vocab_size)):
        return None
    dup_next = np.full(vocab_size, -1, np.int32)
    dup_next[ids] = vals
    if n_nodes != len(part["byte"]) or not valid_layout(
            part["byte"], part["token"], dup_next, part["end"], part["depth"], max_depth,
            vocab_size):
        return None
    return TokenTrie(part["byte"], part["token"], dup_next, part["end"], part["depth"],
                     max_depth, n_nodes, vocab_size, fingerprint)


def _evict(root: Path) -> None:
    """Delete the least recently used ``.npz`` files of ``root`` beyond ``MAX_FILES``."""
    files = []
    for f in root.glob("*.npz"):
        try:
            files.append((f.stat().st_mtime_ns, f))
        except OSError:  # deleted meanwhile by another process
            continue
    for _, f in sorted(files, reverse=True)[MAX_FILES:]:
        f.unlink(missing_ok=True)


def _crc(arrays: Mapping[str, NDArray[Any]]) -> int:
    crc = 0
    for name in sorted(arrays):
        a = arrays[name]
        crc = zlib.crc32(f"{name} {a.dtype.str} {a.shape}".encode(), crc)
        crc = zlib.crc32(np.ascontiguousarray(a).data, crc)
    return crc


def _text(a: NDArray[Any] | None) -> str | None:
    if a is None or a.dtype != np.uint8 or a.ndim != 1:
        return None
    return a.tobytes().decode("utf-8", "replace")
