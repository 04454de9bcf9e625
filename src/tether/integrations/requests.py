"""Per-request constraints in a serving engine's persistent batch (no engine imported).

`request_output(spec)` reads a request's constraint, ``{"json" | "regex" | "choice" |
"grammar": ...}`` (what ``SamplingParams.extra_args["tether"]`` holds in vLLM), into an
``output`` for `tether.program.outputs`; it is what ``validate_params`` calls, so a bad
request is refused before it runs. `BatchConstraints` keeps one matcher per batch row
and follows the engine's batch edits — requests added to a row, removed, moved one way
onto another row (the target's old state is dropped) or swapped — and reads each
request's new output tokens from the live list the engine hands over at ``add``.

`BatchConstraints.prefetch` starts a step's masks on a background thread once the
step's batch is known (before the model's forward pass), so that they are computed
while the model runs; `BatchConstraints.masks` takes them if nothing changed since, and
computes them again otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import CompiledConstraint, Matcher, compute_masks
from tether.errors import ConstraintError, limited
from tether.grammar import Grammar
from tether.limits import check, current
from tether.program.outputs import regex
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, ids_to_mask

KINDS = ("json", "regex", "choice", "grammar")


def json_text(text: str, place: str, expected: str = "JSON") -> Any:
    """``text`` parsed as JSON, its length checked against ``max_text_chars`` first.

    Raises:
        LimitError: ``text`` is longer than ``max_text_chars``.
        ConstraintError: not JSON (``place`` is not ``expected``: the parser's reason).
    """
    check("max_text_chars", len(text), place)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConstraintError(f"{place} is not {expected}: {exc}") from None


def request_output(spec: Any) -> Any:
    """The ``output`` a request's constraint names (validated; nothing compiled).

    ``spec`` is a mapping with exactly one of: ``json`` (a JSON Schema: dict, bool or
    JSON text), ``regex`` (a pattern string), ``choice`` (a non-empty list of strings),
    ``grammar`` (GBNF text; ``{"grammar": text, "syntax": "lark"}`` for Lark).

    Raises:
        ConstraintError: a malformed spec (names the key); SchemaError, RegexError,
            GrammarError, LimitError from lowering. All are ValueErrors.
    """
    from tether.program.outputs import output_spec

    if not isinstance(spec, Mapping):
        raise ConstraintError(f"the tether constraint must be an object, not {type(spec).__name__}")
    keys = [k for k in spec if k in KINDS]
    extra = sorted(str(k) for k in spec if k not in (*KINDS, "syntax"))
    if len(keys) != 1 or extra:
        raise ConstraintError(
            f"the tether constraint needs exactly one of {', '.join(KINDS)}"
            + (f"; unknown keys: {', '.join(map(repr, extra))}" if extra else f"; got {sorted(map(str, spec))}"))
    kind, value = keys[0], spec[keys[0]]
    syntax = spec.get("syntax", "gbnf")
    if "syntax" in spec and kind != "grammar":
        raise ConstraintError("'syntax' applies to 'grammar' only")
    if kind == "json":
        if isinstance(value, str):
            value = json_text(value, "tether.json")
        if not isinstance(value, dict | bool):
            raise ConstraintError(f"tether.json must be a JSON Schema (object or boolean), not {limited(value)}")
        output: Any = value
    elif kind == "regex":
        if not isinstance(value, str):
            raise ConstraintError(f"tether.regex must be a string, not {limited(value)}")
        output = regex(value)
    elif kind == "choice":
        if (not isinstance(value, list | tuple) or not value
                or not all(isinstance(c, str) for c in value)):
            raise ConstraintError(f"tether.choice must be a non-empty list of strings, not {limited(value)}")
        check("max_alternatives", len(value), "tether.choice")
        output = list(value)
    else:
        if not isinstance(value, str):
            raise ConstraintError(f"tether.grammar must be a string, not {limited(value)}")
        if syntax == "gbnf":
            output = Grammar.from_gbnf(value, source="tether.grammar")
        elif syntax == "lark":
            output = Grammar.from_lark(value, source="tether.grammar")
        else:
            raise ConstraintError(f"tether.syntax must be 'gbnf' or 'lark', not {limited(syntax)}")
    output_spec(output)  # lowers to a grammar: schema and regex errors surface here
    return output


@dataclass
class _Row:
    matcher: Matcher
    tokens: Sequence[int]  # the engine's live list of this request's output tokens
    consumed: int = 0
    done: bool = False
    error: str | None = None


@dataclass(frozen=True)
class _Prefetch:
    """Masks started on the background thread, and the batch they were started for."""

    future: Future[NDArray[np.uint32]]
    index: list[int]
    rows: list[_Row]
    consumed: list[int]

    def matches(self, index: list[int], rows: list[_Row]) -> bool:
        """Whether the batch is still the one the masks were computed for: the same rows
        at the same indices, none of which consumed a token since."""
        return (self.index == index and all(a is b for a, b in zip(self.rows, rows, strict=True))
                and self.consumed == [r.consumed for r in rows])


class BatchConstraints:
    """Matchers of the constrained requests of a persistent batch, by row index.

    Args:
        vocabulary: the model's vocabulary (``n_logits`` = the logits' width).
        compile_output: ``output -> CompiledConstraint`` (cached by the caller or engine).

    Attributes:
        prefetched: steps whose masks came from `prefetch` (computed during the forward pass).
        stale: prefetches whose masks were not used (a token, an edit or another prefetch
            came before `masks`).
    """

    def __init__(self, vocabulary: Vocabulary,
                 compile_output: Callable[[Any], CompiledConstraint]) -> None:
        self.vocabulary = vocabulary
        self._compile = compile_output
        self.rows: dict[int, _Row] = {}
        self._eos_mask = ids_to_mask(vocabulary.eos_ids, vocabulary.size)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: _Prefetch | None = None
        self.prefetched = 0
        self.stale = 0

    # -- batch edits, in the engine's order: removed, added, moved -----------------------
    def remove(self, index: int) -> None:
        self._drop()
        self.rows.pop(index, None)

    def add(self, index: int, spec: Any, output_tokens: Sequence[int]) -> None:
        """A request now at ``index``: constrained by ``spec`` (None: unconstrained, and
        any stale state of the row is dropped). ``output_tokens`` is read as it grows."""
        self._drop()
        if spec is None:
            self.rows.pop(index, None)
            return
        cc = self._compile(request_output(spec))
        self.rows[index] = _Row(cc.matcher(), output_tokens)

    def move(self, src: int, dst: int, swap: bool) -> None:
        """One-way move ``src`` → ``dst`` (whatever ``dst`` held is dropped) or a swap."""
        self._drop()
        a, b = self.rows.pop(src, None), self.rows.pop(dst, None)
        if a is not None:
            self.rows[dst] = a
        if swap and b is not None:
            self.rows[src] = b

    # -- per step ---------------------------------------------------------------------------
    def sync(self) -> None:
        """Consume every constrained request's new output tokens."""
        self._drop()
        eos = self.vocabulary.eos_ids
        for row in self.rows.values():
            toks = row.tokens
            while row.consumed < len(toks) and not row.done and row.error is None:
                t = int(toks[row.consumed])
                row.consumed += 1
                if t in eos and row.matcher.is_accepting():
                    row.done = True
                elif not row.matcher.consume(t):
                    row.error = row.matcher.error or f"token {t} refused"

    def prefetch(self) -> None:
        """Consume the new tokens, then start this batch's masks on the background thread.
        Call it when the step's batch is settled, before the forward pass; `masks` takes
        the result. The matchers are not touched by anything else until then: every
        edit and `sync` first waits for the background work."""
        self.sync()
        if not self.rows:
            return
        index = sorted(self.rows)
        rows = [self.rows[i] for i in index]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-masks")
        self._pending = _Prefetch(self._pool.submit(self._fill, rows), index, rows,
                                  [r.consumed for r in rows])

    def _take(self) -> _Prefetch | None:
        """Wait for the background masks, if any were started; return them (once)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.future.exception()  # waits; an error is raised by the caller of result()
        return pending

    def _drop(self) -> None:
        """Before anything touches the matchers: wait for the background masks, unused."""
        if self._take() is not None:
            self.stale += 1

    def _fill(self, rows: list[_Row]) -> NDArray[np.uint32]:
        """The rows' masks: the live rows' in one `tether.engine.compute_masks` call (per
        ``Limits.max_batch`` rows), EOS only for a finished or refused row."""
        out = allocate_mask(self.vocabulary.size, batch=max(len(rows), 1))[: len(rows)]
        live: list[Matcher] = []
        where: list[int] = []
        for k, row in enumerate(rows):
            if row.done or row.error is not None:
                out[k] = self._eos_mask
            else:
                live.append(row.matcher)
                where.append(k)
        step = current().max_batch
        for a in range(0, len(live), step):
            compute_masks(live[a:a + step], out, rows=where[a:a + step])
        return out

    def masks(self) -> tuple[list[int], NDArray[np.uint32]]:
        """The constrained rows (sorted) and their masks (``uint32[rows, words]``): a live
        row's allowed tokens; a finished or refused row allows EOS only. The masks
        `prefetch` started are used when the batch has not changed since."""
        pending = self._take()
        self.sync()
        index = sorted(self.rows)
        rows = [self.rows[i] for i in index]
        if pending is not None:
            if pending.matches(index, rows):
                self.prefetched += 1
                return index, pending.future.result()
            self.stale += 1
        return index, self._fill(rows)


__all__ = ["BatchConstraints", "KINDS", "request_output"]
