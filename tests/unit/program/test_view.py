"""The notebook view (`tether.program.view`): holes highlighted and named, hovers, and no
text — naughty strings included — able to write markup."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tether.lang.result import HoleRecord, QueryResult, Segment
from tether.models.scripted import ScriptedModel
from tether.program import Generation, ModelState, assistant, gen, generate, regex, select, user
from tether.program.view import (
    MAX_CHARS,
    MAX_TOKEN_IDS,
    HoleInfo,
    Span,
    escape,
    hover_text,
    render_html,
    value_repr,
)

BLNS = Path(__file__).resolve().parents[4] / "shared" / "data" / "strings" / "big-list-of-naughty-strings" / "blns.json"
TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
TRIMMING = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


class Parsed(HTMLParser):
    """The tags, the text, and each hole (its name attribute, label, text and title) of a view."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.holes: list[dict[str, str]] = []
        self._stack: list[str] = []  # "hole", "label" or "other" per open element
        self.feed(markup)
        self.close()
        assert not self._stack, "unbalanced tags"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if a.get("class") == "tether-hole":
            self.holes.append({"name": a.get("data-name") or "", "title": a.get("title") or "", "label": "", "text": ""})
            self._stack.append("hole")
        elif self._stack and self._stack[-1] == "hole":
            self._stack.append("label")
        else:
            self._stack.append("other")

    def handle_endtag(self, tag: str) -> None:
        self._stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._stack and self._stack[-1] in ("hole", "label"):
            self.holes[-1]["text" if self._stack[-1] == "hole" else "label"] += data

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise AssertionError(f"unexpected self-closing <{tag}>")


def shown(text: str) -> str:
    """What the view shows of ``text`` (control pictures, no surrogates)."""
    return html.unescape(escape(text))


def naughty() -> list[str]:
    if not BLNS.exists():
        pytest.skip(f"the naughty strings are not at {BLNS}")
    return [s for s in json.loads(BLNS.read_text(encoding="utf-8")) if s]


def test_escape_keeps_text_and_writes_no_markup() -> None:
    assert escape('<b a="1">&\'') == "&lt;b a=&quot;1&quot;&gt;&amp;&#x27;"
    assert escape("a\x00b\x1b[31m\x7f\tc\nd") == "a\u2400b\u241b[31m\u2421\tc\nd"
    assert escape("x\ud800y") == "x\ufffdy"


def test_naughty_strings_cannot_inject_markup() -> None:
    strings = naughty()
    spans, infos = [], []
    for i, s in enumerate(strings):
        info = HoleInfo(name=s, value=s, token_ids=(1, 2), logprob=-1.5, error=s if i % 7 == 0 else None)
        infos.append(info)
        spans += [Span(s), Span(s, "hole", info), Span(s, "markup"), Span(s, "input")]
    p = Parsed(render_html(spans, title=strings[0]))
    assert set(p.tags) == {"div", "span"}  # nothing but the elements the view writes
    # each string: as text, as the hole's name label and text, as markup, as input
    assert "".join(p.text) == shown(strings[0]) + "".join(shown(s) * 5 for s in strings)
    assert len(p.holes) == len(strings)
    for s, info, hole in zip(strings, infos, p.holes, strict=True):
        assert hole["name"] == hole["label"] == hole["text"] == shown(s)
        assert hole["title"] == shown(hover_text(info))


def test_hover_shows_value_tokens_and_logprob() -> None:
    text = hover_text(HoleInfo(name="age", value=42, token_ids=tuple(range(40)), logprob=-0.123456, note="finish: stop"))
    assert text.splitlines() == ["name: age", "value: 42", f"tokens: 40 [{', '.join(map(str, range(MAX_TOKEN_IDS)))}, … 8 more]",
                                 "log-probability: -0.1235", "finish: stop"]
    bad = hover_text(HoleInfo(name=None, value=None, error="cut by the token budget"))
    assert bad.splitlines() == ["name: output", "error: cut by the token budget"]
    assert "tokens: 3" in hover_text(HoleInfo(name="x", value="a", n_tokens=3))


def test_value_repr_is_bounded_and_never_raises() -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    class Worse:
        def __repr__(self) -> str:
            return 3  # type: ignore[return-value]

    assert "Hostile" in value_repr(Hostile())
    assert "Worse" in value_repr(Worse())
    assert len(value_repr("x" * 10_000)) <= 400
    deep: list[object] = []
    for _ in range(10_000):
        deep = [deep]
    assert value_repr(deep).startswith("[[[")


