"""``compile(grammar, vocabulary) -> CompiledConstraint``: everything shared by matchers.

A CompiledConstraint holds the grammar's parser tables, its lexer, the lazily filled
step tables (``tables.StepTables``), the per-vocabulary token index (``slices``) and
the mask cache. It is immutable from the outside: its caches only grow, and every
cached entry is a pure function of the grammar and the vocabulary, so it can be shared
by any number of matchers (and threads, under the GIL).

Mask cache: the allowed tokens depend only on (lexer state, parser node, at lexeme
start), so masks are kept under that key — a regular constraint ends up with an O(1)
lookup (a 32 KiB copy for Gemma) per step, like a precomputed FSM index, but built
lazily. Masks are stored as their non-zero words, with a total size limit (oldest
entries are dropped first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.engine.slices import DEFAULT_BUCKETS, VocabIndex, vocab_index
from tether.engine.tables import StepTables
from tether.engine.walk import fill_mask
from tether.errors import ConstraintError
from tether.grammar.ir import Grammar
from tether.limits import check_deadline, deadline
from tether.tokens.vocabulary import Vocabulary

if TYPE_CHECKING:
    from tether.engine.matcher import Matcher

_COMPILED: OrderedDict[Any, CompiledConstraint] = OrderedDict()
_COMPILED_LIMIT = 64


class CompiledConstraint:
    """A grammar compiled for one vocabulary; make decoding state with ``matcher()``.

    Attributes:
        grammar: the grammar compiled.
        vocabulary: the vocabulary.
        tables: the parser layer's ``ParserTables``.
        stats: counters (``mask_hits``, ``mask_misses``, ``slow_steps``).
    """

    def __init__(self, grammar: Grammar, vocabulary: Vocabulary, *, slices: bool = True,
                 slice_buckets: tuple[int, ...] = DEFAULT_BUCKETS,
                 mask_cache_bytes: int = 64 << 20,
                 tokenize: Callable[[bytes], list[int]] | None = None) -> None:
        from tether.parser.earley import EarleyParser
        from tether.parser.lexer import Lexer
        from tether.parser.tables import ParserTables

        self.grammar = grammar
        self.vocabulary = vocabulary
        self.tokenize = tokenize
        self.tables = ParserTables.from_grammar(grammar)
        check_deadline("compile: parser tables")
        self.lexer = Lexer(self.tables)
        check_deadline("compile: lexer")
        lazy = frozenset(i for i, t in enumerate(self.tables.terminals) if t.lazy)
        self.steps = StepTables(self.lexer, ignore=frozenset(self.tables.ignore),
                                lazy_terminals=lazy)
        self._parser_cls = EarleyParser
        p0 = EarleyParser(self.tables)
        self.root_node = self.steps.intern(p0)
        self.vindex: VocabIndex = vocab_index(vocabulary, slice_buckets)
        self.use_slices = slices
        self.n_words = self.vindex.n_words
        self._masks: OrderedDict[tuple[int, int, bool], tuple[NDArray[Any], NDArray[np.uint32]]]
        self._masks = OrderedDict()
        self._mask_bytes = 0
        self._mask_limit = mask_cache_bytes
        self._depth_cache: dict[int, int] = {}
        self.stats = {"mask_hits": 0, "mask_misses": 0, "slow_steps": 0}

    # ---- public ---------------------------------------------------------------------------
    def matcher(self) -> Matcher:
        """A fresh decoding state at the start of the output."""
        from tether.engine.matcher import Matcher

        return Matcher(self)

    def new_parser(self) -> Any:
        return self._parser_cls(self.tables)

    # ---- masks ----------------------------------------------------------------------------
    def is_accepting_at(self, ls: int, node: int, at_start: bool) -> bool:
        """Whether the text is complete at this state (the current lexeme may end here)."""
        st = self.steps
        if at_start:
            return bool(st.naccept[node])
        a = st.accid_of(ls)
        if a < 0:
            return False
        c = int(st.trans[node, a])
        return c >= 0 and bool(st.naccept[c])

    def mask_into(self, ls: int, node: int, at_start: bool, parser: Callable[[], Any],
                  out: NDArray[np.uint32], hint: tuple[int, int] | None = None) -> None:
        """Write the mask of ``(ls, node, at_start)`` into ``out`` (EOS included).

        ``hint = (previous lexer state, n)``: ``ls`` was reached from it by a text token
        of ``n`` bytes inside one lexeme, so its slice containment depth is at least the
        previous one minus ``n`` (used instead of a search when that is deep enough)."""
        key = (ls, node, at_start)
        hit = self._masks.get(key)
        if hit is not None:
            self.stats["mask_hits"] += 1
            idx, words = hit
            if idx is None:  # stored dense
                np.copyto(out, words)
            else:
                out.fill(0)
                out[idx] = words
            return
        self.stats["mask_misses"] += 1
        if hint is not None and ls not in self._depth_cache:
            k0 = self._depth_cache.get(hint[0])
            if k0 is not None and k0 - hint[1] >= 16:
                self._depth_cache[ls] = k0 - hint[1]
        self.stats["slow_steps"] += fill_mask(self.vindex, self.steps, ls, node, out,
                                              slices=self.use_slices,
                                              depth_cache=self._depth_cache)
        if not at_start:
            a = self.steps.accid_of(ls)
            if a >= 0:  # make sure the accepting test below has its transition
                self.steps.transition(node, a, parser)
        if self.is_accepting_at(ls, node, at_start):
            for e in self.vindex.eos_ids:
                out[e >> 5] |= np.uint32(1) << np.uint32(e & 31)
        self._store(key, out)

    def _store(self, key: tuple[int, int, bool], out: NDArray[np.uint32]) -> None:
        """Keep the mask of ``key``: its non-zero words, or a dense copy when more than
        half are non-zero; the oldest entries go past the size limit."""
        from tether.engine._kernels import nonzero_words

        n = int(np.count_nonzero(out))
        if n * 2 > out.shape[0]:
            entry: tuple[Any, NDArray[np.uint32]] = (None, out.copy())
            size = out.nbytes + 200
        else:
            idx = np.empty(n, np.int32)
            words = np.empty(n, np.uint32)
            nonzero_words(out, idx, words)
            entry = (idx, words)
            size = idx.nbytes * 2 + 200
        self._masks[key] = entry
        self._mask_bytes += size
        while self._mask_bytes > self._mask_limit and len(self._masks) > 1:
            _, (i2, w2) = self._masks.popitem(last=False)
            self._mask_bytes -= (w2.nbytes if i2 is None else i2.nbytes * 2) + 200


class _Key:
    """A cache key whose hash is computed once: hashing a grammar's rules goes through
    every rule and symbol (milliseconds for a large JSON Schema), and a dict hashes its
    key again at each lookup and store."""

    __slots__ = ("value", "hash")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.hash = hash(value)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Key) and self.hash == other.hash
                and self.value == other.value)


def _grammar_key(g: Grammar) -> Any:
    return (g.start, tuple(g.rules), tuple(g.terminals.items()), tuple(g.ignore))


def compile(constraint: Any, vocabulary: Vocabulary, **options: Any) -> CompiledConstraint:  # noqa: A001
    """Compile a constraint for a vocabulary (cached by content + vocabulary fingerprint).

    Args:
        constraint: a ``Grammar``; also accepted: a JSON Schema ``dict`` (via
            ``Grammar.from_json_schema``) or a ``list`` of choice strings.
        vocabulary: the model's Vocabulary.
        options: ``slices`` (bool, default True), ``slice_buckets``, ``mask_cache_bytes``,
            ``tokenize`` (bytes -> canonical token ids, for ``fast_forward``).

    Raises:
        ConstraintError: the constraint type is not supported.
        GrammarError / RegexError: from the grammar's own checks.
        LimitError: past the active `tether.limits.Limits`; the whole compile runs under
            ``deadline()`` (``Limits.compile_seconds``).

    Cost: parser tables (linear in the grammar) and, once per vocabulary, the token
    index (about a second for 262k tokens); no mask is computed until asked.
    """
    with deadline("compile"):
        return _compile(constraint, vocabulary, options)


def _compile(constraint: Any, vocabulary: Vocabulary, options: dict[str, Any]) -> CompiledConstraint:
    grammar = _as_grammar(constraint)
    opts = tuple(sorted((k, v if isinstance(v, (int, bool, tuple, str)) else id(v))
                        for k, v in options.items()))
    key = _Key((_grammar_key(grammar), vocabulary.fingerprint, opts))
    hit = _COMPILED.get(key)
    if hit is not None:
        _COMPILED.move_to_end(key)
        return hit
    cc = CompiledConstraint(grammar, vocabulary, **options)
    _COMPILED[key] = cc
    while len(_COMPILED) > _COMPILED_LIMIT:
        _COMPILED.popitem(last=False)
    return cc


def _as_grammar(constraint: Any) -> Grammar:
    if isinstance(constraint, Grammar):
        return constraint
    if isinstance(constraint, CompiledConstraint):
        return constraint.grammar
    if isinstance(constraint, Mapping) or isinstance(constraint, bool):
        return Grammar.from_json_schema(constraint)  # type: ignore[attr-defined,no-any-return]
    if isinstance(constraint, list) and all(isinstance(c, str) for c in constraint):
        return Grammar.from_choices(constraint)  # type: ignore[attr-defined,no-any-return]
    raise ConstraintError(
        f"cannot compile a {type(constraint).__name__}: expected a Grammar, a JSON Schema dict "
        "or a list of choice strings"
    )


def compute_masks(matchers: Sequence[Matcher], out2d: NDArray[np.uint32]) -> None:
    """Write each matcher's mask into a row of ``out2d`` (``uint32[len(matchers), words]``).

    Rows past ``len(matchers)`` are left alone.

    Raises:
        ConstraintError (a ValueError): ``matchers`` is not a sequence of Matchers of
            one vocabulary, or ``out2d`` is not a writeable, C-contiguous ``uint32`` array
            of shape ``(>= len(matchers), words)``.
        LimitError: more matchers than ``Limits.max_batch``.
    """
    from tether.engine.matcher import Matcher
    from tether.limits import check

    if not isinstance(matchers, Sequence) or isinstance(matchers, str | bytes):
        raise ConstraintError(f"matchers must be a list of Matcher; got {type(matchers).__name__}")
    n = len(matchers)
    check("max_batch", n, "compute_masks(matchers)")
    if n == 0:
        return
    first = matchers[0]
    if not isinstance(first, Matcher):
        raise ConstraintError(f"matchers[0] is a {type(first).__name__}, not a Matcher")
    vocab = first.cc.vocabulary
    words = first.cc.n_words
    for i in range(1, n):
        m = matchers[i]
        if not isinstance(m, Matcher):
            raise ConstraintError(f"matchers[{i}] is a {type(m).__name__}, not a Matcher")
        if m.cc.vocabulary is not vocab and m.cc.vocabulary != vocab:
            raise ConstraintError(
                f"matchers[{i}] was compiled for another vocabulary ({m.cc.vocabulary!r}) "
                f"than matchers[0] ({vocab!r})"
            )
    if (not isinstance(out2d, np.ndarray) or out2d.ndim != 2 or out2d.shape[0] < n
            or out2d.shape[1] != words or out2d.dtype != np.uint32
            or not out2d.flags.carray):
        if isinstance(out2d, np.ndarray):
            layout = "C-contiguous" if out2d.flags.c_contiguous else "non-contiguous"
            if not out2d.flags.writeable:
                layout = "read-only " + layout
            got = f"{layout} {out2d.dtype} of shape {tuple(out2d.shape)}"
        else:
            got = type(out2d).__name__
        raise ConstraintError(
            f"out2d must be a C-contiguous uint32 array of shape ({n}, {words}) (or more "
            f"rows); got {got}"
        )
    for i in range(n):
        matchers[i].compute_mask(out2d[i])
