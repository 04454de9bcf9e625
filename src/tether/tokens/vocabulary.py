"""Vocabulary: token id → the exact raw bytes the model emits for it.

1. Read the tokenizer's token texts from their source (GGUF metadata, a loaded
   llama.cpp model, a Hugging Face tokenizer, a tiktoken rank file).
2. Undo the source's text encoding: SentencePiece ``▁`` → space and ``<0xNN>`` byte
   fallback, the GPT-2 byte-to-unicode map of byte-level BPE; control tokens get ``b""``.
3. Keep EOS ids, special ids and the logits width apart from the bytes, and hash it all
   into a ``fingerprint`` that keys every cache built on the vocabulary.

Getting a single token wrong silently breaks every constraint that uses it, so the
conformance tests compare each token against the tokenizer's own decoding.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, NewType, cast

import numpy as np
from numpy.typing import NDArray

from tether.errors import VocabularyError, limited

TokenId = NewType("TokenId", int)

# Texts of end-of-generation tokens. llama.cpp (llama-vocab.cpp) turns tokens with these
# texts into CONTROL tokens that end generation, whatever type the GGUF gives them.
_EOG_TEXTS = frozenset(
    {
        "<end_of_turn>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|endoftext|>",
        "<|return|>",
        "<|call|>",
        "<EOT>",
        "_<EOT>",
        "<end_of_utterance>",
        "</s>",
        "<eos>",
        "<|end_of_text|>",
    }
)


class Vocabulary:
    """The bytes of every token of one model, plus its EOS and special tokens.

    Attributes:
        tokens: ``tokens[i]`` is the exact bytes token ``i`` contributes to the output;
            ``b""`` for control tokens (BOS, EOS, padding, unused slots).
        eos_ids: the tokens that end generation (EOS and end-of-turn tokens).
        special_ids: tokens that are never allowed unless a grammar names them: every
            control token, EOS included (the engine allows EOS apart, at accepting states).
        n_logits: width of the model's logits row, ``>= size``; rows ``>= size`` are
            padding and never allowed.
        bos_id: the beginning-of-sequence token, or None.
        special_names: the text of each special token (``{1: "<eos>", ...}``), so that
            grammars can name them.
        name: where the vocabulary came from (for messages).

    A Vocabulary is immutable by convention: build a new one instead of editing
    ``tokens``; the fingerprint is computed once.
    """

    __slots__ = ("tokens", "eos_ids", "special_ids", "n_logits", "bos_id", "special_names",
                 "name", "__dict__")

    def __init__(
        self,
        tokens: Sequence[bytes],
        *,
        eos_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
        n_logits: int | None = None,
        bos_id: int | None = None,
        special_names: Mapping[int, str] | None = None,
        name: str = "",
    ) -> None:
        if isinstance(tokens, str | bytes) or not isinstance(tokens, Iterable):
            raise VocabularyError(f"tokens must be a sequence of bytes; got {type(tokens).__name__}")
        self.tokens: list[bytes] = _tokens(tokens)
        size = len(self.tokens)
        self.eos_ids: tuple[int, ...] = tuple(sorted({_int(i, "eos id") for i in eos_ids}))
        self.special_ids: frozenset[int] = frozenset(_int(i, "special id") for i in special_ids)
        self.n_logits: int = size if n_logits is None else _int(n_logits, "n_logits")
        self.bos_id = None if bos_id is None else _int(bos_id, "bos_id")
        self.special_names: dict[int, str] = dict(special_names or {})
        self.name = name
        if self.n_logits < size:
            raise VocabularyError(
                f"n_logits ({self.n_logits}) is smaller than the vocabulary size ({size})"
            )
        for what, ids in (("eos id", self.eos_ids), ("special id", self.special_ids)):
            for i in ids:
                if not 0 <= i < size:
                    raise VocabularyError(f"{what} {i} is outside the vocabulary (size {size})")

    # -- basic access ---------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of token ids (``len(tokens)``); ids ``size .. n_logits-1`` are padding."""
        return len(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def token_bytes(self, token: int) -> bytes:
        """The bytes of ``token``; ``b""`` for control tokens.

        Raises:
            VocabularyError (a ValueError): ``token`` is not an integer id of this vocabulary.
        """
        t = _int(token, "token id")
        if not 0 <= t < len(self.tokens):
            raise VocabularyError(f"token id {t} is outside the vocabulary (size {len(self.tokens)})")
        return self.tokens[t]

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``token_ids`` (special tokens contribute nothing).

        Raises:
            VocabularyError: an id that is not an integer of this vocabulary (a negative
                id would otherwise index from the end).
        """
        tokens = self.tokens
        n = len(tokens)
        out = []
        for t in token_ids:
            if type(t) is not int or not 0 <= t < n:
                t = _int(t, "token id")
                if not 0 <= t < n:
                    raise VocabularyError(f"token id {t} is outside the vocabulary (size {n})")
            out.append(tokens[t])
        return b"".join(out)

    def special_id(self, text: str) -> int:
        """The id of the special token written ``text`` (e.g. ``"<end_of_turn>"``).

        Raises:
            KeyError: naming the text, if no special token has it.
        """
        for i, name in self.special_names.items():
            if name == text:
                return i
        raise KeyError(f"no special token {text!r} in vocabulary {self.name or '(unnamed)'}")

    @cached_property
    def token_lengths(self) -> NDArray[np.int64]:
        """``int64[size]``: the byte length of each token (computed once; do not edit)."""
        lens = np.fromiter(map(len, self.tokens), np.int64, len(self.tokens))
        lens.flags.writeable = False
        return lens

    @cached_property
    def fingerprint(self) -> str:
        """Hex digest of the bytes, EOS/special ids and logits width (cache key)."""
        h = hashlib.sha256()
        h.update(f"tether-vocab-1 {self.size} {self.n_logits} {self.eos_ids}".encode())
        h.update(repr(sorted(self.special_ids)).encode())
        h.update(self.token_lengths.astype("<u4").tobytes())
        h.update(b"".join(self.tokens))
        return h.hexdigest()[:32]

    def __repr__(self) -> str:
        return (
            f"Vocabulary({self.name or 'unnamed'}: {self.size} tokens, n_logits={self.n_logits}, "
            f"eos={list(self.eos_ids)}, {len(self.special_ids)} special)"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    # -- constructors -----------------------------------------------------------------

    @classmethod
    def from_bytes(
        cls,
        tokens: Sequence[bytes],
        *,
        eos_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
        n_logits: int | None = None,
        bos_id: int | None = None,
        name: str = "bytes",
    ) -> Vocabulary:
        """A vocabulary from explicit token bytes (tests, custom tokenizers).

        Empty tokens are special. ``eos_ids`` are added to ``special_ids``.
        """
        if isinstance(tokens, str | bytes) or not isinstance(tokens, Iterable):
            raise VocabularyError(f"tokens must be a sequence of bytes; got {type(tokens).__name__}")
        tokens = _tokens(tokens)
        special = set(special_ids) | set(eos_ids)
        lens = np.fromiter(map(len, tokens), np.int64, len(tokens))
        special.update(np.flatnonzero(lens == 0).tolist())
        vocab = cls(tokens, eos_ids=eos_ids, special_ids=special, n_logits=n_logits,
                    bos_id=bos_id, name=name)
        lens.flags.writeable = False
        vocab.__dict__["token_lengths"] = lens  # the same bytes: no second count
        return vocab

    @classmethod
    def from_gguf(cls, path: str | Path, *, n_logits: int | None = None) -> Vocabulary:
        """Read the tokenizer of a GGUF model file, decoding as llama.cpp does.

        Supports ``tokenizer.ggml.model`` ``llama``/``t5`` (SentencePiece: ``▁`` → space,
        BYTE tokens ``<0xNN>`` → that byte) and ``gpt2`` (byte-level BPE). Control,
        unknown and unused tokens get ``b""``; user-defined tokens keep their text.
        Reads only the metadata (about 0.3 s for 262,144 tokens).

        Raises:
            VocabularyError: unknown tokenizer model, or a malformed file.
        """
        from tether.tokens._gguf import read_gguf_metadata

        meta = read_gguf_metadata(path, prefix="tokenizer.")
        try:
            model = meta["tokenizer.ggml.model"].decode()
            texts: list[bytes] = meta["tokenizer.ggml.tokens"]
        except KeyError as exc:
            raise VocabularyError(f"{path}: GGUF metadata has no {exc.args[0]}") from None
        types = meta.get("tokenizer.ggml.token_type")
        types_list = [1] * len(texts) if types is None else types.tolist()
        if model in ("llama", "t5"):
            decode_normal = _spm_piece
        elif model == "gpt2":
            byte_map = _gpt2_unicode_to_byte()

            def decode_normal(raw: bytes) -> bytes:
                return _byte_level_piece(raw.decode("utf-8"), byte_map, raw)
        else:
            raise VocabularyError(
                f"{path}: tokenizer model {model!r} is not supported (llama, t5, gpt2 are)"
            )
        tokens: list[bytes] = []
        special: dict[int, str] = {}
        eog_texts = {t.encode() for t in _EOG_TEXTS}
        for i, (raw, kind) in enumerate(zip(texts, types_list, strict=True)):
            if raw in eog_texts:
                kind = 3  # llama.cpp makes these CONTROL (end of generation)
            if kind == 1:  # NORMAL
                tokens.append(decode_normal(raw))
            elif kind == 6:  # BYTE: <0xNN>
                b = _byte_token(raw) if model != "gpt2" else None
                tokens.append(b if b is not None else decode_normal(raw))
            elif kind == 4:  # USER_DEFINED: the text as is
                tokens.append(raw)
            else:  # CONTROL, UNKNOWN, UNUSED
                tokens.append(b"")
                special[i] = raw.decode("utf-8", "replace")
        eos = {int(meta[k]) for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                      "tokenizer.ggml.eom_token_id") if k in meta}
        eos |= {i for i, text in special.items() if text in _EOG_TEXTS}
        bos = meta.get("tokenizer.ggml.bos_token_id")
        return cls(tokens, eos_ids=eos, special_ids=special, n_logits=n_logits,
                   bos_id=None if bos is None else int(bos), special_names=special,
                   name=f"gguf:{Path(path).name}")

    @classmethod
    def from_llama(cls, llama: Any) -> Vocabulary:
        """The vocabulary of a loaded llama.cpp model, from ``llama_token_to_piece``.

        ``llama`` is a ``llama_cpp.Llama``, a ``LlamaCppModel`` or a raw ``llama_model``
        pointer. Each token is
        rendered with a buffer large enough for any token (``Llama.detokenize`` silently
        drops pieces longer than 32 bytes) and ``special=False``, so control tokens give
        ``b""``, exactly what llama.cpp writes to the output. Costs one C call per token
        (about 0.5 s for 262,144 tokens).
        """
        import ctypes

        import llama_cpp

        inner = getattr(llama, "_model", None)
        if inner is not None and hasattr(inner, "model"):  # llama_cpp.Llama
            model = inner.model
        elif inner is not None:  # tether's LlamaCppModel
            model = inner
        else:  # a raw llama_model pointer
            model = llama
        vocab = llama_cpp.llama_model_get_vocab(model)
        n = llama_cpp.llama_vocab_n_tokens(vocab)
        size = 256
        buf = ctypes.create_string_buffer(size)
        piece = llama_cpp.llama_token_to_piece
        tokens: list[bytes] = []
        special: dict[int, str] = {}
        control = (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
                   | llama_cpp.LLAMA_TOKEN_ATTR_UNUSED | llama_cpp.LLAMA_TOKEN_ATTR_UNDEFINED)
        for i in range(n):
            k = piece(vocab, i, buf, size, 0, False)
            if k < 0:  # buffer too small: -k is the length needed
                size = -k + 16
                buf = ctypes.create_string_buffer(size)
                k = piece(vocab, i, buf, size, 0, False)
            tokens.append(buf.raw[:k])
            attr = llama_cpp.llama_vocab_get_attr(vocab, i)
            if k == 0 or attr & control:
                text = llama_cpp.llama_vocab_get_text(vocab, i)
                special[i] = (text or b"").decode("utf-8", "replace")
        eos = {i for i in special if llama_cpp.llama_vocab_is_eog(vocab, i)}
        for fn in ("llama_vocab_eos", "llama_vocab_eot"):
            t = getattr(llama_cpp, fn)(vocab)
            if 0 <= t < n:
                eos.add(t)
        bos = llama_cpp.llama_vocab_bos(vocab)
        n_logits = n  # llama.cpp's logits row has exactly n_vocab entries
        return cls(tokens, eos_ids=eos, special_ids=set(special) | eos, n_logits=n_logits,
                   bos_id=bos if 0 <= bos < n else None, special_names=special, name="llama.cpp")

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        *,
        eos_ids: Iterable[int] | None = None,
        n_logits: int | None = None,
    ) -> Vocabulary:
        """The vocabulary of a Hugging Face tokenizer.

        ``tokenizer`` is a ``tokenizers.Tokenizer``, a transformers fast tokenizer, or a
        path to ``tokenizer.json``. Handles byte-level BPE (GPT-2 byte map), SentencePiece
        style (``▁`` → space, ``<0xNN>`` byte fallback) and added tokens (special added
        tokens get ``b""``; normal ones their text). EOS: ``eos_ids`` if given, else the
        transformers tokenizer's ``eos_token_id``, else special tokens with a usual EOS text.

        Raises:
            VocabularyError: a tokenizer whose model/decoder tether cannot map to bytes.
        """
        hf_eos: list[int] = []
        if isinstance(tokenizer, str | Path):
            spec = json.loads(Path(tokenizer).read_text(encoding="utf-8"))
            name = f"hf:{Path(tokenizer).name}"
        else:
            backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
            spec = _hf_spec_from_api(backend) or json.loads(backend.to_str())
            name = f"hf:{getattr(tokenizer, 'name_or_path', '') or 'tokenizer'}"
            eid = getattr(tokenizer, "eos_token_id", None)
            if isinstance(eid, int):
                hf_eos.append(eid)
            gen_eos = getattr(getattr(tokenizer, "generation_config", None), "eos_token_id", None)
            if isinstance(gen_eos, int):
                hf_eos.append(gen_eos)
        model = spec.get("model") or {}
        vocab: dict[str, int] = model.get("vocab") or {}
        if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
            vocab = {piece: i for i, (piece, _score) in enumerate(vocab)}
        added = {int(a["id"]): a for a in spec.get("added_tokens") or []}
        size = max([*vocab.values(), *added, -1]) + 1
        kinds = _decoder_kinds(spec.get("decoder"))
        byte_level = "ByteLevel" in kinds or (spec.get("pre_tokenizer") or {}).get("type") == "ByteLevel"
        metaspace = "Metaspace" in kinds or "Replace▁" in kinds or (
            model.get("type") == "Unigram" and not byte_level
        )
        byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in kinds
        if "WordPiece" in kinds or model.get("type") == "WordPiece":
            raise VocabularyError(
                f"{name}: WordPiece tokenizers (BERT) insert spaces between words when "
                "decoding, so their tokens have no exact bytes"
            )
        if not (byte_level or metaspace or byte_fallback):
            if kinds:
                raise VocabularyError(f"{name}: decoder {sorted(kinds)} cannot be mapped to bytes")
            # no decoder: tokens are the text itself (e.g. a character-level tokenizer)
        byte_map = _gpt2_unicode_to_byte() if byte_level else {}
        tokens: list[bytes] = [b""] * size
        special: dict[int, str] = {}
        for piece, i in vocab.items():
            if byte_level:
                tokens[i] = _byte_level_piece(piece, byte_map, piece.encode())
            else:
                # only a 6-character piece can be "<0xNN>" (the check is costly per piece)
                b = _byte_token(piece.encode()) if byte_fallback and len(piece) == 6 else None
                if b is None:
                    b = piece.replace("▁", " ").encode() if metaspace else piece.encode()
                tokens[i] = b
        for i, a in added.items():
            if a.get("special"):
                tokens[i] = b""
                special[i] = a["content"]
            else:
                tokens[i] = a["content"].encode()
        present = set(vocab.values()) | set(added)
        for i in range(size):  # holes in the id space are never allowed
            if i not in present:
                special[i] = ""
        if eos_ids is None:
            eos_ids = hf_eos or [i for i, t in special.items() if t in _EOG_TEXTS]
        eos = set(eos_ids)
        return cls(tokens, eos_ids=eos, special_ids=set(special) | eos, n_logits=n_logits,
                   special_names=special, name=name)

    @classmethod
    def from_tiktoken(
        cls,
        path_or_ranks: str | Path | Mapping[bytes, int],
        *,
        special_tokens: Mapping[str, int] | None = None,
        eos_ids: Iterable[int] | None = None,
        n_logits: int | None = None,
    ) -> Vocabulary:
        """A vocabulary from a tiktoken BPE rank file (``base64-token rank`` per line).

        ``path_or_ranks`` may also be the ``{bytes: rank}`` dict itself. Ranks are token
        ids; ``special_tokens`` (``{"<|endoftext|>": 100257}``) get ``b""``; gaps in the
        id space are special. EOS: ``eos_ids``, else special tokens with an EOS text.
        """
        if isinstance(path_or_ranks, Mapping):
            ranks = dict(path_or_ranks)
            name = "tiktoken"
        else:
            ranks = {}
            path = Path(path_or_ranks)
            for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    b64, rank_text = line.split()
                    ranks[base64.b64decode(b64)] = int(rank_text)
                except ValueError:
                    raise VocabularyError(
                        f"{path}:{lineno}: expected '<base64 token> <rank>', got {line[:60]!r}"
                    ) from None
            name = f"tiktoken:{path.name}"
        specials = dict(special_tokens or {})
        size = max([*ranks.values(), *specials.values(), -1]) + 1
        tokens = [b""] * size
        present = [False] * size
        for tok, rank in ranks.items():
            tokens[rank] = tok
            present[rank] = True
        special = {i: text for text, i in specials.items()}
        special.update({i: "" for i in range(size) if not present[i] and i not in special})
        for i in special:
            tokens[i] = b""
        if eos_ids is None:
            eos_ids = [i for i, t in special.items() if t in _EOG_TEXTS]
        eos = set(eos_ids)
        return cls(tokens, eos_ids=eos, special_ids=set(special) | eos, n_logits=n_logits,
                   special_names=special, name=name)


# -- decoding helpers ------------------------------------------------------------------


def _tokens(tokens: Iterable[object]) -> list[bytes]:
    """Every token as ``bytes`` (a new list); a list of plain ``bytes`` is checked in C."""
    items = list(tokens)
    if set(map(type, items)) <= {bytes}:
        return cast("list[bytes]", items)  # every item was just checked to be bytes
    return [_token(t, i) for i, t in enumerate(items)]


def _token(value: object, i: int) -> bytes:
    """Token ``i``'s bytes: bytes-like only (``bytes(5)`` would be five zero bytes)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise VocabularyError(f"token {i} must be bytes; got {type(value).__name__}")


def _int(value: object, what: str) -> int:
    """``value`` as an id: a Python or numpy integer, not a bool."""
    if type(value) is int:  # the common case, one test (a bool's type is bool)
        return value
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        return int(value)
    raise VocabularyError(f"{what} must be an integer; got {type(value).__name__} {limited(value, 40)}")


def _byte_token(raw: bytes) -> bytes | None:
    """``b"<0x0A>"`` → ``b"\\n"``; None if ``raw`` is not a byte-fallback token."""
    if len(raw) == 6 and raw.startswith(b"<0x") and raw.endswith(b">"):
        try:
            return bytes([int(raw[3:5], 16)])
        except ValueError:
            return None
    return None


def _spm_piece(raw: bytes) -> bytes:
    """A SentencePiece piece: ``▁`` (U+2581) is a space."""
    return raw.replace(b"\xe2\x96\x81", b" ")


def _gpt2_unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: printable stand-in character → byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: b for b in keep}
    n = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = 256 + n
            n += 1
    return {chr(c): b for b, c in mapping.items()}


