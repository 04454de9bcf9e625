"""``compile(grammar, vocabulary) -> CompiledConstraint``: everything shared by matchers.

A CompiledConstraint holds the grammar's parser tables, its lexer, the lazily filled
step tables (``tables.StepTables``), the per-vocabulary token index (``slices``) and
the mask cache. It is immutable from the outside: its caches only grow, and every
cached entry is a pure function of the grammar and the vocabulary, so it can be shared
by any number of matchers, in any number of threads: a cache hit only reads; whatever
fills the tables or walks them (a mask not cached, a matcher's moves and lookahead) holds
the constraint's ``lock``, so a walk kernel, which runs without the GIL, never reads a
table another thread is filling (``compute_masks`` holds it while its walks run on
several threads and it fills on one).

Mask cache: the allowed tokens depend only on (lexer state, parser node, at lexeme
start), so masks are kept under that key — a regular constraint ends up with an O(1)
lookup (a 32 KiB copy for Gemma) per step, like a precomputed FSM index, but built
lazily. Masks are stored as their non-zero words, with a total size limit (oldest
entries are dropped first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import walk as _walk
from tether.engine.matcher import Matcher
from tether.engine.slices import DEFAULT_BUCKETS, INF, VocabIndex, vocab_index
from tether.engine.tables import UNKNOWN, StepTables
from tether.engine.walk import Stacks, Walk, new_stacks, start_walk
from tether.errors import ConstraintError, TetherError
from tether.grammar import ir
from tether.grammar.ir import Grammar
from tether.limits import check_deadline, deadline
from tether.parser import terminals
from tether.regex import interning
from tether.tokens.vocabulary import Vocabulary

if TYPE_CHECKING:
    from tether.engine.completion import Completer

_COMPILED: OrderedDict[Any, CompiledConstraint] = OrderedDict()
_COMPILED_LIMIT = 64

# the grammar's and the parser's memos of terminal nodes: their modules load the regex
# layer only when used, so it is told of them here (``CompiledConstraint`` trims it)
interning.memo(ir.clear_node_caches)
interning.memo(terminals.clear_node_caches)

WALKED_ONCE_LIMIT = 1 << 16  # keys remembered as walked once (then forgotten, all at once)


class CompiledConstraint:
    """A grammar compiled for one vocabulary; make decoding state with ``matcher()``.

    Attributes:
        grammar: the grammar compiled.
        vocabulary: the vocabulary.
        tables: the parser layer's ``ParserTables``.
        stats: counters (``mask_hits``, ``mask_misses``, ``slow_steps``).
        lock: held (re-entrant) by whatever fills or walks the tables.
        completer: the lookahead's per-constraint costs (``completion.Completer``), made
            by its first use.
    """

    def __init__(self, grammar: Grammar, vocabulary: Vocabulary, *, slices: bool = True,
                 slice_buckets: tuple[int, ...] = DEFAULT_BUCKETS,
                 mask_cache_bytes: int = 64 << 20,
                 tokenize: Callable[[bytes], list[int]] | None = None) -> None:
        from tether.parser.earley import EarleyParser
        from tether.parser.lexer import Lexer
        from tether.parser.tables import ParserTables

        interning.trim_if_over()  # the regex layer's table, bounded across constraints
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
        self._masks: OrderedDict[tuple[int, int, bool], StoredMask] = OrderedDict()
        # keys walked once and not stored (a mask is stored at its key's second walk)
        self._walked_once: set[tuple[int, int, bool]] = set()
        self._mask_bytes = 0
        self._mask_limit = mask_cache_bytes
        # the hit kernels (``_kernels.copy_words`` / ``scatter_words``), set by the first store
        self._copy_words: Callable[..., int] = _no_kernel
        self._scatter_words: Callable[..., int] = _no_kernel
        self._depth_cache: dict[int, int] = {}
        # lexer state -> the state whose mask it has (``mask_state``)
        self._mask_states: dict[int, int] = {}
        self._counted = self.steps.dfa.counted  # read only: states without a long count
        self._stacks: Stacks | None = None  # the single-row walk's (under ``lock``)
        self.stats = {"mask_hits": 0, "mask_misses": 0, "slow_steps": 0}
        self.lock = threading.RLock()
        self.completer: Completer | None = None  # lookahead costs, made at first use

    # ---- public ---------------------------------------------------------------------------
    def matcher(self) -> Matcher:
        """A fresh decoding state at the start of the output."""
        return Matcher(self)

    def new_parser(self) -> Any:
        return self._parser_cls(self.tables)

    # ---- masks ----------------------------------------------------------------------------
    def is_accepting_at(self, ls: int, node: int, at_start: bool,
                        parser: Callable[[], Any] | None = None) -> bool:
        """Whether the text is complete at this state (the current lexeme may end here),
        the parser transition it needs filled first if unknown (with ``parser()``, a parser
        at ``node``; default: the node's representative). Caller holds ``lock``. Reads the
        tables by ``ndarray.item`` (a walked mask's end asks it every time)."""
        st = self.steps
        if at_start:
            return bool(st.naccept.item(node) == 1)
        a = st.accid.item(ls) if ls < st.accid.shape[0] else UNKNOWN
        if a == UNKNOWN:
            a = st.accid_of(ls)
        if a < 0:
            return False
        c = st.trans.item(node, a)
        if c == UNKNOWN:
            c = st.transition(node, a, parser)
        return bool(c >= 0 and st.naccept.item(c) == 1)

    def mask_state(self, ls: int) -> int:
        """The lexer state whose masks ``ls`` has: ``ls`` with its large counted repeats
        unbounded where no token can tell (``LexerDfa.horizon_state`` at the vocabulary's
        longest token), so that the positions of a long bounded string share one mask
        and one walk. Mask keys and walks use it."""
        if not self._counted[ls]:
            return ls
        got = self._mask_states.get(ls)
        if got is None:
            with self.lock:
                try:
                    got = self.steps.horizon_state(ls, self.vindex.trie.max_depth)
                except TetherError:  # a limit: the state is its own (exact, unshared)
                    got = ls
                self._mask_states[ls] = got
        return got

    def mask_into(self, ls: int, node: int, at_start: bool, parser: Callable[[], Any],
                  out: NDArray[np.uint32], hint: tuple[int, int] | None = None) -> None:
        """Write the mask of ``(ls, node, at_start)`` into ``out`` (EOS included).

        ``hint = (previous lexer state, n)``: ``ls`` was reached from it by a text token
        of ``n`` bytes inside one lexeme, so its slice containment depth is at least the
        previous one minus ``n`` (used instead of a search when that is deep enough)."""
        key = (self.mask_state(ls), node, at_start)
        hit = self._masks.get(key)
        if hit is None:
            with self.lock:
                hit = self._masks.get(key)  # another thread may have stored it meanwhile
                if hit is None:
                    stacks = self._stacks
                    if stacks is None:
                        stacks = self._stacks = new_stacks(self.vindex.trie.max_depth)
                    walk = self.start_mask(key, out, hint, stacks, raw=ls)
                    walk.run()
                    self.finish_mask(key, walk, parser)
                    return
        self.stats["mask_hits"] += 1
        if hit.idx is None:  # numba kernels, without the GIL
            self._copy_words(out, hit.words)
        else:
            self._scatter_words(out, hit.idx, hit.words)

    # the two halves of a mask not in the cache, around its walk (``compute_masks`` runs the
    # walks of a batch between them, on several threads)
    def start_mask(self, key: tuple[int, int, bool], out: NDArray[np.uint32],
                   hint: tuple[int, int] | None = None, stacks: Stacks | None = None,
                   raw: int | None = None) -> Walk:
        """Begin the mask of ``key`` (its lexer state a mask state: ``mask_state(raw)``,
        ``raw`` the matcher's lexer state, default the key's) in ``out``: the slices taken
        whole are written, the rest is the returned walk, not started (on ``stacks`` when
        given: a pair no other walk uses meanwhile). The caller holds ``lock`` from here
        to ``finish_mask``."""
        self.stats["mask_misses"] += 1
        ls, node, _ = key
        if raw is None:
            raw = ls
        depths = self._depth_cache
        if hint is not None and ls not in depths:
            # depths are kept by mask state; a state and its mask state have the same
            # depth up to the horizon only, so a bound through a mapped state is capped
            src = self._mask_states.get(hint[0])
            k0 = None if src is None else depths.get(src)
            if k0 is not None:
                if src != hint[0] or ls != raw:
                    k0 = min(k0, self.vindex.trie.max_depth)
                if k0 - hint[1] >= 16:
                    depths[ls] = k0 - hint[1]
        walk = start_walk(self.vindex, self.steps, ls, node, out, slices=self.use_slices,
                          depth_cache=depths, stacks=stacks)
        if depths.get(ls, 0) >= INF:  # no text ends the lexeme: a string body's state?
            self.steps.ascii_loop(ls)  # (kept for consume: decided once per state)
        return walk

    def finish_mask(self, key: tuple[int, int, bool], walk: Walk,
                    parser: Callable[[], Any] | None = None) -> None:
        """After ``walk`` (from ``start_mask(key, ...)``) is done: EOS where the output may
        end, then the mask goes into the cache. ``parser()``: a parser at the key's node
        (default: the node's representative)."""
        ls, node, at_start = key
        out = walk.mask
        self.stats["slow_steps"] += walk.misses
        self.steps.rows.ahead = True  # from the second mask on, rows are filled ahead
        if self.is_accepting_at(ls, node, at_start, parser):
            for w, bit in self.vindex.eos_bits:
                out[w] = out.item(w) | bit
        once = self._walked_once
        if key in once:
            once.discard(key)
            self._store(key, out)
        else:
            # most states of a decode are visited once (89% of the mask keys of the 300
            # dev schemas forced through their instances): storing every mask cost each
            # miss ~10 us (the non-zero words gathered, an entry made) for entries never
            # read; a key walked again is stored then (one more walk per revisited key)
            if len(once) >= WALKED_ONCE_LIMIT:
                once.clear()
            once.add(key)

    def stored_mask(self, key: tuple[int, int, bool]) -> StoredMask | None:
        """The cached mask of ``(ls, node, at_start)``, or None (no search, no side effect)."""
        return self._masks.get(key)

    def _store(self, key: tuple[int, int, bool], out: NDArray[np.uint32]) -> None:
        """Keep the mask of ``key``: its non-zero words, or a dense copy when more than
        half are non-zero; the oldest entries go past the size limit."""
        k = _walk._kernels or _walk.kernels()
        # hits come after a store: the kernels are at hand, no import per hit
        self._copy_words, self._scatter_words = k.copy_words, k.scatter_words
        n = int(np.count_nonzero(out))
        if n * 2 > out.shape[0]:
            dense = out.copy()
            entry = StoredMask(None, dense, dense.nbytes + 200)
        else:
            idx = np.empty(n, np.int32)
            words = np.empty(n, np.uint32)
            k.nonzero_words(out, idx, words)
            entry = StoredMask(idx, words, idx.nbytes * 2 + 200)
        old = self._masks.pop(key, None)
        if old is not None:
            self._mask_bytes -= old.size
        self._masks[key] = entry
        self._mask_bytes += entry.size
        while self._mask_bytes > self._mask_limit and len(self._masks) > 1:
            _, old = self._masks.popitem(last=False)
            self._mask_bytes -= old.size


def _no_kernel(*_args: Any) -> int:  # pragma: no cover - replaced by the first store
    raise AssertionError("a mask hit before any mask was stored")


class StoredMask:
    """A mask of the cache: ``idx`` None for a dense copy (``words`` is the whole mask),
    else the indices and values of its non-zero words; ``size`` is what the entry counts
    against the cache limit. The arrays are never written after the entry is made."""

    __slots__ = ("idx", "words", "size", "_spec")

    def __init__(self, idx: NDArray[np.int32] | None, words: NDArray[np.uint32],
                 size: int) -> None:
        self.idx, self.words, self.size = idx, words, size
        self._spec: tuple[int, int, int, int] | None = None

    def spec(self) -> tuple[int, int, int, int]:
        """The entry as the batch kernel (``_kernels.fill_rows``) reads it: ``(kind,
        count, idx address, words address)``; the kernel reads the arrays only while its
        caller holds this entry. Made at the first call (a single-row mask never pays
        for the addresses), then kept."""
        spec = self._spec
        if spec is None:
            k = _walk._kernels or _walk.kernels()
            if self.idx is None:
                spec = (k.ROW_DENSE, self.words.shape[0], 0, int(k.address_of(self.words)))
            else:
                spec = (k.ROW_SPARSE, self.idx.shape[0], int(k.address_of(self.idx)),
                        int(k.address_of(self.words)))
            self._spec = spec
        return spec


class _Key:
    """A compile-cache key: hashed by the grammar's shape (start, sizes, vocabulary,
    options: a few values), compared by content (the snapshot of its rules, terminals and
    ``%ignore``) only against keys of the same shape. Hashing the content would go
    through every rule and symbol at every compile (about 5% of the time to first mask
    on the dev schemas); a miss now costs nothing, and a hit one comparison."""

    __slots__ = ("shape", "value", "hash")

    def __init__(self, shape: tuple[Any, ...], value: tuple[Any, ...]) -> None:
        self.shape, self.value = shape, value
        self.hash = hash(shape)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.shape == other.shape and self.value == other.value


def _grammar_key(g: Grammar, *rest: Any) -> _Key:
    rules, terminals, ignore = tuple(g.rules), tuple(g.terminals.items()), tuple(g.ignore)
    return _Key((g.start, len(rules), len(terminals), len(ignore), *rest), (rules, terminals, ignore))


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
    key = _grammar_key(grammar, vocabulary.fingerprint, opts)
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
        return Grammar.from_json_schema(constraint)
    if isinstance(constraint, list) and all(isinstance(c, str) for c in constraint):
        return Grammar.from_choices(constraint)
    raise ConstraintError(
        f"cannot compile a {type(constraint).__name__}: expected a Grammar, a JSON Schema dict "
        "or a list of choice strings"
    )
