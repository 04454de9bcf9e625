"""A deterministic rule-driven model for the query-language tests.

``rule_model({"trigger": "continuation", ...})``: after the last occurrence of a trigger
in the text, the model wants to write its continuation (longest tokens first), then EOS.
Where no trigger leads the text, it wants the tokens that complete one and go on with its
continuation (a prompt whose last token token healing took back is written again).
Off-script text gets small deterministic noise, so decoding stays reproducible.
"""

from __future__ import annotations

import numpy as np

from tether.models.scripted import DEFAULT_TOKENS, ScriptedModel

TOKENS = [*DEFAULT_TOKENS, " blue", " green", " grey", " yes", " no", " Paris", " Lyon", "Par", "is",
          " one", " star", " stars", " three", " five", "ab", "abc", ".\n", " sky", " x"]


def _rule(rules: dict[str, str], text: str) -> tuple[str | None, int]:
    """The continuation of the trigger that occurs last in ``text``, and where it starts."""
    best, at = None, -1
    for trig, cont in rules.items():
        i = text.rfind(trig)
        if i >= 0 and i + len(trig) >= at:
            best, at = cont, i + len(trig)
    return best, at


def rule_model(rules: dict[str, str], tokens: list[str] | None = None) -> ScriptedModel:
    box: dict[str, ScriptedModel] = {}

    def script(toks: list[int]) -> np.ndarray:
        m = box["m"]
        v = m.vocabulary
        text = v.decode(t for t in toks if t != v.bos_id).decode("utf-8", "ignore")
        logits = np.zeros(v.n_logits, dtype=np.float32)
        rng = np.random.default_rng(len(toks))
        logits += rng.standard_normal(v.n_logits).astype(np.float32) * 0.1
        best, at = _rule(rules, text)
        if best is not None and best.startswith(text[at:]):
            rest = best[len(text) - at:].encode()
            if not rest:
                logits[v.eos_ids[0]] += 30.0
            for i, t in enumerate(v.tokens):
                if t and rest.startswith(t):
                    logits[i] += 10.0 + len(t)
            return logits
        # off-script: tokens that complete a trigger and go on with its continuation (the
        # prompt's end was taken back by token healing: the model writes it again)
        for i, t in enumerate(v.tokens):
            if not t or i in v.special_ids:
                continue
            new = text + t.decode("utf-8", "ignore")
            b2, at2 = _rule(rules, new)
            if b2 is not None and at2 > len(text) and b2.startswith(new[at2:]):
                logits[i] += 10.0 + len(t)
        return logits

    m = ScriptedModel(tokens or TOKENS, script=script)
    box["m"] = m
    return m
