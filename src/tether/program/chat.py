"""Chat messages rendered with the model's own chat template — never a stand-in.

The template comes from, in order: ``chat_template=`` given by the caller (a Jinja
string), the model's ``chat_template`` (`tether.models.base.ChatTemplated`: the template
stored in a GGUF file, a Hugging Face tokenizer's), or the backend's own
``apply_chat_template`` (`tether.models.base.ChatFormatter`: a Hugging Face tokenizer's;
llama.cpp: Gemma's turn markup for a Gemma GGUF without a template). If none exists the
call raises `ModelError` saying so; tether does not guess a template.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tether import limits
from tether.decoding.logits import model_call
from tether.errors import ArgumentError, MissingDependencyError, ModelError, TetherError
from tether.models.base import ChatFormatter, ChatTemplated, Model
from tether.program.arguments import check_messages

Message = Mapping[str, str]


def template_of(model: object) -> str | None:
    """The Jinja chat template a model carries, if any (`ChatTemplated.chat_template`)."""
    if isinstance(model, ChatTemplated):
        t = model.chat_template
        if isinstance(t, str) and t:
            return t
    return None


def has_chat_format(model: object) -> bool:
    """Whether `render_chat` has a way to write this model's turns without
    ``chat_template=``: a template it carries (`template_of`), or the backend's own
    ``apply_chat_template`` (which may still refuse, e.g. llama.cpp for a GGUF that is
    neither templated nor Gemma)."""
    return template_of(model) is not None or _formatter(model) is not None


def _formatter(model: object) -> Callable[..., str] | None:
    """The backend's ``apply_chat_template`` (`ChatFormatter`), unless it is switched off
    (set to None on the instance)."""
    if isinstance(model, ChatFormatter) and callable(model.apply_chat_template):
        return model.apply_chat_template
    return None


def _special_text(model: Model, token_id: int | None) -> str:
    if token_id is None:
        return ""
    return model.vocabulary.special_names.get(token_id, "")


def render_jinja(template: str, messages: list[dict[str, str]], *, bos_token: str = "", eos_token: str = "",
                 add_generation_prompt: bool = True) -> str:
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise MissingDependencyError("jinja2 (to render chat templates)", "llama") from None

    def raise_exception(message: str) -> None:
        raise ModelError(f"the chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        compiled = env.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ArgumentError("chat_template", template, f"a Jinja template ({exc.message}, line {exc.lineno})") from None
    try:
        text = compiled.render(messages=messages, bos_token=bos_token, eos_token=eos_token,
                               add_generation_prompt=add_generation_prompt)
    except TetherError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a template failing on these messages
        raise ModelError(f"the chat template failed on the messages: {type(exc).__name__}: {exc}") from exc
    limits.check("max_prompt_chars", len(text), "the rendered chat prompt")
    return text


def render_chat(model: Model, messages: Sequence[Any], *, chat_template: str | None = None,
                add_generation_prompt: bool = True) -> str:
    """The prompt text for ``messages`` in the model's own format (special tokens as text).

    Raises:
        ModelError: the model has no chat template (pass ``chat_template=``).
    """
    msgs = check_messages(messages)
    template = chat_template or template_of(model)
    if template is not None:
        vocab = model.vocabulary
        eos = vocab.eos_ids[0] if vocab.eos_ids else None
        return render_jinja(template, msgs, bos_token=_special_text(model, vocab.bos_id),
                            eos_token=_special_text(model, eos), add_generation_prompt=add_generation_prompt)
    apply = _formatter(model)
    if apply is not None:
        text: object = model_call(model, lambda: apply(msgs, add_generation_prompt=add_generation_prompt))
        if not isinstance(text, str):
            raise ModelError(f"the chat template of {model.name!r} returned {type(text).__name__}, not text")
        limits.check("max_prompt_chars", len(text), "the rendered chat prompt")
        return text
    raise ModelError(
        f"model {model.name!r} has no chat template: pass a plain prompt, or "
        "chat_template='<jinja template>' to say how its turns are written"
    )


_MARK = "\ue000tether-open-turn\ue000"  # where an open turn's content ends, in a rendering


def render_open_turn(model: Model, closed: Sequence[Any], role: str, content: str, *,
                     chat_template: str | None = None) -> str:
    """The prompt for continuing an open turn: ``closed`` turns, then the ``role`` turn
    holding ``content`` so far, left open (the template's text up to where the turn's
    content ends; a fresh assistant turn whose text the template drops gets the
    generation prompt instead).

    Raises:
        ModelError: the model has no chat template, or its template drops the open
            turn's text (so nothing can be written inside it).
    """
    text = render_chat(model, [*closed, {"role": role, "content": content + _MARK}],
                       chat_template=chat_template, add_generation_prompt=False)
    cut = text.rfind(_MARK)
    if cut >= 0:
        return text[:cut]
    if role == "assistant" and not content and closed:
        return render_chat(model, closed, chat_template=chat_template, add_generation_prompt=True)
    raise ModelError(f"the chat template drops the text of an open {role} turn, so a hole cannot be "
                     "placed in it; pass chat_template= with a template that keeps it")


def tokenize_rendered(model: Model, text: str) -> list[int]:
    """Tokens of a rendered chat prompt: special-token texts become special tokens, and a
    leading BOS text becomes the BOS token."""
    bos_text = _special_text(model, model.vocabulary.bos_id)
    add_bos = True
    if bos_text and text.startswith(bos_text):
        text = text[len(bos_text):]
    try:
        return list(model.tokenize(text, add_bos=add_bos, special=True))
    except TypeError:  # a backend without special-token parsing
        return list(model_call(model, lambda: model.tokenize(text, add_bos=add_bos)))
    except TetherError:
        raise
    except Exception as exc:  # noqa: BLE001 -- the backend's tokenizer failed
        raise ModelError(f"model {model.name!r} could not tokenize the prompt: "
                         f"{type(exc).__name__}: {exc}") from exc
