"""``Matcher.consume``'s fast path (``StepTables.token_steps`` / ``token_moves``, the
``_kernels.token_moves`` kernel, the parser's pushes left pending) against the per-byte
path it short-cuts.

Every constraint is compiled twice, with separate tables: ``fast`` decodes with the
public ``consume``, ``ref`` with the per-byte path alone (a matcher whose ``_vsize`` is 0
never takes the fast path: its range test fails first, and the checked path decides),
pushing the lexemes it scans on its parser after every call (``fast`` leaves them
pending until its parser is needed).
Both see the same calls in the same order; the fast path fills no table entry, and a move
it derives inside a lexeme (``LexerDfa.run_inside``) makes only the state it ends in, so
parser nodes compare by id and lexer states by content (their pairs): after every call the
decision, ``.error``, ``mask_key()``, history, output length, the mask hint, the parser's
rows and (pushed, now and then) its ``row_key()`` must be equal, and so must the masks. The calls are hypothesis
sequences of allowed tokens, random ids (refused, out of range, not integers), EOS,
special tokens, rollbacks, copies and raw bytes. Two threads decoding on matchers of one
shared constraint must decide as a sequential run does.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from engine_reference import keyword_grammar, stop_grammar  # noqa: E402

from tether.engine import _kernels  # noqa: E402
from tether.engine.compiled import CompiledConstraint  # noqa: E402
from tether.engine.matcher import Matcher  # noqa: E402
from tether.engine.tables import TOKEN_STEPS_LIMIT  # noqa: E402
from tether.grammar import Grammar  # noqa: E402
from tether.grammar.ir import NT, T, Terminal  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402

HERE = Path(__file__).parent
_rng = random.Random(11)
_ALPHA = b'abcno01259{}[]":, -yes;\\'
TOKENS = ([b""] + [bytes([i]) for i in range(256)]
          + [b'{"', b'":', b'","', b'"name":"', b'name', b'yes', b'no', b'maybe', b' so', b'abc',
             b'12', b'-1', b'true', b'],', b'"}', "é".encode(), "日本".encode(), b"\xe6\x97",
             b"<|special|>", b"if", b" if ", b"end", b"ab;", b";end", b"abcabcabc", b" " * 4]
          + [bytes(_rng.choice(_ALPHA) for _ in range(_rng.randint(2, 7))) for _ in range(300)])
SPECIAL = TOKENS.index(b"<|special|>")
VOCAB = Vocabulary.from_bytes(TOKENS, eos_ids=[0], special_ids=[SPECIAL])
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12}, "n": {"type": "integer"},
                         "tags": {"type": "array", "items": {"enum": ["a", "bc", "日本"]}},
                         "note": {"type": "string"}},
          "required": ["name"]}
LARK = r"""
start: item ("," item)*
item: NUM | WORD | "[" start "]"
NUM: /-?[0-9]+/
WORD: /[a-z]+/
%ignore " "
"""


def _lazy_grammar() -> Grammar:
    """Lazy terminals (a lexeme ends at its first match): ``;``-ended items, each ``a``
    of a run its own lexeme, then ``end``."""
    g = Grammar(start="start")
    g.add_terminal(Terminal("ITEM", regex=r"[a-c ]*;", lazy=True))
    g.add_terminal(Terminal("A", regex=r"a+", lazy=True))
    g.add_terminal(Terminal("END", literal="end"))
    g.add_rule("start", T("END"))
    g.add_rule("start", T("ITEM"), NT("start"))
    g.add_rule("start", T("A"), T("A"), NT("start"))
    return g


def _grammars() -> dict[str, Grammar]:
    return {
        "json": Grammar.from_json_schema(SCHEMA, whitespace="flexible"),
        "regex": Grammar.from_regex(r"([a-c]{2,9}|yes|no)(-[0-9]+)?"),
        "lark": Grammar.from_lark(LARK),
        "stop": stop_grammar(),  # a stop text: lexemes end inside tokens
        "lazy": _lazy_grammar(),
        "keyword": keyword_grammar(),  # %ignore spaces, ambiguous lexemes
    }


GRAMMARS = _grammars()


def reference(m: Matcher) -> Matcher:
    """``m`` with the fast path switched off (see the module docstring)."""
    m._vsize = 0
    return m


def _mask(m: Matcher) -> np.ndarray:
    out = np.zeros(m.cc.n_words, np.uint32)
    return m.compute_mask(out)


def _allowed(m: Matcher) -> list[int]:
    bits = np.unpackbits(_mask(m).view(np.uint8), bitorder="little")[:VOCAB.size]
    return [int(t) for t in np.flatnonzero(bits)]


def _lex(m: Matcher, ls: int) -> object:
    """A lexer state by its content (its ``(terminal, regex)`` pairs): the two constraints
    number their states in the order they make them, and a move inside a lexeme makes
    only the state it ends in (``LexerDfa.run_inside``), the per-byte path one per byte."""
    return m.cc.steps.dfa.pairs(ls) if ls >= 0 else ls


def _hist(m: Matcher) -> list[tuple[object, ...]]:
    return [(_lex(m, h[0]), *h[1:]) for h in m._hist]


def _state(m: Matcher) -> tuple[object, ...]:
    key = m.mask_key()
    hint = m._hint
    return (None if key is None else (_lex(m, key[0]), *key[1:]), m._out_len, m._eos,
            None if hint is None else (_lex(m, hint[0]), hint[1]))


def _same(a: Matcher, b: Matcher) -> None:
    """Equal states; the parsers' pending lexemes are left pending (see ``_parsers``)."""
    assert a.error == b.error
    assert _state(a) == _state(b)
    assert _hist(a) == _hist(b)
    assert a._rows == a._p.n_rows + len(a._lag) == b._rows == b._p.n_rows + len(b._lag)


