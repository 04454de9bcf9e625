"""tether as an engine of the shared peers harness (``peers_bench.py --adapter-file``).

Loaded by the harness inside its own venv: tether is imported from this checkout's
``src`` (it needs numpy and numba there). The vocabulary-level work (token tries,
slices, kernel JIT) happens in ``__init__``, which the harness times as ``init_s``,
as it does for every engine's tokenizer object.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from peers_bench import EngineAdapter, GrammarSpec, Matcher, Unsupported, Vocab, register

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))



def json_grammar():  # type: ignore[no-untyped-def]
    """Plain JSON (the harness's LARK_JSON) in tether's grammar IR."""
    from tether.grammar.rfc8259 import json_text

    return json_text()


def regex_grammar(pattern: str):  # type: ignore[no-untyped-def]
    from tether.grammar.ir import Grammar, T, Terminal

    g = Grammar(start="start")
    g.add_terminal(Terminal("RX", regex=pattern))
    g.add_rule("start", T("RX"))
    return g


# The peers' JSON semantics: flexible whitespace (the harness forces json.dumps text, with
# ", " and ": " separators) and properties in schema order. llguidance, xgrammar,
# outlines-core and formatron all emit an object's named properties in `properties` order
# (llguidance rejects {"b": 2, "a": 1} for properties a, b), so "tether" is configured the
# same way. "tether_any" adds what no peer offers, any property order (each name at most
# once): an exact encoding needs a state per subset of the names written, so its grammars
# are larger and its compile slower; it is reported beside, not used for the bars.
JSON_OPTIONS = {"whitespace": "flexible", "property_order": "schema"}
JSON_OPTIONS_ANY = {"whitespace": "flexible", "property_order": "any"}


def schema_grammar(source: str, options: dict = JSON_OPTIONS):  # type: ignore[no-untyped-def]
    import json

    schema = json.loads(source)
    from tether.grammar.ir import Grammar

    return Grammar.from_json_schema(schema, **options)


class _TetherMatcher(Matcher):
    def __init__(self, m):  # type: ignore[no-untyped-def]
        self.m = m
        self._u32 = None
        self._src = None

    def mask(self, bitmask: np.ndarray) -> None:
        if self._src is not bitmask:
            self._src, self._u32 = bitmask, bitmask.view(np.uint32)
        self.m.compute_mask(self._u32)

    def advance(self, token_id: int) -> bool:
        return self.m.consume(token_id)

    def is_accepting(self) -> bool:
        return self.m.is_accepting()

    def reset(self) -> None:
        self.m.reset()


@register
class TetherAdapter(EngineAdapter):
    name = "tether"
    dist = None
    json_options = JSON_OPTIONS

    def __init__(self, vocab: Vocab):
        super().__init__(vocab)
        import tether.engine as te
        import tether.grammar.json_schema  # noqa: F401  (module imports belong to init, as for peers)
        import tether.parser.earley  # noqa: F401
        import tether.parser.lexer  # noqa: F401
        try:  # the JSON Schema compiler checks enum/const values with it, when installed
            import jsonschema  # noqa: F401
        except ImportError:
            pass
        from tether.engine.slices import vocab_index
        from tether.tokens.vocabulary import Vocabulary

        self.te = te
        te.warmup()  # numba's start-up, then the vocabulary's tries (built by kernels)
        self.tv = Vocabulary.from_bytes(list(vocab.tokens), eos_ids=[vocab.eos_id],
                                        special_ids=list(vocab.special_ids))
        vocab_index(self.tv)

    def version(self) -> str:
        import subprocess

        here = Path(__file__).resolve().parents[1]
        try:
            rev = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            rev = "?"
        return f"0.1.0+{rev}"

    def settings(self) -> str:
        return ("tether.engine.CompiledConstraint(grammar, Vocabulary.from_bytes(shared vocab)), one per "
                "task (no process-wide compile cache); slices on; "
                f"mask cache on; JSON Schema options {self.json_options}")

    def compile(self, spec: GrammarSpec) -> Matcher:
        if spec.kind == "json_schema":
            g = schema_grammar(spec.source, self.json_options)
        elif spec.kind == "regex":
            g = regex_grammar(spec.source)
        elif spec.kind == "cfg_json":
            g = json_grammar()
        else:
            raise Unsupported(spec.kind)
        # a constraint of its own, as every peer compiles one per task: ``te.compile``'s
        # process-wide cache would answer a repeated schema from memory, and its eviction
        # (the oldest constraint, with its rows and masks, freed) would land inside the
        # timed compile of an unrelated schema
        cc = self.te.CompiledConstraint(g, self.tv)
        return _TetherMatcher(cc.matcher())


@register
class TetherAnyOrderAdapter(TetherAdapter):
    """tether with ``property_order="any"`` (no peer's equivalent; reported beside)."""

    name = "tether_any"
    json_options = JSON_OPTIONS_ANY
