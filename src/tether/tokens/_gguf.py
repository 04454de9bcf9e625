"""Read the key/value metadata of a GGUF file (the tokenizer lives there).

1. Check the ``GGUF`` magic and version, read the tensor and key counts.
2. Walk the key/value records in order, decoding scalars, strings and arrays.
3. Stop before the tensor descriptions: the weights are never touched.

Format: ggml's ``docs/gguf.md`` (little-endian; versions 2 and 3 use 64-bit counts).
This reads only the metadata (about 0.3 s for a 262,144-token vocabulary), where
``gguf.GGUFReader`` also maps every tensor (many seconds on a loaded small machine).
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any

from tether.errors import VocabularyError

# GGUF value types (gguf.GGUFValueType)
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1),
    1: ("<b", 1),
    2: ("<H", 2),
    3: ("<h", 2),
    4: ("<I", 4),
    5: ("<i", 4),
    6: ("<f", 4),
    7: ("<?", 1),
    10: ("<Q", 8),
    11: ("<q", 8),
    12: ("<d", 8),
}
_STRING, _ARRAY = 8, 9
_NUMPY_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4",
                 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}


def read_gguf_metadata(path: str | Path, *, prefix: str = "") -> dict[str, Any]:
    """Return the metadata of the GGUF file at ``path`` as a dict.

    Strings are returned as ``bytes`` (GGUF does not promise valid UTF-8: token texts
    may hold partial characters); numeric arrays as numpy arrays; string arrays as
    ``list[bytes]``. Only keys starting with ``prefix`` are decoded (the others are
    skipped), which keeps reading a tokenizer cheap.

    Raises:
        VocabularyError: if the file is not GGUF or is truncated.
    """
    import numpy as np

    path = Path(path)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        buf = memoryview(mm)
        try:
            if bytes(buf[:4]) != b"GGUF":
                raise VocabularyError(f"{path} is not a GGUF file (magic {bytes(buf[:4])!r})")
            (version,) = struct.unpack_from("<I", buf, 4)
            if version == 1:
                raise VocabularyError(f"{path}: GGUF version 1 is not supported (need 2 or 3)")
            _n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
            pos = 24
            out: dict[str, Any] = {}
            unpack_q = struct.Struct("<Q").unpack_from

            def read_string(p: int) -> tuple[bytes, int]:
                (n,) = unpack_q(buf, p)
                return bytes(buf[p + 8 : p + 8 + n]), p + 8 + n

            def skip_or_read(vtype: int, p: int, keep: bool) -> tuple[Any, int]:
                if vtype in _SCALARS:
                    fmt, size = _SCALARS[vtype]
                    return (struct.unpack_from(fmt, buf, p)[0] if keep else None), p + size
                if vtype == _STRING:
                    return read_string(p)
                if vtype == _ARRAY:
                    etype, count = struct.unpack_from("<IQ", buf, p)
                    p += 12
                    if etype in _SCALARS:
                        size = _SCALARS[etype][1]
                        arr = None
                        if keep:
                            arr = np.frombuffer(buf, _NUMPY_DTYPES[etype], count, p).copy()
                        return arr, p + size * count
                    if etype == _STRING:
                        items: list[bytes] = []
                        append = items.append
                        for _ in range(count):
                            (n,) = unpack_q(buf, p)
                            if keep:
                                append(bytes(buf[p + 8 : p + 8 + n]))
                            p += 8 + n
                        return (items if keep else None), p
                    values = []
                    for _ in range(count):
                        v, p = skip_or_read(etype, p, keep)
                        values.append(v)
                    return (values if keep else None), p
                raise VocabularyError(f"{path}: unknown GGUF value type {vtype} at byte {p}")

            for _ in range(n_kv):
                key_b, pos = read_string(pos)
                key = key_b.decode("utf-8", "replace")
                (vtype,) = struct.unpack_from("<I", buf, pos)
                keep = key.startswith(prefix)
                value, pos = skip_or_read(vtype, pos + 4, keep)
                if keep:
                    out[key] = value
            return out
        except struct.error as exc:
            raise VocabularyError(f"{path}: truncated GGUF metadata ({exc})") from None
        finally:
            buf.release()