def _parsers(a: Matcher, b: Matcher) -> None:
    """Equal parsers once their pending lexemes are pushed, and no lexeme left pending."""
    assert a._parser.row_key() == b._parser.row_key()
    assert a._parser.n_rows == a._rows == b._parser.n_rows == b._rows
    assert not a._lag and not b._lag


def _run(name: str, ops: list[tuple[str, int]], check_masks: bool) -> tuple[int, int]:
    """Replay ``ops`` on a fast and a reference matcher of fresh constraints; return how
    many tokens each path took in the fast matcher (fast, per-byte)."""
    g = GRAMMARS[name]
    fast_cc, ref_cc = CompiledConstraint(g, VOCAB), CompiledConstraint(g, VOCAB)
    f, r = fast_cc.matcher(), reference(ref_cc.matcher())
    per_byte = [0]
    consume = Matcher._consume

    def counted(self: Matcher, token: int) -> bool:
        if self is f:
            per_byte[0] += 1
        return consume(self, token)

    n_consumed = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Matcher, "_consume", counted)
        for op, x in ops:
            if op == "allowed":
                allowed = _allowed(r)
                assert np.array_equal(_mask(f), _mask(r))
                if not allowed:
                    continue
                t = allowed[x % len(allowed)]
                assert f.consume(t) == r.consume(t) is True
                n_consumed += 1
            elif op == "token":
                t: Any = x
                assert f.consume(t) == r.consume(t)
                n_consumed += 1
            elif op == "other":  # not a token id, or out of range, or numpy
                v: Any = [True, 1.0, "3", None, np.int64(x % VOCAB.size), -1, VOCAB.size,
                          2**70][x % 8]
                assert f.consume(v) == r.consume(v)
                n_consumed += 1
            elif op == "rollback":
                k = x % (f.n_tokens + 1)
                f.rollback(k)
                r.rollback(k)
            elif op == "copy":
                f, r = f.copy(), r.copy()
            elif op == "bytes":
                data = VOCAB.tokens[x % VOCAB.size]
                assert f.consume_bytes(data) == r.consume_bytes(data)
            elif op == "parser":
                _parsers(f, r)
            r._parser_at_node()  # the reference pushes every lexeme at once
            _same(f, r)
            if check_masks:
                assert np.array_equal(_mask(f), _mask(r))
        assert f.is_accepting() == r.is_accepting()
        assert f.allowed_bytes() == r.allowed_bytes()
        _parsers(f, r)
    return n_consumed - per_byte[0], per_byte[0]


_OPS = st.lists(st.tuples(
    st.sampled_from(["allowed"] * 8 + ["token", "token", "other", "rollback", "copy", "bytes",
                                       "parser"]),
    st.integers(0, 2**20)), min_size=1, max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(GRAMMARS)), _OPS, st.booleans())
def test_fast_path_agrees_with_the_per_byte_path(name: str, ops: list[tuple[str, int]],
                                                 check_masks: bool) -> None:
    _run(name, ops, check_masks)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_fast_path_is_taken(name: str) -> None:
    """A long random walk over allowed tokens (with EOS, refusals and rollbacks) goes
    both ways: the fast path for tokens inside a lexeme, the per-byte path for the rest."""
    rnd = random.Random(name)
    ops = [(rnd.choice(["allowed"] * 12 + ["token", "rollback", "copy", "parser"]),
            rnd.randrange(2**20))
           for _ in range(300)]
    fast, per_byte = _run(name, ops, check_masks=False)
    assert fast > 0 and per_byte > 0


