"""The notebook view: text with its holes highlighted and named, as HTML.

Jupyter and other notebooks call ``_repr_html_`` on the last value of a cell; `Generation`,
`tether.program.state.ModelState` and LMQL query results (`tether.lang.result.QueryResult`)
answer with `render_html`. A result is first written as `Span` pieces — plain text, a
hole (`HoleInfo`: name, value, tokens, log-probability, error), chat-template markup or
user input — and the spans become one ``<div>``:

* holes on a coloured background with their name in a small label before them (red
  where the hole's value is missing or violates its constraint); hovering shows the
  name, the value, the tokens and the log-probability where they are known (the
  ``title`` attribute);
* chat-template markup dimmed, user input (LMQL ``input()``) in green;
* inline styles only (notebooks strip ``<style>`` elements from untrusted output).

Every piece of text is HTML-escaped (attributes too), C0 control characters are shown
as their Unicode control pictures and lone surrogates as U+FFFD, so no text — a prompt,
a model's output, a value's ``repr`` — can write markup or break the notebook's JSON.
The view is bounded: at most `MAX_CHARS` characters of text, each value's ``repr`` cut
to `MAX_VALUE_CHARS`, at most `MAX_TOKEN_IDS` token ids listed.

The objects keep their plain-text ``__repr__`` and ``__str__``; this module only adds
the HTML.
"""

from __future__ import annotations

import html
import re
import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from tether.program.generate import Generation

MAX_CHARS = 100_000  # characters of text shown in one view
MAX_VALUE_CHARS = 400  # characters of one value's repr in a hover
MAX_TOKEN_IDS = 32  # token ids listed in a hover

SpanKind = Literal["text", "hole", "markup", "input"]

_STYLE = {
    "view": "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;"
            "line-height:1.6;white-space:pre-wrap;word-break:break-word;margin:0",
    "hole": "background:#dbeafe;color:#1e3a8a;border-radius:3px;padding:0 1px",
    "bad": "background:#fee2e2;color:#7f1d1d;border-radius:3px;padding:0 1px",
    "label": "font-size:10px;color:#1d4ed8;background:#eff6ff;border:1px solid #93c5fd;"
             "border-radius:3px;padding:0 2px;margin-right:1px;vertical-align:super",
    "bad_label": "font-size:10px;color:#b91c1c;background:#fef2f2;border:1px solid #fca5a5;"
                 "border-radius:3px;padding:0 2px;margin-right:1px;vertical-align:super",
    "markup": "color:#9ca3af",
    "input": "color:#166534;background:#dcfce7",
    "note": "color:#6b7280;font-style:italic",
}


@dataclass(frozen=True)
class HoleInfo:
    """What the hover of one hole shows.

    Attributes:
        name: the hole's name (None: unnamed, shown as ``output``).
        value: the typed value (None with ``error`` when there is none).
        token_ids: the generated token ids, where known.
        n_tokens: how many tokens (None: ``len(token_ids)``, or unknown when both are empty).
        logprob: the log-probability of the tokens (None: unknown).
        error: why the value is missing, or which constraint it violates.
        note: one more line (how decoding ended).
    """

    name: str | None = None
    value: Any = None
    token_ids: tuple[int, ...] = ()
    n_tokens: int | None = None
    logprob: float | None = None
    error: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Span:
    """A piece of a view: its text and what it is (``hole`` spans carry their `HoleInfo`)."""

    text: str
    kind: SpanKind = "text"
    hole: HoleInfo | None = None


_REPR = reprlib.Repr()
_REPR.maxstring = MAX_VALUE_CHARS
_REPR.maxother = MAX_VALUE_CHARS
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 12


def value_repr(value: Any) -> str:
    """``repr(value)``, bounded in length and depth; never raises (a value's own
    ``__repr__`` may)."""
    try:
        text = _REPR.repr(value)
    except Exception as exc:  # noqa: BLE001 -- a display must not fail on a user's __repr__
        text = f"<{type(value).__name__}: repr failed ({type(exc).__name__})>"
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _clean(text: str) -> str:
    """``text`` safe to write into HTML and a notebook's JSON: lone surrogates become
    U+FFFD, C0 controls (but tab, newline, carriage return) and DEL their control
    pictures (U+2400 + code)."""
    return text.translate(_CONTROLS) if _UNSAFE.search(text) else text


_CONTROLS = ({c: 0x2400 + c for c in range(32) if c not in (9, 10, 13)} | {127: 0x2421}
             | dict.fromkeys(range(0xD800, 0xE000), 0xFFFD))
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def escape(text: str) -> str:
    """``text`` as HTML text or attribute content (quotes escaped too)."""
    return html.escape(_clean(text), quote=True)


