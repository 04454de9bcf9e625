"""The protocol every model backend implements, and the cost counters they share.

Two kinds of model (outlines' split):

* *steerable* — tether owns the logits (llama.cpp, transformers, scripted): it masks
  them with the engine at every step;
* *black-box* — an HTTP API: tether passes the constraint through where the server
  supports it (``response_format``, ``logit_bias``, stop) and validates the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tether.errors import ArgumentError, ContextLengthError, ModelArgumentError, TetherError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from tether.tokens import Vocabulary


@dataclass
class Costs:
    """What the LMQL paper counts (Tables 3, 4), kept by every backend.

    Attributes:
        model_calls: forward passes (one per decoding step; a batched pass counts once).
        generate_calls: decoding runs started (one per hole or per chunk-wise generate()).
        prompt_tokens: tokens sent as input, summed over generate calls (billable input).
        generated_tokens: tokens produced by decoding (billable output).
        evaluated_tokens: tokens actually run through the network (after KV reuse).
    """

    model_calls: int = 0
    generate_calls: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    evaluated_tokens: int = 0

    @property
    def billable_tokens(self) -> int:
        return self.prompt_tokens + self.generated_tokens

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)

    def snapshot(self) -> Costs:
        return Costs(**{f.name: getattr(self, f.name) for f in fields(self)})

    def __add__(self, other: Costs) -> Costs:
        return Costs(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: Costs) -> Costs:
        return Costs(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


@runtime_checkable
class Model(Protocol):
    """A steerable model: next-token logits for a token sequence.

    ``logits(tokens)`` returns the logits for the token after ``tokens`` as a float32
    array of width ``n_logits`` (which may exceed ``vocabulary.size``: padding rows are
    never allowed). Backends reuse the KV cache of the longest common prefix with the
    previous call. The returned array may be a view valid only until the next call.

    ``n_ctx`` is the context window in tokens: the most tokens ``logits`` accepts
    (prompt and output together), or None when the backend cannot know it (a remote
    server). Callers check a prompt against it before decoding; a backend raises
    `ContextLengthError` (before evaluating anything) for longer sequences, and
    `ModelArgumentError` for token ids outside ``[0, vocabulary.n_logits)`` or an
    empty sequence. No backend lets its library's own exceptions out: failures are
    `ModelError` (``retryable`` where a retry may help).

    ``tokenize(text, special=True)`` reads special-token texts (``<start_of_turn>``) in
    ``text`` as the special tokens (a rendered chat prompt); by default they are text.
    """

    # read-only members: a backend may hold them as attributes or properties
    @property
    def vocabulary(self) -> Vocabulary: ...

    @property
    def costs(self) -> Costs: ...

    @property
    def name(self) -> str: ...

    @property
    def n_ctx(self) -> int | None: ...

    @property
    def eos_ids(self) -> tuple[int, ...]: ...

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: Sequence[int]) -> bytes: ...

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]: ...


@runtime_checkable
class BatchLogits(Protocol):
    """A model that evaluates several sequences in one forward pass: ``logits_batch(seqs)``
    is ``float32[len(seqs), n_logits]``, row ``i`` the logits after ``seqs[i]`` (one model
    call in `Costs`)."""

    def logits_batch(self, seqs: Sequence[Sequence[int]]) -> NDArray[np.float32]: ...


@runtime_checkable
class ChatTemplated(Protocol):
    """A model that can say which chat template it carries.

    ``chat_template`` is the Jinja template of the model's turns (a GGUF file's
    ``tokenizer.chat_template``, a Hugging Face tokenizer's ``chat_template``), or None
    when the model carries none. `tether.program.chat` renders role-tagged prompts with
    it; backends implement it without the caller reaching into their handles.
    """

    @property
    def chat_template(self) -> str | None: ...


@runtime_checkable
class ChatFormatter(Protocol):
    """A model that writes chat turns with code of its own instead of a Jinja template
    tether renders: a Hugging Face tokenizer's ``apply_chat_template`` (the transformers
    backend), Gemma's turn markup for a GGUF without a template (llama.cpp). Returns the
    prompt text, special tokens as text; raises `ModelError` where it has no format.
    """

    def apply_chat_template(self, messages: Sequence[dict[str, str]], *,
                            add_generation_prompt: bool = True) -> str: ...


@runtime_checkable
class BlackBox(Protocol):
    """A black-box model (an HTTP API, `tether.models.openai_http`): tether cannot read its
    logits, so it passes constraints through in the server's own fields and checks the
    replies (`tether.program.remote`). Its class says so with ``black_box = True``."""

    black_box: bool


def is_black_box(model: object) -> bool:
    """Whether ``model`` is a `BlackBox` model (``black_box`` true)."""
    return isinstance(model, BlackBox) and bool(model.black_box)


def check_tokens(tokens: Sequence[int], n_vocab: int, n_ctx: int | None,
                 what: str = "logits()") -> list[int]:
    """``tokens`` as a list of ints after the checks every backend makes before
    evaluating: non-empty, each an integer in ``[0, n_vocab)``, at most ``n_ctx`` of them.

    Raises:
        ModelArgumentError: empty, a non-integer, or an id outside the vocabulary.
        ContextLengthError: more than ``n_ctx`` tokens.
    """
    if isinstance(tokens, str | bytes):
        raise ModelArgumentError(f"{what} takes token ids, not {type(tokens).__name__}",
                                 argument="tokens")
    try:
        toks = [_as_token(t) for t in tokens]
    except (TypeError, ValueError):
        raise ModelArgumentError(f"{what} takes a sequence of integer token ids",
                                 argument="tokens") from None
    if not toks:
        raise ModelArgumentError(f"{what} needs at least one token (start with the BOS token)",
                                 argument="tokens")
    lo, hi = min(toks), max(toks)
    if lo < 0 or hi >= n_vocab:
        bad = lo if lo < 0 else hi
        raise ModelArgumentError(
            f"token id {bad} at position {toks.index(bad)} is outside the vocabulary [0, {n_vocab})",
            argument="tokens")
    if n_ctx is not None and len(toks) > n_ctx:
        raise ContextLengthError(n_ctx, len(toks))
    return toks


def _as_token(t: Any) -> int:
    """An integer token id (bools and floats are not token ids)."""
    if isinstance(t, bool) or not hasattr(t, "__index__"):
        raise TypeError(t)
    return t.__index__()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class IntOption:
    """An integer load option in ``[lo, hi]`` (``none_ok``: None means the default)."""

    lo: int
    hi: int
    none_ok: bool = True
    doc: str = ""

    def check(self, name: str, value: Any) -> None:
        if value is None and self.none_ok:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelArgumentError(
                f"option {name}={value!r}: expected an integer in [{self.lo}, {self.hi}]"
                + (" or None" if self.none_ok else ""), argument=name)
        if not self.lo <= value <= self.hi:
            raise ModelArgumentError(
                f"option {name}={value} is out of range [{self.lo}, {self.hi}]", argument=name)


# How `check_options` checks one load option: a range, or the accepted type(s).
OptionRule = IntOption | type | tuple[type, ...]


def check_options(options: Mapping[str, Any], known: Mapping[str, OptionRule], backend: str) -> None:
    """Validate a backend's load options: every name known, every value of its type/range.

    ``known`` maps a name to an `IntOption` or to the accepted type(s) (None always
    accepted: the default).

    Raises:
        ModelArgumentError: naming the unknown options (and the known ones), or the bad value.
    """
    unknown = sorted(k for k in options if k not in known)
    if unknown:
        raise ModelArgumentError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for "
            f"the {backend} backend; known: {', '.join(sorted(known))}", argument=unknown[0])
    for name, value in options.items():
        rule = known[name]
        if isinstance(rule, IntOption):
            rule.check(name, value)
        elif value is not None and (not isinstance(value, rule) or (
                isinstance(value, bool) and bool not in (rule if isinstance(rule, tuple) else (rule,)))):
            types = rule if isinstance(rule, tuple) else (rule,)
            raise ModelArgumentError(
                f"option {name}={value!r}: expected {' or '.join(t.__name__ for t in types)}",
                argument=name)


# Options every steerable local backend shares (llama.cpp, transformers).
N_THREADS = IntOption(1, 1024, doc="compute threads")
SEED = IntOption(0, 2**32 - 1, doc="seed kept for the backend's own sampler")


# -- the idioms of the layers above ------------------------------------------------------
#
# ``model(prompt, output)`` (Outlines' callable model) and ``model + "text"`` (Guidance's
# model state) are written by the program layer, which sits above this one. A model class
# cannot import it, so the program layer registers the two functions here when it is
# imported (`tether.program.generator`, `tether.program.state`), and the top-level
# ``tether`` package registers how to import it (``provider``). Every backend class
# inherits `ModelIdioms`, whose methods look the functions up at call time.


class CallIdiom(Protocol):
    """``model(prompt, output, **options)``: generate and return the typed text."""

    def __call__(self, model: Any, prompt: Any, output: Any, /, **options: Any) -> Any: ...


class AddIdiom(Protocol):
    """``model + piece``: a new model state holding ``piece``."""

    def __call__(self, model: Any, piece: Any, /) -> Any: ...


@dataclass
class Idioms:
    """The registry of the model idioms (one instance: `IDIOMS`).

    Attributes:
        call: set by `tether.program.generator` (`CallIdiom`).
        add: set by `tether.program.state` (`AddIdiom`).
        provider: set by the ``tether`` package: imports the layer that sets ``call`` and
            ``add`` (called once, the first time an idiom is used before that layer is
            loaded).
    """

    call: CallIdiom | None = None
    add: AddIdiom | None = None
    provider: Callable[[], None] | None = None

    def need_call(self) -> CallIdiom:
        if self.call is None:
            self._provide()
        if self.call is None:
            raise TetherError("model(prompt, output) needs tether's program layer, which did not register it")
        return self.call

    def need_add(self) -> AddIdiom:
        if self.add is None:
            self._provide()
        if self.add is None:
            raise TetherError("model + text needs tether's program layer, which did not register it")
        return self.add

    def _provide(self) -> None:
        if self.provider is not None:
            self.provider()


IDIOMS = Idioms()


class ModelIdioms:
    """What every backend class inherits: the idioms users bring from other libraries.

    * ``model(prompt, output=None, **options)``: `tether.generate` with the same options;
      returns the output text as a ``str`` that carries ``.value`` (the typed value) and
      ``.generation`` (`tether.program.generator.GeneratedText`);
    * ``model + "text"`` (or ``+ gen(...)``, any piece a model state takes): a new
      `tether.program.state.ModelState` holding it.
    """

    __slots__ = ()

    def __call__(self, prompt: Any, /, output: Any = None, **options: Any) -> Any:
        return IDIOMS.need_call()(self, prompt, output, **options)

    def __add__(self, piece: Any) -> Any:
        return IDIOMS.need_add()(self, piece)

    def __radd__(self, other: Any) -> Any:
        raise ArgumentError("... + model", other, "written after the model: model + 'text', not 'text' + model")