def test_text_tokens_in_a_json_string_take_the_cache() -> None:
    cc = CompiledConstraint(GRAMMARS["json"], VOCAB)
    m = cc.matcher()
    for t in (b'{"', b'name', b'":', b'"', b'abc', b'","', b'n', b'o', b't', b'e', b'":', b'"'):
        assert m.consume(TOKENS.index(t)), (t, m.error)
    _mask(m)  # the walk fills the rows the string's tokens follow
    abc = TOKENS.index(b"abc")
    calls = [0]
    moves_of = Matcher._moves_of

    def counted(self: Matcher, token: int, key: int) -> Any:
        calls[0] += 1
        return moves_of(self, token, key)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Matcher, "_consume", lambda *a: pytest.fail("per-byte path taken"))
        mp.setattr(Matcher, "_moves_of", counted)
        for _ in range(6):  # an unbounded string: the state after "abc" loops
            assert m.consume(abc), m.error
    assert calls[0] <= 2  # the kernel once per (state, token), then the cache
    assert m._hint == (m._hist[-1][0], 3)
    assert m._out_len == len(b'{"name":"abc","note":"') + 18


def test_ascii_text_in_a_string_body_leaves_the_state() -> None:
    """In an unbounded string body every ASCII text byte leads back to the state, so an
    ASCII text token moves without a kernel run or a cache entry per (state, token); a
    bounded string's state (the characters left count down) is not such a loop."""
    cc = CompiledConstraint(GRAMMARS["json"], VOCAB)
    m = cc.matcher()
    for t in (b'{"', b'name', b'":', b'"', b'abc', b'","', b'n', b'o', b't', b'e', b'":', b'"'):
        assert m.consume(TOKENS.index(t)), (t, m.error)
    _mask(m)
    ls = m._ls
    texts = [TOKENS.index(t) for t in (b"abc", b"yes", b" so", b"12", b"abcabcabc")]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Matcher, "_consume", lambda *a: pytest.fail("per-byte path taken"))
        mp.setattr(Matcher, "_moves_of", lambda *a: pytest.fail("kernel move taken"))
        for t in texts:
            assert m.consume(t), m.error
            assert m._ls == ls
    assert cc.steps.ascii_loops[ls] is True
    assert m._out_len == len(b'{"name":"abc","note":"') + sum(len(TOKENS[t]) for t in texts)
    assert m.consume(TOKENS.index(b'"}')) and m.is_accepting()
    bounded = CompiledConstraint(GRAMMARS["json"], VOCAB).matcher()
    for t in (b'{"', b'name', b'":', b'"', b'abc'):
        assert bounded.consume(TOKENS.index(t)), (t, bounded.error)
    _mask(bounded)
    assert bounded.cc.steps.ascii_loop(bounded._ls) is False  # name: maxLength 12


def test_a_bounded_string_refuses_through_the_per_byte_path() -> None:
    f = CompiledConstraint(GRAMMARS["json"], VOCAB).matcher()
    r = reference(CompiledConstraint(GRAMMARS["json"], VOCAB).matcher())
    abc = TOKENS.index(b"abc")
    for m in (f, r):
        for t in (b'{"', b'name', b'":', b'"'):
            assert m.consume(TOKENS.index(t)), m.error
        for _ in range(4):  # maxLength 12
            _mask(m)
            assert m.consume(abc), m.error
        assert not m.consume(abc)
        m.rollback(2)
        assert m.consume(abc) and m.consume(abc) and not m.consume(abc)
        assert m.consume(TOKENS.index(b'"}')) and m.consume(0) and m.is_finished()
    assert f.error is None and _hist(f) == _hist(r)
    f.rollback(2)
    r.rollback(2)
    assert not f.consume(abc) and not r.consume(abc)
    assert f.error == r.error and f.error is not None
    assert "rejected at its byte 0 (b'a')" in f.error


def test_token_steps_is_bounded() -> None:
    cc = CompiledConstraint(GRAMMARS["regex"], VOCAB)
    cache = cc.steps.token_steps
    for k in range(TOKEN_STEPS_LIMIT):
        cache[-1 - k] = 0  # keys no (state, token) has: never read
    m = cc.matcher()
    _mask(m)  # fills the rows "abc" follows
    assert m.consume(TOKENS.index(b"abc"))
    assert len(cache) == 1  # emptied at the limit, then the new entry


