"""Hello, tether: constrained and free generation on the embedded Gemma 3 270M.

Run with ``scripts/run`` (sets everything up on a fresh machine first), or
``python examples/hello.py`` inside the project's virtual environment.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from tether.models import load_model


def free_greedy(model, prompt: str, n: int) -> tuple[str, float]:  # type: ignore[no-untyped-def]
    """Greedy continuation straight from the logits; returns (text, tokens per second)."""
    ids = model.tokenize(prompt, add_bos=True)
    start = len(ids)
    t0 = time.perf_counter()
    for _ in range(n):
        nxt = int(np.argmax(model.logits(ids)))
        if nxt in model.eos_ids:
            break
        ids.append(nxt)
    dt = time.perf_counter() - t0
    return model.detokenize(ids[start:]).decode("utf-8", "replace"), (len(ids) - start) / dt


def main() -> int:
    t0 = time.perf_counter()
    model = load_model("embedded")
    print(f"model: {model.name} ({model.path.name}), {model.n_threads} thread(s), "
          f"loaded in {time.perf_counter() - t0:.2f} s")

    prompt = "The three primary colours are"
    text, rate = free_greedy(model, prompt, 32)
    print(f"\nfree text (greedy, 32 tokens): {prompt + text!r}")
    print(f"  {rate:.1f} tokens/s")

    try:
        from tether.program import generate, regex
    except ImportError as exc:  # the program layer is not there yet
        print(f"\nconstrained generation: not available ({exc})")
        return 0
    prompt = "Q: Is Paris the capital of France? Answer yes or no.\nA:"
    g = generate(model, prompt, [" yes", " no"])
    print(f"\nchoice [' yes', ' no']: {prompt!r} -> {g.value!r}  ({g.costs.model_calls} model calls)")
    prompt = "The Eiffel Tower was completed in the year"
    g = generate(model, prompt, regex(r" [0-9]{4}"))
    print(f"regex ' [0-9]{{4}}': {prompt!r} -> {g.text!r}  ({g.costs.model_calls} model calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
