"""A deterministic rule-driven model for the query-language tests.

``rule_model({"trigger": "continuation", ...})``: after the last occurrence of a trigger
in the text, the model wants to write its continuation (longest tokens first), then EOS.
Off-script text gets small deterministic noise, so decoding stays reproducible.
"""

from __future__ import annotations

import numpy as np

from tether.models.scripted import DEFAULT_TOKENS, ScriptedModel

TOKENS = [*DEFAULT_TOKENS, " blue", " green", " grey", " yes", " no", " Paris", " Lyon", "Par", "is",
          " one", " star", " stars", " three", " five", "ab", "abc", ".\n", " sky", " x"]


def rule_model(rules: dict[str, str], tokens: list[str] | None = None) -> ScriptedModel:
    box: dict[str, ScriptedModel] = {}

    def script(toks: list[int]) -> np.ndarray:
        m = box["m"]
        v = m.vocabulary
        text = v.decode(t for t in toks if t != v.bos_id).decode("utf-8", "ignore")
        logits = np.zeros(v.n_logits, dtype=np.float32)
        rng = np.random.default_rng(len(toks))
        logits += rng.standard_normal(v.n_logits).astype(np.float32) * 0.1
        best, at = None, -1
        for trig, cont in rules.items():
            i = text.rfind(trig)
            if i >= 0 and i + len(trig) >= at:
                best, at = cont, i + len(trig)
        if best is not None:
            written = text[at:]
            if best.startswith(written):
                rest = best[len(written):].encode()
                if not rest:
                    logits[v.eos_ids[0]] += 30.0
                for i, t in enumerate(v.tokens):
                    if t and rest.startswith(t):
                        logits[i] += 10.0 + len(t)
        return logits

    m = ScriptedModel(tokens or TOKENS, script=script)
    box["m"] = m
    return m