def test_kernel_follows_known_entries_and_refuses_the_rest() -> None:
    U, D = -2, -1  # UNKNOWN, DEAD
    a, b, c, x, z = (ord(ch) for ch in "abcxz")
    table = np.full((6, 256), U, np.int32)
    table[0, a] = 1  # state 0 --a--> 1 --a--> 1 (accepts terminal set 0)
    table[1, a] = 1
    table[1, b] = D  # b ends the lexeme of 1 ...
    table[2, b] = 3  # ... and starts one at node 1's start state 2
    table[1, c] = 4  # state 4 accepts a lazy terminal (set 1)
    table[1, z] = 5  # state 5: accid / lazyf not set
    table[3, x] = D  # 3 accepts nothing: x is refused
    accid = np.array([D, 0, D, D, 1, U], np.int32)
    lazyf = np.array([0, 0, 0, 0, 1, U], np.int32)
    trans = np.array([[1, 2], [1, U], [U, U]], np.int32)  # node x accepting set -> node
    nstart = np.array([0, 2, 0], np.int32)
    out = np.zeros(16, np.int32)

    def run(data: bytes, ls: int = 0, node: int = 0) -> tuple[int, ...]:
        return tuple(int(v) for v in _kernels.token_moves(table, accid, lazyf, trans, nstart,
                                                          data, ls, node, out))

    # (ls, node, at start, lexemes pushed, ended, first pushed, second pushed)
    assert run(b"aaa") == (1, 0, 0, 0, 0, -1, -1)  # inside one lexeme
    assert run(b"") == (0, 0, 0, 0, 0, -1, -1)
    assert run(b"aab") == (3, 1, 0, 1, 1, 0, -1) and out[0] == 0  # a lexeme of set 0 ends
    assert run(b"aab", node=1) == (3, 1, 0, 0, 1, -1, -1)  # it leaves the node alone: not pushed
    assert run(b"ac") == (0, 2, 1, 1, 1, 1, -1) and out[0] == 1  # the lazy one ends at once
    for data, ls, node in ((b"aabx", 0, 0),  # refused
                           (b"ac", 0, 1),  # trans UNKNOWN
                           (b"x", 0, 0),  # table UNKNOWN
                           (b"az", 0, 0),  # accid / lazyf of the state reached unknown
                           (b"a", 6, 0), (b"a", -1, 0), (b"a", 0, 3), (b"a", 0, -1)):  # bounds
        assert run(data, ls, node)[0] == -1, (data, ls, node)
    # three lexemes pushed (set 0 ends at b, set 1 ends lazily, set 0 ends at b again):
    # the first two are returned, all three are in out
    table[3, c] = 4  # state 3 (node 1) --c--> 4 (lazy, set 1)
    table[2, a] = 1
    trans[2, 0] = 1
    trans[1, 1] = 2
    out[:] = 7
    assert run(b"abcab") == (3, 1, 0, 3, 1, 0, 1) and list(out[:3]) == [0, 1, 0]
    accid[1] = U
    assert run(b"ab")[0] == -1  # accid of the lexeme's state unknown


def _guide(name: str, rnd: random.Random, steps: int) -> list[int]:
    """Tokens of a random walk: mostly allowed, now and then a random id."""
    m = CompiledConstraint(GRAMMARS[name], VOCAB).matcher()
    toks: list[int] = []
    for _ in range(steps):
        allowed = _allowed(m)
        t = rnd.randrange(VOCAB.size) if rnd.random() < 0.1 or not allowed else rnd.choice(allowed)
        toks.append(t)
        m.consume(t)
        if t in VOCAB.eos_ids and m.n_tokens and m._eos:
            break
    return toks