def test_the_view_is_bounded() -> None:
    p = Parsed(render_html([Span("a" * MAX_CHARS), Span("b" * 10, "hole", HoleInfo(name="x")), Span("c" * 5)]))
    assert p.text == ["a" * MAX_CHARS, "… 15 more characters not shown"] and p.holes == []


def test_generation_view() -> None:
    g = generate(ScriptedModel(seed=1), "Age <b>: ", regex("[0-9]{2}"))
    p = Parsed(g._repr_html_())
    assert "".join(p.text) == "Age <b>: output" + g.text
    [hole] = p.holes
    assert hole["text"] == g.text and hole["name"] == "output"
    assert f"value: {g.value!r}" in hole["title"] and f"tokens: {len(g.tokens)}" in hole["title"]
    assert "log-probability: " in hole["title"]
    bad = Generation(text="<script>", error="cut <here>", prompt="p")
    p = Parsed(bad._repr_html_())
    assert p.holes[0]["text"] == "<script>" and "error: cut <here>" in p.holes[0]["title"]
    assert repr(bad).startswith("Generation(text='<script>'")  # the plain-text fallback is unchanged


def test_model_state_view_plain() -> None:
    model = ScriptedModel(target="The url is https://www.abc.com yes")
    lm = ModelState(model) + "The url is http" + gen("url", stop=" ") + " " + select(["yes", "no"], name="ok")
    p = Parsed(lm._repr_html_())
    assert [h["name"] for h in p.holes] == ["url", "ok"]
    assert [h["text"] for h in p.holes] == ["s://www.abc.com", "yes"]
    assert "value: 'yes'" in p.holes[1]["title"]
    assert "".join(p.text) == "The url is http" + "url" + "s://www.abc.com " + "ok" + "yes"
    assert repr(lm).startswith("ModelState('scripted'")


@pytest.mark.parametrize("template", [TEMPLATE, TRIMMING])
def test_model_state_view_with_turns(template: str) -> None:
    model = ScriptedModel(seed=2)
    model.chat_template = template  # type: ignore[attr-defined]
    lm = ModelState(model)
    with user():
        lm += "Pick one <now>. "
    with assistant():
        lm += " " + select(["aa", "bb"], name="pick") + " "
        views = [(Parsed(lm._repr_html_()), str(lm))]  # the turn still open
    views.append((Parsed(lm._repr_html_()), str(lm)))
    assert views[0][1] != views[1][1]
    for view, text in views:
        assert [h["name"] for h in view.holes] == ["pick"] and view.holes[0]["text"] == lm["pick"]
        # the view shows exactly what str(lm) shows, plus the hole's name label
        assert "".join(view.text) == text.replace(lm["pick"], "pick" + lm["pick"], 1)
        assert "<|user|>" in "".join(view.text)


def test_model_state_view_falls_back_to_the_text() -> None:
    """A template that rewrites the content: the view is the text, no hole located."""
    model = ScriptedModel(seed=2)
    model.chat_template = ("{% for m in messages %}[{{ m.role }}]{{ m.content | upper }}\n{% endfor %}"
                           "{% if add_generation_prompt %}[assistant]{% endif %}")
    lm = ModelState(model) + user("hi") + assistant(select(["aa", "bb"], name="pick"))
    p = Parsed(lm._repr_html_())
    assert p.holes == [] and "".join(p.text) == str(lm)


def test_query_result_view() -> None:
    holes = [HoleRecord("X", " a", " a", stopped="eos", n_tokens=2, logprob=-0.5),
             HoleRecord("X", "<b>", "<b>", stopped="budget", n_tokens=3, satisfied=False, logprob=-2.0),
             HoleRecord("Y", "4", 4, stopped="supplied")]
    segments = [Segment("role", "<|user|>", "user"), Segment("text", "Q:"), Segment("hole", " a", "X"),
                Segment("input", "typed <i>"), Segment("hole", "<b>", "X"), Segment("hole", "4", "Y")]
    r = QueryResult("Q: a", {"X": "<b>", "Y": 4}, holes, segments)
    p = Parsed(r._repr_html_())
    assert [(h["name"], h["text"]) for h in p.holes] == [("X", " a"), ("X", "<b>"), ("Y", "4")]
    assert "log-probability: -0.5" in p.holes[0]["title"] and "tokens: 2" in p.holes[0]["title"]
    assert "violates" in p.holes[1]["title"]
    assert "tokens" not in p.holes[2]["title"] and "stopped: supplied" in p.holes[2]["title"]
    assert "".join(p.text) == "<|user|>Q:X a" + "typed <i>" + "X<b>" + "Y4"
