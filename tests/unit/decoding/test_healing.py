"""Token healing: the prompt's last token is removed and re-generated, extended."""

from __future__ import annotations

from finite_matcher import FiniteMatcher

from tether.decoding import Argmax, Beam, Sample, decode, plan_healing
from tether.models.scripted import ScriptedModel


def test_plan_removes_a_token_that_others_extend() -> None:
    m = ScriptedModel()
    p = m.tokenize("The url is http", add_bos=True)
    kept, removed = plan_healing(m.vocabulary, p)
    assert removed == b"http" and kept == p[:-1]


def test_plan_keeps_a_token_nothing_extends() -> None:
    m = ScriptedModel()
    p = m.tokenize("say ://", add_bos=True)
    assert plan_healing(m.vocabulary, p) == (p, b"")


def test_plan_never_removes_bos() -> None:
    m = ScriptedModel()
    p = m.tokenize("", add_bos=True)
    assert plan_healing(m.vocabulary, p) == (p, b"")


def test_healed_generation_extends_the_removed_text() -> None:
    m = ScriptedModel(target="The url is https://www.abc.com")
    p = m.tokenize("The url is http", add_bos=True)
    kept, removed = plan_healing(m.vocabulary, p)
    [d] = decode(m, kept, None, Argmax(), heal=removed)
    assert d.text == b"s://www.abc.com"  # removed text is not part of the output
    assert m.vocabulary.decode(d.tokens).startswith(b"http")


def test_healing_with_a_constraint_on_the_rest() -> None:
    m = ScriptedModel(seed=1)
    p = m.tokenize("The url is http", add_bos=True)
    kept, removed = plan_healing(m.vocabulary, p)
    for s in range(6):
        for d in decode(m, kept, FiniteMatcher(["s://a.com", "://b.com"], m.vocabulary), Sample(seed=s, n=2), heal=removed):
            assert d.text in (b"s://a.com", b"://b.com")
            assert m.vocabulary.decode(d.tokens) in (b"https://a.com", b"http://b.com")


def test_healing_in_beam_search() -> None:
    m = ScriptedModel(seed=2)
    p = m.tokenize("The url is http", add_bos=True)
    kept, removed = plan_healing(m.vocabulary, p)
    ds = decode(m, kept, FiniteMatcher(["s://a.com", "://b.com"], m.vocabulary), Beam(n=2), heal=removed)
    assert sorted(d.text for d in ds) == [b"://b.com", b"s://a.com"]