def _byte_level_piece(piece: str, byte_map: dict[str, int], fallback: bytes) -> bytes:
    """Map a byte-level BPE piece back to bytes (characters outside the map kept as UTF-8)."""
    try:
        return bytes(byte_map[c] for c in piece)
    except KeyError:
        return b"".join(bytes([byte_map[c]]) if c in byte_map else c.encode() for c in piece)


def _hf_spec_from_api(backend: Any) -> dict[str, Any] | None:
    """The parts of ``tokenizer.json`` that ``from_hf`` reads (model type, vocab and
    ``byte_fallback``, added tokens, decoder, pre-tokenizer), asked of a BPE
    ``tokenizers.Tokenizer`` directly: serialising the whole tokenizer (its merges) and
    parsing it back costs seconds for 262k tokens. None for anything else (the caller
    then reads the full JSON)."""
    try:
        from tokenizers import Tokenizer, models
    except ImportError:
        return None
    if not isinstance(backend, Tokenizer) or type(backend.model) is not models.BPE:
        return None
    model = backend.model
    added = [{"id": i, "content": a.content, "special": a.special}
             for i, a in backend.get_added_tokens_decoder().items()]
    parts = {}
    for name in ("decoder", "pre_tokenizer"):
        part = getattr(backend, name)
        parts[name] = None if part is None else json.loads(part.__getstate__())
    return {"model": {"type": "BPE", "vocab": backend.get_vocab(with_added_tokens=False),
                      "byte_fallback": bool(model.byte_fallback)},
            "added_tokens": added, **parts}


def _decoder_kinds(decoder: Mapping[str, Any] | None) -> set[str]:
    """The decoder step types of a tokenizer.json ``decoder`` (Sequence flattened)."""
    kinds: set[str] = set()
    if not decoder:
        return kinds
    kind = decoder.get("type", "")
    if kind == "Sequence":
        for d in decoder.get("decoders", []):
            kinds |= _decoder_kinds(d)
    elif kind == "Replace":
        pattern = decoder.get("pattern", {})
        if pattern.get("String") == "▁" and decoder.get("content") == " ":
            kinds.add("Replace▁")
        else:
            kinds.add("Replace")
    else:
        kinds.add(kind)
    return kinds
