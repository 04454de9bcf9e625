"""A logits processor that constrains ``llama_cpp.Llama`` (llama-cpp-python) with tether.

::

    from llama_cpp import Llama, LogitsProcessorList
    from tether.integrations.llama_cpp import LogitsProcessor

    llm = Llama(model_path="model.gguf")
    p = LogitsProcessor({"type": "object", "properties": {"a": {"type": "integer"}}}, llm)
    out = llm.create_completion("JSON: ", logits_processor=LogitsProcessorList([p]),
                                max_tokens=64, temperature=0)

How it follows a generation: llama-cpp-python calls the processor with every token so
far (prompt and output) and the next token's logits. A call that extends the previous
call's tokens by exactly one token continues the output (that token is consumed);
any other call starts a new output, its tokens taken as the prompt. So one processor
serves one generation at a time and may be reused for the next call; ``reset()``
forces a fresh start (needed only when a new prompt happens to be the previous prompt
and output plus one token).

The vocabulary is read from the ``Llama``'s own model (`Vocabulary.from_llama`: the
bytes llama.cpp writes for each token) and cached per ``Llama``; EOS (every
end-of-generation token of the model) is allowed exactly where the output is complete.

llama-cpp-python runs the processor inside a C callback, where an exception would be
printed and ignored, leaving the logits unmasked. So a failure inside a call (a token
the constraint refuses, an internal error) never passes unconstrained logits: it allows
only the end-of-generation tokens, which ends the output, and is kept in ``error``.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import Matcher
from tether.errors import ConstraintError, MissingDependencyError
from tether.integrations._common import compile_output
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, apply_mask

_VOCABS: weakref.WeakKeyDictionary[Any, Vocabulary] = weakref.WeakKeyDictionary()


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except (ImportError, OSError):
        raise MissingDependencyError("llama-cpp-python (the llama.cpp bindings)", "llama") from None
    return llama_cpp


def llama_vocabulary(llama: Any) -> Vocabulary:
    """The vocabulary of a ``llama_cpp.Llama`` (read once per ``Llama``, then cached).

    Raises:
        ConstraintError: ``llama`` is not a loaded ``llama_cpp.Llama``.
    """
    llama_cpp = _llama_cpp()
    if not isinstance(llama, llama_cpp.Llama):
        raise ConstraintError(f"expected a llama_cpp.Llama, not {type(llama).__name__}")
    vocab = _VOCABS.get(llama)
    if vocab is None:
        inner = getattr(llama, "_model", None)
        if inner is None or not getattr(inner, "model", None):
            raise ConstraintError("this llama_cpp.Llama has no loaded model (was it closed?)")
        vocab = _VOCABS[llama] = Vocabulary.from_llama(llama)
    return vocab


class LogitsProcessor:
    """Constrain a ``llama_cpp.Llama`` generation to ``output`` (see the module docstring).

    Args:
        output: a JSON Schema dict, a Pydantic model, a Python type, ``tether.regex(...)``,
            a list of choice strings or a Grammar.
        llama: the ``llama_cpp.Llama`` that will generate.

    Attributes:
        error: why the last generation was ended early (None if it was not).
        vocabulary: the Llama's vocabulary.

    Raises:
        ConstraintError, SchemaError, RegexError, GrammarError, LimitError: ``output``
            cannot be compiled; MissingDependencyError: llama-cpp-python is missing.
    """

    def __init__(self, output: Any, llama: Any) -> None:
        self.vocabulary = llama_vocabulary(llama)
        self.spec, self.compiled = compile_output(output, self.vocabulary)
        self._mask = allocate_mask(self.vocabulary.size)
        self._eos = np.array(self.vocabulary.eos_ids, dtype=np.int64)
        self.error: str | None = None
        self._matcher: Matcher | None = None
        self._seen: NDArray[np.intc] = np.zeros(0, np.intc)
        self._prompt_len = 0

    def reset(self) -> None:
        """Forget the current generation: the next call starts a new output."""
        self._matcher = None
        self._seen = np.zeros(0, np.intc)
        self._prompt_len = 0
        self.error = None

    @property
    def output_tokens(self) -> list[int]:
        """The tokens of the current output (after the prompt)."""
        return [int(t) for t in self._seen[self._prompt_len:]]

    def is_complete(self) -> bool:
        """Whether the current output is complete under the constraint."""
        return self._matcher is not None and self.error is None and self._matcher.is_accepting()

    def __call__(self, input_ids: NDArray[np.intc], scores: NDArray[np.float32]) -> NDArray[np.float32]:
        """Mask ``scores`` (the next token's logits, changed in place and returned)."""
        try:
            return self._process(np.asarray(input_ids), scores)
        except Exception as exc:  # noqa: BLE001 -- inside a C callback: never leave logits unmasked
            self.error = f"{type(exc).__name__}: {exc}"
            scores[:] = -np.inf
            scores[self._eos[self._eos < len(scores)]] = 0.0
            return scores

    def _process(self, ids: NDArray[Any], scores: NDArray[np.float32]) -> NDArray[np.float32]:
        n = len(ids)
        m = self._matcher
        if m is not None and n == len(self._seen) + 1 and np.array_equal(ids[:-1], self._seen):
            token = int(ids[-1])
            if not m.consume(token):
                raise ConstraintError(f"token {token} is not allowed here: {m.error}")
        else:  # a new generation: these tokens are its prompt
            m = self._matcher = self.compiled.matcher()
            self._prompt_len = n
            self.error = None
        self._seen = np.array(ids, dtype=np.intc)
        m.compute_mask(self._mask)
        return apply_mask(scores, self._mask)  # type: ignore[no-any-return]


__all__ = ["LogitsProcessor", "llama_vocabulary"]
