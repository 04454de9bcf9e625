"""Matcher: the decoding state of one output under a compiled constraint.

State: the lexer state inside the current lexeme, the parser node (an interned class of
Earley states), whether the current lexeme is still empty, and an Earley parser of the
node's class (pushed when the node changes, and only once a parser is needed: the
lexemes wait in ``_lag``). Per consumed token a history entry allows ``rollback``;
``copy`` shares nothing mutable (the parser copy is one list copy of its row stack).
``consume`` has a fast path for tokens whose move the tables already know (see the
engine README, "consume's fast path").

Decode-time methods never raise on bad input: ``consume`` returns False, leaves the
state unchanged and keeps a readable reason in ``.error``.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import completion
from tether.engine import walk as _walk
from tether.engine.tables import DEAD, TOKEN_MOVES_LIMIT, TOKEN_STEPS_LIMIT
from tether.errors import ConstraintError, TetherError, limited
from tether.tokens.bitmask import check_mask

if TYPE_CHECKING:
    from tether.engine.compiled import CompiledConstraint
    from tether.engine.slices import VocabIndex
    from tether.engine.walk import Walk
    from tether.tokens.vocabulary import Vocabulary


class Matcher:
    """Decoding state under a CompiledConstraint (create with ``CompiledConstraint.matcher()``).

    Attributes:
        error: why the last ``consume``/``consume_bytes`` was refused, else None.
        n_tokens: tokens consumed so far.
    """

    __slots__ = ("cc", "_ls", "_node", "_start", "_p", "_lag", "_rows", "_hist", "_eos",
                 "error", "_out_len", "_hint", "_vsize", "_info", "_token_steps",
                 "_token_moves", "_scratch", "_tokens", "_ascii_loops")

    def __init__(self, cc: CompiledConstraint) -> None:
        self.cc = cc
        self._node = cc.root_node
        self._ls = int(cc.steps.nstart[self._node])
        self._start = True
        self._p: Any = cc.new_parser()
        self._lag: list[int] = []  # lexemes scanned, not yet pushed on _p (see _parser)
        self._rows: int = self._p.n_rows  # rows of _p once _lag is pushed
        self._hist: list[tuple[int, int, bool, int, bool, int]] = []
        self._eos = False
        self.error: str | None = None
        self._out_len = 0
        self._hint: tuple[int, int] | None = None
        # consume's fast path (read-only, shared): see ``consume``
        self._vsize = cc.vocabulary.size
        self._info = _token_info(cc)
        self._ascii_loops = cc.steps.ascii_loops
        self._token_steps = cc.steps.token_steps
        self._token_moves = cc.steps.token_moves
        self._scratch: NDArray[np.int32] = _NO_SCRATCH  # the kernel's lexemes (this matcher's)
        self._tokens = cc.vocabulary.tokens

    # ---- state ----------------------------------------------------------------------------
    @property
    def n_tokens(self) -> int:
        return len(self._hist)

    @property
    def _parser(self) -> Any:
        """The Earley parser at this state (a member of the node's class)."""
        return self._parser_at_node()

    def _parser_at_node(self) -> Any:
        """``_parser``, after pushing the lexemes the moves left pending: a move only
        records the lexemes that change the node (``_lag``); the parser is needed only
        where a parser transition is not in the tables yet, or by the lookahead, so a
        decode through known entries pushes nothing (the pushes are the same, later)."""
        lag = self._lag
        if lag:
            st = self.cc.steps
            done = 0
            try:
                with self.cc.lock:
                    for a in lag:
                        ok = st.push_lexeme(self._p, a)
                        assert ok, "parser refused a lexeme the step tables accepted"
                        done += 1
            finally:
                del lag[:done]
        return self._p

    def copy(self) -> Matcher:
        """An independent matcher in the same state. Cost: O(tokens + parser rows) list copies."""
        m = Matcher.__new__(Matcher)
        m.cc, m._ls, m._node, m._start = self.cc, self._ls, self._node, self._start
        m._p = self._p.copy()
        m._lag = list(self._lag)
        m._rows = self._rows
        m._hist = list(self._hist)
        m._eos, m.error, m._out_len, m._hint = self._eos, self.error, self._out_len, self._hint
        m._vsize, m._info, m._token_steps = self._vsize, self._info, self._token_steps
        m._ascii_loops = self._ascii_loops
        m._token_moves, m._scratch, m._tokens = self._token_moves, _NO_SCRATCH, self._tokens
        return m

    def is_accepting(self) -> bool:
        """True if the output so far is complete (EOS would be allowed), or EOS was consumed."""
        if self._eos:
            return True
        return self._accepting_now()

    def _accepting_now(self) -> bool:
        cc = self.cc
        try:
            with cc.lock:
                return cc.is_accepting_at(self._ls, self._node, self._start,
                                          self._parser_at_node)
        except TetherError as e:  # a limit reached while stepping: not accepting, reason kept
            self.error = str(e)
            return False

    def is_finished(self) -> bool:
        """EOS consumed, or accepting with no byte able to follow."""
        if self._eos:
            return True
        return self._accepting_now() and not self.allowed_bytes()

    # ---- masks ----------------------------------------------------------------------------
    def mask_key(self) -> tuple[int, int, bool] | None:
        """The key of this state's mask in the constraint's mask cache, ``(mask state of
        the lexer state, node, at lexeme start)``; None after EOS (nothing is allowed)."""
        return None if self._eos else (self.cc.mask_state(self._ls), self._node, self._start)

    def start_mask(self, out: NDArray[np.uint32]) -> Walk:
        """``compute_masks``'s first half of a mask not in the cache (``out`` checked by the
        caller): see ``CompiledConstraint.start_mask``."""
        cc = self.cc
        return cc.start_mask((cc.mask_state(self._ls), self._node, self._start), out,
                             self._hint, raw=self._ls)

    def finish_mask(self, walk: Walk) -> None:
        """``compute_masks``'s second half, once ``walk`` is done (this matcher unmoved)."""
        cc = self.cc
        cc.finish_mask((cc.mask_state(self._ls), self._node, self._start), walk,
                       self._parser_at_node)

    def compute_mask(self, out: NDArray[np.uint32]) -> NDArray[np.uint32]:
        """Overwrite ``out`` (``uint32[ceil(V/32)]``) with the allowed next tokens; return it.

        EOS ids are allowed exactly when ``is_accepting()``; after EOS nothing is allowed.
        Raises ConstraintError (a ValueError; expected vs got) unless ``out`` is a
        writeable, C-contiguous one-dimensional ``uint32`` numpy array of ``ceil(V/32)``
        words: nothing else reaches the kernels.
        Cost: a cache lookup and copy when this state was seen before, else a trie walk.
        """
        # fast path: exact type, the interned dtype, shape, and C-contiguous + aligned +
        # writeable in one flag; anything else gets the full check (which raises or passes)
        if (type(out) is not np.ndarray or out.dtype is not _U32
                or out.shape != (self.cc.n_words,) or not out.flags.carray):
            check_mask(out, self.cc.vocabulary.size, ndim=1)
        if self._eos:
            out.fill(0)
            return out
        try:
            self.cc.mask_into(self._ls, self._node, self._start, self._parser_at_node, out,
                              self._hint)
        except TetherError as e:  # a limit reached while stepping: decode time never raises
            out.fill(0)
            self.error = str(e)
        return out

    # ---- moves ----------------------------------------------------------------------------
    def _step(self, b: int) -> bool:
        st = self.cc.steps
        s, c, pushes = st.step_detail(self._ls, self._node, b, self._parser_at_node, False)
        if s == DEAD:
            return False
        node = self._node
        for a, n2, _ in pushes:
            if n2 != node:  # pushed when the parser is needed (_parser_at_node)
                self._lag.append(a)
                self._rows += 1
                node = n2
        self._node = c
        self._ls = s
        self._start = bool(pushes) and pushes[-1][2] == 1
        return True

    def _save(self) -> tuple[int, int, bool, int, bool, int]:
        return (self._ls, self._node, self._start, self._rows, self._eos, self._out_len)

    def _restore(self, h: tuple[int, int, bool, int, bool, int]) -> None:
        self._ls, self._node, self._start, rows, self._eos, self._out_len = h
        self._hint = None
        done = self._p.n_rows
        if rows >= done:
            del self._lag[rows - done:]
        else:
            self._p.truncate(rows)
            self._lag.clear()
        self._rows = rows

    def consume(self, token: int) -> bool:
        """Advance by one token. Returns False (state unchanged, reason in ``.error``) if
        the token is not allowed here, or is not a token id (a Python or numpy integer;
        ``bool``, floats and the rest are refused). Never raises.

        Fast path: an ordinary token (not EOS, special or empty) whose bytes lead from
        the state through filled table entries moves exactly as the per-byte path would,
        in one step. Inside one lexeme (the common case: text in a string) the result
        depends on the lexer state alone and comes from the constraint's ``token_steps``;
        across lexemes it comes from ``token_moves`` (by lexer state and node); both are
        read without the lock (verified entries, pure functions of filled table entries,
        which never change). A miss runs the ``token_moves`` kernel under the lock and
        keeps its answer; anything it cannot decide (an entry to fill, a refusal) takes
        the per-byte path, which decides, fills and explains."""
        try:
            if type(token) is not int:
                t = token_id(token)
                if t is None:
                    self.error = f"token must be an integer id; got {_describe(token)}"
                    return False
                token = t
            if not self._eos and 0 <= token < self._vsize:
                info = self._info[token]
                if info:
                    ls0 = self._ls
                    key = ls0 * self._vsize + token
                    s = self._token_steps.get(key)
                    if s is not None:  # inside the lexeme: the lexer state alone moves
                        self._move_inside(ls0, s, info)
                        return True
                    if info < 0 and self._ascii_loops.get(ls0) and self._tokens[token].isascii():
                        self._move_inside(ls0, ls0, info)  # ASCII text in a string body
                        return True
                    move = self._token_moves.get((key, self._node))
                    if move is None:
                        move = self._moves_of(token, key)
                    if move is not None:
                        self._move(ls0, move, info)
                        return True
                    s = self._run_inside(token, key)
                    if s >= 0:
                        self._move_inside(ls0, s, info)
                        return True
            if token.bit_length() > 62:  # no vocabulary is this large; keep messages printable
                self.error = (f"token {_show_int(token)} is out of range (vocabulary size "
                              f"{self.cc.vocabulary.size})")
                return False
            with self.cc.lock:
                return self._consume(token)
        except TetherError as e:  # a limit reached while stepping
            self.error = f"token {limited(token, 40)}: {e}"
            return False
        except Exception as e:  # noqa: BLE001 -- decode time never raises
            self.error = f"internal error on token {limited(token, 40)}: {type(e).__name__}: {e}"
            return False

    def _moves_of(self, token: int, key: int) -> tuple[int, int, bool, tuple[int, ...]] | None:
        """``(lexer state, node, at lexeme start, lexemes to push)`` after ``token`` from
        this state, from the filled tables (``_kernels.token_moves`` under the lock: no
        entry is half written then), kept in ``token_steps`` (inside one lexeme) or
        ``token_moves``; None when the per-byte path must decide.

        Every token goes to the kernel: following a short one in Python first (a few
        ``ndarray.item`` reads per byte instead of a kernel call) was measured slower, the
        consume p50 on the dev schemas about 5 % above the kernel's alone."""
        global _token_moves
        cc = self.cc
        data = self._tokens[token]
        node = self._node
        lock = cc.lock
        out = self._scratch
        if _token_moves is None:
            _token_moves = (_walk._kernels or _walk.kernels()).token_moves
        if len(out) < 2 * len(data):
            out = self._scratch = np.empty(max(64, 2 * len(data)), np.int32)
        lock.acquire()
        try:
            st = cc.steps
            s, c, start, k, ended, a0, a1 = _token_moves(st.dfa.table, st.accid, st.lazyf,
                                                         st.trans, st.nstart, data, self._ls,
                                                         node, out)
        finally:
            lock.release()
        if s < 0:
            return None
        s = int(s)  # a Python int (plain Python kernels, JIT off, give numpy scalars)
        if not ended:
            steps = self._token_steps
            if len(steps) >= TOKEN_STEPS_LIMIT:
                steps.clear()
            steps[key] = s
            return s, node, False, ()
        if k <= 2:  # (no slice of ``out``: see the kernel)
            pushed: tuple[int, ...] = () if k == 0 else (int(a0),) if k == 1 else (int(a0), int(a1))
        else:
            pushed = tuple(out[:k].tolist())
        move = (s, int(c), start == 1, pushed)
        moves = self._token_moves
        if len(moves) >= TOKEN_MOVES_LIMIT:
            moves.clear()
        moves[key, node] = move
        return move

    def _run_inside(self, token: int, key: int) -> int:
        """The lexer state after ``token`` when its bytes stay inside the current lexeme,
        derived without the states between (``StepTables.run_inside``) and kept in
        ``token_steps``; -1 when a lexeme would end on the way, or the grammar has lazy
        terminals (the per-byte path decides). The per-byte path would make and fill a
        state per byte: a text token taken whole by a mask inside a lexeme of several
        live terminals (a key among named ones, an enum beside a string) crosses states
        no walk reached."""
        cc = self.cc
        st = cc.steps
        if st.lazy:
            return -1
        with cc.lock:
            s = st.run_inside(self._ls, self._tokens[token])
        if s >= 0:
            steps = self._token_steps
            if len(steps) >= TOKEN_STEPS_LIMIT:
                steps.clear()
            steps[key] = s
        return s

    def _move_inside(self, ls0: int, s: int, info: int) -> None:
        """Move to lexer state ``s`` after a token of ``info`` inside the current lexeme."""
        start0 = self._start
        out_len = self._out_len
        self._hist.append((ls0, self._node, start0, self._rows, False, out_len))
        if info > 0:
            self._hint = None
            self._out_len = out_len + info
        else:  # a text token inside one lexeme: see _consume
            self._hint = None if start0 else (ls0, -info)
            self._out_len = out_len - info
        self._ls = s
        self._start = False
        self.error = None

    def _move(self, ls0: int, move: tuple[int, int, bool, tuple[int, ...]], info: int) -> None:
        """Apply a fast-path move (see ``consume``) of a token of ``info``."""
        s, c, start, pushed = move
        node0, start0, out_len = self._node, self._start, self._out_len
        self._hist.append((ls0, node0, start0, self._rows, False, out_len))
        if pushed:
            self._lag.extend(pushed)
            self._rows += len(pushed)
        n = info if info > 0 else -info
        # a text token inside one lexeme: see _consume
        self._hint = (ls0, n) if info < 0 and c == node0 and not start0 and not start else None
        self._ls, self._node, self._start = s, c, start
        self._out_len = out_len + n
        self.error = None

    def _consume(self, token: int) -> bool:
        cc = self.cc
        vocab = cc.vocabulary
        if self._eos:
            self.error = f"token {token} after end of sequence"
            return False
        if token in vocab.eos_ids:
            if not self._accepting_now():
                self.error = (
                    f"EOS token {token} at byte {self._out_len}: the output is not complete"
                    f" (allowed next bytes: {_show_bytes(self.allowed_bytes())})"
                )
                return False
            self._hist.append(self._save())
            self._eos = True
            self.error = None
            return True
        if not 0 <= token < vocab.size:
            self.error = f"token {token} is out of range (vocabulary size {vocab.size})"
            return False
        data = vocab.tokens[token]
        if not data or token in vocab.special_ids:
            self.error = f"special token {token} is not allowed by the constraint"
            return False
        h = self._save()
        ls0, node0, start0 = self._ls, self._node, self._start
        refused = self._step_all(data, h)
        if refused is not None:
            i, allowed = refused
            self.error = (
                f"token {token} {data!r} rejected at its byte {i} ({bytes([data[i]])!r}), output "
                f"byte {self._out_len + i}; allowed there: {allowed}"
            )
            return False
        # a text token inside one lexeme: the slice containment of the new lexer state is
        # at least the old one minus its length (see walk.containment_depth)
        self._hint = ((ls0, len(data)) if self._node == node0 and not start0 and not
                      self._start and self.cc.vindex.is_text_token(token) else None)
        self._out_len += len(data)
        self._hist.append(h)
        self.error = None
        return True

    def _step_all(self, data: bytes | bytearray | memoryview,
                  h: tuple[int, int, bool, int, bool, int]) -> tuple[int, str] | None:
        """Step every byte of ``data``. On a refused byte: back to ``h``, and (its index,
        the bytes allowed there); on an exception (a limit reached): back to ``h``, raised."""
        try:
            for i, b in enumerate(data):
                if not self._step(b):
                    allowed = _show_bytes(self.allowed_bytes())
                    self._restore(h)
                    return i, allowed
        except BaseException:  # nothing of a token or of raw bytes is kept half-consumed
            self._restore(h)
            raise
        return None

    def consume_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (counted as one history entry for ``rollback``).
        Returns False (state unchanged, reason in ``.error``) if they are not allowed or
        ``data`` is not ``bytes``/``bytearray``/``memoryview``."""
        if not isinstance(data, bytes | bytearray | memoryview):
            self.error = f"data must be bytes; got {_describe(data)}"
            return False
        try:
            if self._eos:
                self.error = "bytes after end of sequence"
                return False
            h = self._save()
            with self.cc.lock:
                refused = self._step_all(data, h)
                if refused is not None:
                    i, allowed = refused
                    self.error = (
                        f"byte {i} of {bytes(data[:i + 1])[-20:]!r} rejected at output byte "
                        f"{self._out_len + i}; allowed there: {allowed}"
                    )
                    return False
            self._out_len += len(data)
            self._hist.append(h)
            self.error = None
            return True
        except Exception as e:  # noqa: BLE001
            self.error = f"internal error: {type(e).__name__}: {e}"
            return False

    def rollback(self, n_tokens: int = 1) -> None:
        """Undo the last ``n_tokens`` consumes.

        Raises:
            ConstraintError (a ValueError): ``n_tokens`` is not an integer (``bool``
                refused), is negative, or is more than the tokens consumed.
        """
        n = n_tokens if type(n_tokens) is int else token_id(n_tokens)
        if n is None or n < 0 or n > len(self._hist):
            what = _show_int(n) if n is not None else _describe(n_tokens)
            raise ConstraintError(f"cannot roll back {what} tokens: {len(self._hist)} consumed")
        n_tokens = n
        if n_tokens == 0:
            return
        h = self._hist[-n_tokens]
        del self._hist[-n_tokens:]
        self._restore(h)
        self.error = None

    def reset(self) -> None:
        """Back to the start of the output."""
        self.rollback(len(self._hist))

    # ---- lookahead ------------------------------------------------------------------------
    def allowed_bytes(self) -> list[int]:
        """Bytes that may come next (not counting EOS). Cost: 256 table steps."""
        if self._eos:
            return []
        with self.cc.lock:
            return completion.allowed_bytes_at(self.cc.steps, self._ls, self._node, self._parser_at_node)

    def forced_bytes(self) -> bytes:
        """The bytes every valid continuation starts with (empty if there is a choice,
        including the choice to stop here). Does not change the state."""
        with self.cc.lock:
            return completion.forced_bytes(self)

    def fast_forward(self) -> list[int]:
        """Tokens forced from here (canonical tokenization of ``forced_bytes()``, minus a last
        token that a longer token could extend). Does not consume them."""
        with self.cc.lock:
            return completion.forced_tokens(self)

    def shortest_completion(self, max_states: int = 20000) -> bytes:
        """A shortest byte string that makes the output complete (b"" if it already is).

        Raises ConstraintError if none is found within ``max_states`` explored states.
        """
        with self.cc.lock:
            return completion.shortest_completion(self, max_states)

    def __repr__(self) -> str:
        return (f"Matcher(tokens={len(self._hist)}, bytes={self._out_len}, node={self._node}, "
                f"lexer={self._ls}, eos={self._eos})")


_U32 = np.dtype(np.uint32)
_NO_SCRATCH: NDArray[np.int32] = np.empty(0, np.int32)  # never written: shorter than any use
_token_moves: Callable[..., tuple[int, int, int, int, int, int, int]] | None = None  # the kernel, at first use

# consume's fast path: per (vocabulary, vocabulary index), what it needs of each token id
# (``_token_info``). An entry holds its vocabulary (a few at most) but not the index (a
# weak reference: the index cache of ``slices`` decides how long an index lives); a dead
# or other index is a miss.
_INFO: OrderedDict[tuple[int, int], tuple[weakref.ref[VocabIndex], Vocabulary,
                                          list[int]]] = OrderedDict()
_INFO_LIMIT = 8


def _token_info(cc: CompiledConstraint) -> list[int]:
    """Per token id, the fast path's view of it, shared by the matchers of ``cc``'s
    vocabulary and index: 0 for EOS, special and empty tokens (the checked path's), else
    its length in bytes, negated for a text token (``VocabIndex.is_text_token``:
    ``_consume``'s hint). Made once per vocabulary and index, with numpy (a few ms for
    262k tokens), so that no token pays for it at its first use."""
    vocab, vindex = cc.vocabulary, cc.vindex
    key = (id(vocab), id(vindex))
    hit = _INFO.get(key)
    if hit is None or hit[0]() is not vindex or hit[1] is not vocab:
        lens = vocab.token_lengths
        info = np.where(vindex.text_ids, -lens, lens)
        off = [*vocab.eos_ids, *vocab.special_ids]
        if off:
            info[np.asarray(off, np.int64)] = 0  # empty tokens already have 0
        hit = _INFO[key] = (weakref.ref(vindex), vocab, info.tolist())
        while len(_INFO) > _INFO_LIMIT:
            _INFO.popitem(last=False)
    return hit[2]


def token_id(value: object) -> int | None:
    """``value`` as a token id if it is a Python or numpy integer (not a ``bool``), else
    None. Range is the caller's to check."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    return None


def _show_int(v: int) -> str:
    """``str(v)``, or its size when it has too many digits to print."""
    return str(v) if v.bit_length() <= 64 else f"<{v.bit_length()}-bit integer>"


def _describe(value: object) -> str:
    return f"{type(value).__name__} {limited(value, 40)}"


def _show_bytes(bs: list[int], limit: int = 24) -> str:
    if not bs:
        return "nothing"
    s = "".join(chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}" for b in bs[:limit])
    return repr(s) + ("…" if len(bs) > limit else "")
