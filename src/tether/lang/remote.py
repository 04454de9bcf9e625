"""A hole on a black-box model (an HTTP API without logits): decoded by its server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.errors import ModelError
from tether.lang.result import HoleRecord
from tether.lang.semantics import FIN, HoleState, evaluate, mentions, plan

if TYPE_CHECKING:
    from tether.lang.runtime import Execution, HoleRequest, Runtime


def decode_hole_remote(rt: Runtime, ex: Execution, req: HoleRequest) -> HoleRecord:
    """A hole on a black-box model (no logits): the exact parts of the constraint go
    to the server (choices, one regex, stop phrases, token budget, via
    ``tether.program.generate``); the whole constraint is then checked with Final
    semantics and the result says whether it holds."""
    from tether.program import generate, regex  # noqa: PLC0415

    st = HoleState(req.name, "", False, 0, req.scope, req.future - {req.name} - req.scope.keys(), None)
    p = plan(req.constraint, st)
    output: Any = None
    if req.spec is not None:  # a typed hole: the type goes to the server (response_format, as generate)
        if req.after is not None:
            raise ModelError(f"hole [{req.name}]: AFTER(...) needs a model with logits; the server of a "
                             "black-box model cannot enforce a triggered region")
        output = req.output
    elif p.choices is not None:
        output = list(p.choices)
    elif len(p.regexes) == 1:
        output = regex(p.regexes[0])
    budget = rt.max_tokens if p.max_tokens is None else min(rt.max_tokens, p.max_tokens)
    before = rt.model.costs.generate_calls
    # role tags on a black-box model: its chat interface, when the hole opens a fresh
    # assistant turn (a partly written turn cannot be continued through a chat API)
    prompt: Any = ex.trace()
    chat = ex.chat_messages() if not rt.chat_roles else None
    if chat is not None and chat[1]["role"] == "assistant" and not chat[1]["content"] and chat[0]:
        prompt = chat[0]
    g = generate(rt.model, prompt, output, decoder=rt.decoder.method if rt.decoder.method == "sample" else "argmax",
                 max_tokens=max(budget, 1), temperature=rt.temperature if rt.decoder.method == "sample" else None,
                 stop=[s for s, _ in p.stops] or None, healing=False)
    if rt.model.costs.generate_calls == before:
        rt.model.costs.generate_calls += 1
    text = g.text
    how = "budget" if g.finish_reason == "length" else "eos"
    if p.stops and g.finish_reason == "stop":
        kept = [s for s, keep in p.stops if keep]
        if len(p.stops) == 1 and kept:  # the server drops the stop text; STOPS_AT keeps it
            text += kept[0]
            how = "stop"
    ok = True
    if req.constraint is not None:  # as `record`: satisfied only when the final value makes it true
        fv = evaluate(req.constraint, st.extended(text, 0, True))
        later = any(mentions(req.constraint, h) for h in st.future)
        ok = bool(fv.value) if fv.ann == FIN else later
    if req.spec is not None and g.error is not None:  # the server's text is no complete value of the type
        ok = False
    return HoleRecord(req.name, text, req.convert(text), query=req.query, stopped=how, satisfied=ok)