def hover_text(info: HoleInfo) -> str:
    """The lines of a hole's hover: name, value, tokens, log-probability, error."""
    lines = [f"name: {info.name if info.name is not None else 'output'}"]
    if info.error is None or info.value is not None:
        lines.append(f"value: {value_repr(info.value)}")
    n = info.n_tokens if info.n_tokens is not None else (len(info.token_ids) if info.token_ids else None)
    if n is not None:
        ids = ""
        if info.token_ids:
            shown = ", ".join(map(str, info.token_ids[:MAX_TOKEN_IDS]))
            more = f", … {len(info.token_ids) - MAX_TOKEN_IDS} more" if len(info.token_ids) > MAX_TOKEN_IDS else ""
            ids = f" [{shown}{more}]"
        lines.append(f"tokens: {n}{ids}")
    if info.logprob is not None:
        lines.append(f"log-probability: {info.logprob:.4g}")
    if info.note:
        lines.append(info.note)
    if info.error:
        lines.append(f"error: {info.error[:MAX_VALUE_CHARS]}")
    return "\n".join(lines)


def render_html(spans: Iterable[Span], *, title: str | None = None) -> str:
    """The spans as one HTML ``<div>`` (see the module docstring)."""
    out = [f'<div class="tether-view" style="{_STYLE["view"]}">']
    if title:
        out.append(f'<div style="{_STYLE["note"]}">{escape(title)}</div>')
    budget = MAX_CHARS
    hidden = 0
    for span in spans:
        if budget <= 0:
            hidden += len(span.text)
            continue
        text = span.text
        if len(text) > budget:
            hidden += len(text) - budget
            text = text[:budget]
        budget -= len(text)
        out.append(_span_html(span, text))
    if hidden:
        out.append(f'<span style="{_STYLE["note"]}">… {hidden} more characters not shown</span>')
    out.append("</div>")
    return "".join(out)


def _span_html(span: Span, text: str) -> str:
    body = escape(text)
    if span.kind == "hole":
        info = span.hole or HoleInfo()
        bad = info.error is not None
        name = info.name if info.name is not None else "output"
        label = f'<span style="{_STYLE["bad_label" if bad else "label"]}">{escape(name)}</span>'
        return (f'<span class="tether-hole" data-name="{escape(name)}" title="{escape(hover_text(info))}" '
                f'style="{_STYLE["bad" if bad else "hole"]}">{label}{body}</span>')
    if span.kind == "markup":
        return f'<span style="{_STYLE["markup"]}">{body}</span>'
    if span.kind == "input":
        return f'<span title="user input" style="{_STYLE["input"]}">{body}</span>'
    return body


# -- the results that have a view ------------------------------------------------------------


def generation_hole(generation: Generation, name: str | None = None) -> HoleInfo:
    """The hover of a generation's output."""
    return HoleInfo(name=name, value=generation.value, token_ids=tuple(generation.tokens),
                    logprob=generation.logprob if generation.tokens else None, error=generation.error,
                    note=f"finish: {generation.finish_reason}")


def generation_html(generation: Generation) -> str:
    """`Generation._repr_html_`: the prompt, then the output as one hole."""
    spans = [Span(generation.prompt), Span(generation.text, "hole", generation_hole(generation))]
    return render_html(spans)


class TraceSegment(Protocol):
    """A piece of a query's trace (`tether.lang.result.Segment`)."""

    @property
    def kind(self) -> str: ...  # "text", "hole", "role" or "input"

    @property
    def text(self) -> str: ...

    @property
    def name(self) -> str: ...


class TraceHole(Protocol):
    """One hole of a query run (`tether.lang.result.HoleRecord`)."""

    @property
    def name(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def value(self) -> Any: ...

    @property
    def stopped(self) -> str: ...

    @property
    def n_tokens(self) -> int: ...

    @property
    def satisfied(self) -> bool: ...

    @property
    def logprob(self) -> float: ...


def trace_html(segments: Sequence[TraceSegment], holes: Sequence[TraceHole]) -> str:
    """A query result's ``_repr_html_``: its trace, each hole segment matched to the
    hole record of the same name and text (the first not yet matched), in order."""
    unused = list(holes)
    spans = []
    for seg in segments:
        if seg.kind == "hole":
            rec = _take(unused, seg.name, seg.text)
            spans.append(Span(seg.text, "hole", _trace_hole(seg.name, rec)))
        elif seg.kind == "role":
            spans.append(Span(seg.text, "markup"))
        elif seg.kind == "input":
            spans.append(Span(seg.text, "input"))
        else:
            spans.append(Span(seg.text))
    return render_html(spans)


def _take(holes: list[TraceHole], name: str, text: str) -> TraceHole | None:
    for want_text in (True, False):
        for i, h in enumerate(holes):
            if h.name == name and (not want_text or h.text == text):
                return holes.pop(i)
    return None


def _trace_hole(name: str, rec: TraceHole | None) -> HoleInfo:
    if rec is None:
        return HoleInfo(name=name)
    decoded = rec.stopped not in ("supplied", "nested", "distribute")
    return HoleInfo(name=name, value=rec.value, n_tokens=rec.n_tokens if decoded else None,
                    logprob=rec.logprob if decoded or rec.stopped == "distribute" else None,
                    error=None if rec.satisfied else "the value violates the hole's constraint",
                    note=f"stopped: {rec.stopped}" if rec.stopped else "")
