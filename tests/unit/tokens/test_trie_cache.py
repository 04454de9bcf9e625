"""The on-disk trie cache: round trip, and every damaged or foreign file is a miss.

Each test points ``TETHER_CACHE_DIR`` at its own temporary directory.
"""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tether.engine.slices import VocabIndex
from tether.tokens import Vocabulary, trie_cache
from tether.tokens.trie import TokenTrie, build_trie

TOKENS = [b"ab", b"a", b"", b"b", b"ab", b"abc", b"\x00", b"xyz" * 7]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path))
    return tmp_path / "tries"


def same(a: TokenTrie, b: TokenTrie) -> None:
    for f in ("byte", "token", "dup_next", "end", "depth"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert (a.max_depth, a.n_nodes, a.vocab_size) == (b.max_depth, b.n_nodes, b.vocab_size)


def test_round_trip(cache_dir: Path) -> None:
    trie = build_trie(TOKENS, {2})
    extra = np.arange(5, dtype=np.uint32)
    path = trie_cache.save("k1", {"full": trie}, {"extra": extra})
    assert path is not None and path.parent == cache_dir and path.is_file()
    got = trie_cache.load("k1", len(TOKENS), "fp")
    assert got is not None
    tries, arrays = got
    same(tries["full"], trie)
    assert tries["full"].fingerprint == "fp"
    assert np.array_equal(arrays["extra"], extra) and arrays["extra"].dtype == np.uint32
    assert not list(cache_dir.glob("*.tmp"))


def test_misses() -> None:
    assert trie_cache.load("absent", 3) is None
    trie_cache.save("k", {"full": build_trie(TOKENS)})
    assert trie_cache.load("k", len(TOKENS) + 1) is None  # another vocabulary size


def test_least_recently_used_files_are_evicted(cache_dir: Path) -> None:
    trie = build_trie(TOKENS)
    for k in range(trie_cache.MAX_FILES):
        trie_cache.save(f"k{k}", {"full": trie})
    assert trie_cache.load("k0", len(TOKENS)) is not None  # k0 is now the most recent
    trie_cache.save("new", {"full": trie})
    left = {p.name for p in cache_dir.glob("*.npz")}
    assert len(left) == trie_cache.MAX_FILES
    path = trie_cache.cache_path  # the oldest unused one, k1, went
    assert path("k1").name not in left  # type: ignore[union-attr]
    assert {path(k).name for k in ("k0", "new")} <= left  # type: ignore[union-attr]


def test_read_only_cache_is_read(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trie_cache.save("k", {"full": build_trie(TOKENS)})

    def refuse(*args: object) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(trie_cache.os, "utime", refuse)
    assert trie_cache.load("k", len(TOKENS)) is not None


def test_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_CACHE_DIR", "")
    assert trie_cache.cache_dir() is None
    assert trie_cache.save("k", {"full": build_trie(TOKENS)}) is None
    assert trie_cache.load("k", len(TOKENS)) is None


def test_unwritable_directory_is_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a directory")
    monkeypatch.setenv("TETHER_CACHE_DIR", str(blocker))
    assert trie_cache.save("k", {"full": build_trie(TOKENS)}) is None
    assert trie_cache.load("k", len(TOKENS)) is None


def test_damaged_files_are_misses() -> None:
    path = trie_cache.save("k", {"full": build_trie(TOKENS)})
    assert path is not None
    good = path.read_bytes()
    cases = {
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "not a zip": b"\x93NUMPY" + good[6:100],
    }
    for i in range(0, len(good), max(1, len(good) // 40)):  # one flipped byte anywhere
        bad = bytearray(good)
        bad[i] ^= 0x55
        cases[f"flip {i}"] = bytes(bad)
    for name, data in cases.items():
        path.write_bytes(data)
        got = trie_cache.load("k", len(TOKENS))
        if got is not None:  # a flip in zip padding or a header field nobody reads
            same(got[0]["full"], build_trie(TOKENS))
        else:
            assert name  # a miss: the caller rebuilds
    path.write_bytes(good)
    other = path.with_name(trie_cache.cache_path("other").name)  # type: ignore[union-attr]
    path.rename(other)
    assert trie_cache.load("other", len(TOKENS)) is None  # the stored key must match


def broken(trie: TokenTrie, **fields: object) -> TokenTrie:
    return replace(trie, **fields)  # type: ignore[arg-type]


def test_unsafe_layouts_are_misses() -> None:
    """A file with a valid CRC but arrays the walk kernels could run off, or loop on."""
    t = build_trie(TOKENS)
    n = t.n_nodes
    end_back = t.end.copy()
    end_back[2] = 2
    end_far = t.end.copy()
    end_far[1] = n + 1
    deep = t.depth.copy()
    deep[-1] = t.max_depth + 1
    jump = t.depth.copy()
    jump[1] = 3
    zero = t.depth.copy()
    zero[2] = 0
    tok = t.token.copy()
    tok[1] = len(TOKENS)
    cycle = t.dup_next.copy()
    cycle[4] = 0
    far_dup = t.dup_next.copy()
    far_dup[0] = len(TOKENS)
    for bad in [broken(t, end=end_back), broken(t, end=end_far), broken(t, depth=deep),
                broken(t, depth=jump), broken(t, depth=zero), broken(t, token=tok),
                broken(t, dup_next=cycle), broken(t, dup_next=far_dup),
                broken(t, byte=t.byte.astype(np.int32)), broken(t, n_nodes=n + 1),
                broken(t, max_depth=-1)]:
        trie_cache.save("k", {"full": bad})
        assert trie_cache.load("k", len(TOKENS)) is None
    trie_cache.save("k", {"full": t})
    assert trie_cache.load("k", len(TOKENS)) is not None


def big_vocabulary() -> Vocabulary:
    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b' ab"\\\n\xc3\xa9\xe2\x82\xac\xff', np.uint8)
    tokens = [bytes(alphabet[rng.integers(0, len(alphabet), rng.integers(0, 12))])
              for _ in range(trie_cache.MIN_TOKENS + 100)]
    return Vocabulary.from_bytes(tokens, eos_ids=[3], special_ids=[5, 9])


def index_arrays(vi: VocabIndex) -> list[np.ndarray]:  # type: ignore[type-arg]
    out = [vi._text_ids, vi.parts.byte, vi.parts.end, vi.parts.token, vi.parts.depth,
           vi.dup_next, *vi.union]
    for t in [vi.trie, vi.rest, *(s.trie for s in vi.slices)]:
        out += [t.byte, t.token, t.dup_next, t.end, t.depth, np.array([t.max_depth, t.n_nodes])]
    out += [np.array([s.lo, s.hi, s.n_tokens]) for s in vi.slices] + [s.mask for s in vi.slices]
    return out


def test_vocab_index_from_cache_equals_a_build(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = big_vocabulary()
    monkeypatch.setenv("TETHER_CACHE_DIR", "")
    built = VocabIndex(vocab)
    monkeypatch.setenv("TETHER_CACHE_DIR", str(cache_dir.parent))
    first = VocabIndex(vocab)  # builds and writes the file
    files = list(cache_dir.glob("*.npz"))
    assert len(files) == 1
    calls = []
    real_build = VocabIndex._build
    monkeypatch.setattr(VocabIndex, "_build", lambda self, *a: calls.append(1) or real_build(self, *a))
    second = VocabIndex(vocab)  # reads it
    assert calls == []
    for a, b, c in zip(index_arrays(built), index_arrays(first), index_arrays(second), strict=True):
        assert a.dtype == b.dtype == c.dtype and np.array_equal(a, b) and np.array_equal(a, c)
    assert second.trie.fingerprint == vocab.fingerprint and second.slice_tops == built.slice_tops
    # a damaged file is rebuilt (and rewritten), never trusted
    files[0].write_bytes(files[0].read_bytes()[:1000])
    third = VocabIndex(vocab)
    assert calls == [1]
    for a, b in zip(index_arrays(built), index_arrays(third), strict=True):
        assert np.array_equal(a, b)
    assert zipfile.is_zipfile(files[0])
    VocabIndex(vocab)
    assert calls == [1]
