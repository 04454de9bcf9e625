"""End-to-end invariant: a hole the runtime ends by itself (end of sequence or a stop
phrase) always satisfies its constraint; only a token budget or a dead end (no token
allowed) may leave it violated, and then the result says so."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lang_rule_model import rule_model

from tether.lang import run_query

CONSTRAINTS = [
    'X in [" yes", " no", " blue sky"]', "len(X) < 6", "len(TOKENS(X)) < 4", 'STOPS_AT(X, ".")',
    'not "e" in X', "len(WORDS(X)) < 3", "INT(X)", 'REGEX(X, r" ?[a-c]+")', 'STOPS_BEFORE(X, " ")',
    "len(X) > 3",
]
WANTS = [" yes", " the blue sky.", " 123 abc", " abc cab.", " hello there", "", " no no no."]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(CONSTRAINTS), min_size=1, max_size=3, unique=True), st.sampled_from(WANTS))
def test_self_ended_holes_satisfy_their_constraint(cs: list[str], want: str) -> None:
    m = rule_model({"Q:": want})
    r = run_query(f'"Q:[X]" where {" and ".join(cs)}', model=m, max_tokens=12)
    h = r.holes[0]
    if h.stopped in ("eos", "stop"):
        assert h.satisfied, (cs, want, h)
    else:
        assert h.stopped in ("budget", "masked"), h
