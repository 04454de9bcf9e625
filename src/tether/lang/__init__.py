"""tether.lang: the LMQL-style query language (LMQL paper, seed 000).

Code map, in reading order:

* ``syntax.py`` — query text → ``QueryAst`` (decoder / body / from / where / distribute
  clauses; prompt strings with holes, interpolations, role tags, escapes);
* ``compiler.py`` — query body → Python generator function yielding prompt events;
* ``semantics.py`` — value / Final / Follow semantics of constraints (Tables 1, 2);
* ``prefix_regex.py`` — regex prefix viability (Follow of ``REGEX`` and typed holes);
* ``holes.py`` — one hole's constraint as a lazy matcher: Follow checks, exact
  prefilters, engine masks, stop phrases, token budgets;
* ``branches.py`` — holes decoded through ``tether.decoding``: argmax / sample(n)
  branches in lockstep, scripted beam(n) over control flow;
* ``runtime.py`` — programs, executions (trace, re-played forks), ``distribute``, costs;
  ``remote.py`` — a hole on a black-box (HTTP) model; ``decorators.py`` — calling
  variable decorators;
* ``query.py`` — ``Query``, ``@query``, ``load_query``, ``run_query``;
* ``result.py`` — ``QueryResult`` (trace, variables, holes, n results);
* ``lmql.py`` — LMQL's Python surface (``tether.compat.lmql``), what ``import lmql`` gives
  inside a query: it registers itself in ``surface.py``, which the runtime reads.

A query is Python code run with the caller's rights: load and run trusted query text
only. The server never executes query text from a request.
"""

from __future__ import annotations

from tether.lang import lmql  # LMQL's surface: registers what query programs see as ``lmql``
from tether.lang.query import Query, load_query, query, run_query
from tether.lang.result import HoleRecord, QueryResult, Segment
from tether.lang.runtime import NestedCall, Variable, post, pre
from tether.lang.syntax import DecoderSpec, QueryAst, parse_query, parse_template

__all__ = [
    "DecoderSpec",
    "HoleRecord",
    "NestedCall",
    "Query",
    "QueryAst",
    "QueryResult",
    "Segment",
    "Variable",
    "lmql",
    "load_query",
    "parse_query",
    "parse_template",
    "post",
    "pre",
    "query",
    "run_query",
]