@pytest.mark.parametrize("name", ["json", "lark", "lazy"])
def test_two_threads_share_one_constraint(name: str) -> None:
    """Two threads decode their own token sequences on matchers of one fresh constraint
    (filling and reading its tables and ``token_steps`` at once, switching every few
    bytecodes); each sees the decisions, errors and masks of a sequential run."""
    rnd = random.Random(name)
    seqs = [[_guide(name, rnd, 40) for _ in range(6)] for _ in range(2)]

    def decode(cc: CompiledConstraint, seq: list[int]) -> list[tuple[bool, str | None, bytes]]:
        m = cc.matcher()
        got = []
        taken: list[int] = []
        for i, t in enumerate(seq):
            ok = m.consume(t)
            if ok:
                taken.append(t)
            got.append((ok, m.error, _mask(m).tobytes()))
            if i % 7 == 6:  # roll back fast-path consumes, then take them again
                k = min(2, len(taken))
                m.rollback(k)
                ok = all([m.consume(u) for u in taken[len(taken) - k:]])
                got.append((ok, m.error, _mask(m).tobytes()))
        return got

    def want_of(seq: list[int]) -> list[tuple[bool, str | None, bytes]]:
        return decode(CompiledConstraint(GRAMMARS[name], VOCAB), seq)

    want = [[want_of(s) for s in thread] for thread in seqs]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(3):
            shared = CompiledConstraint(GRAMMARS[name], VOCAB)
            got: list[list[Any]] = [[], []]
            errors: list[BaseException] = []

            def work(k: int, shared: CompiledConstraint = shared,
                     got: list[list[Any]] = got, errors: list[BaseException] = errors) -> None:
                try:
                    got[k] = [decode(shared, s) for s in seqs[k]]
                except BaseException as e:  # noqa: BLE001 -- reported below
                    errors.append(e)

            threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert not errors, errors
            assert got == want
    finally:
        sys.setswitchinterval(old)


def test_fast_path_with_jit_disabled() -> None:
    """The same agreement with numba's JIT off (the kernel as plain Python)."""
    import os

    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[2] / "src"), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", "fast_path_is_taken or text_tokens or kernel_follows or python_ints"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_token_kinds_are_per_vocabulary() -> None:
    """Two vocabularies of the same tokens, one with an extra EOS id: the fast path's
    per-token view (EOS or not) is each one's own."""
    other = Vocabulary.from_bytes(TOKENS, eos_ids=[0, 5], special_ids=[SPECIAL])
    g = Grammar.from_regex(r"[\x04a]+")
    for vocab, first_ok in ((VOCAB, True), (other, False)):
        m = CompiledConstraint(g, vocab).matcher()
        m.compute_mask(np.zeros(m.cc.n_words, np.uint32))
        assert m.consume(5) is first_ok, m.error
        if not first_ok:
            assert m.error is not None and m.error.startswith("EOS token 5 at byte 0")
        assert m.consume(TOKENS.index(b"a")) and m.consume(5)
        assert m._eos is not first_ok


def test_states_stay_python_ints() -> None:
    """The fast path's states are Python ints (numpy scalars would overflow in the cache
    keys, ``ls * vocabulary size + token``), also with the JIT off (see below)."""
    cc = CompiledConstraint(GRAMMARS["json"], VOCAB)
    m = cc.matcher()
    for t in (b'{"', b'name', b'":', b'"', b'abc', b'abc', b'"}'):
        _mask(m)
        assert m.consume(TOKENS.index(t)), m.error
        assert all(type(v) is int for v in (m._ls, m._node, m._rows))
    assert all(type(k) is int and type(v) is int for k, v in cc.steps.token_steps.items())
    assert cc.steps.token_steps or cc.steps.token_moves
    for (k, node), (ls, c, start, pushed) in cc.steps.token_moves.items():
        assert all(type(v) is int for v in (k, node, ls, c, *pushed)) and type(start) is bool


def test_a_move_fills_only_the_classes_of_its_bytes() -> None:
    """``consume`` follows one path: the states it crosses get the entries of its bytes
    only; a mask's walk (``ahead``) also fills the state's other cheap classes. (A count
    short enough that the state is its own mask state: the walk starts from it.)"""
    g = Grammar.from_json_schema({"anyOf": [{"type": "string", "maxLength": 20},
                                            {"enum": ["alpha", "beta", "gamma"]}]})
    moved = CompiledConstraint(g, VOCAB)
    m = moved.matcher()
    assert m.consume_bytes(b'"ab')
    walked = CompiledConstraint(g, VOCAB)
    w = walked.matcher()
    assert w.consume_bytes(b'"')
    w.compute_mask(np.zeros(walked.n_words, np.uint32))  # walks from the state after '"'

    def known(cc: CompiledConstraint, text: bytes) -> int:
        st = cc.steps
        s = int(st.nstart[0])
        for b in text:
            s = int(st.table[s, b])
        return int((st.table[s] != -2).sum())  # entries not UNKNOWN

    assert known(moved, b'"') < known(walked, b'"')
    assert known(moved, b'"') >= 1  # the byte 'a' at least
