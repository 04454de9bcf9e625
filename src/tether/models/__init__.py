"""tether.models: model backends behind one protocol (``base.Model``).

Code map: ``base.py`` (the ``Model`` protocol and ``Costs``), ``llama_cpp.py`` (GGUF
models in-process; the embedded Gemma 3 270M), ``scripted.py`` (deterministic test
model), ``transformers_model.py`` and ``openai_http.py`` (other backends).
``load_model(spec, **options)`` picks one from a short description (or wraps a loaded
``llama_cpp.Llama``) and checks every option. Every backend exposes ``n_ctx`` (its
context window, None when unknown), raises `tether.errors.ContextLengthError` before
evaluating more tokens than that, `ModelArgumentError` (a ValueError) for bad options
and token ids, and `ModelError` for its library's failures. Importing this package is
cheap: backends import their heavy libraries only when a model is loaded.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tether.errors import MissingDependencyError, ModelArgumentError, ModelError
from tether.models.base import Costs, Model

if TYPE_CHECKING:
    from tether.models.llama_cpp import LlamaCppModel
    from tether.models.scripted import ScriptedModel

__all__ = ["Costs", "LlamaCppModel", "Model", "ModelArgumentError", "ScriptedModel", "load_model"]

EMBEDDED_NAMES = frozenset({"embedded", "default", "gemma3-270m", "gemma-3-270m",
                            "gemma3-270m-q4-k-m", "gemma3-270m-q4_k_m"})

_LAZY = {
    "LlamaCppModel": "tether.models.llama_cpp",
    "ScriptedModel": "tether.models.scripted",
}

# Backend modules written beside this one; each offers ``load(spec, **options)`` or one
# of the class names listed (constructed as ``cls(spec, **options)``).
_BACKENDS = {
    "transformers": ("tether.models.transformers_model", "transformers",
                     ("TransformersModel",)),
    "openai": ("tether.models.openai_http", "openai",
               ("OpenAIModel", "OpenAIHTTPModel", "OpenAICompatibleModel")),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether.models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def load_model(spec: Any = None, **options: Any) -> Model:
    """Load a model from a short description.

    ``spec`` may be:

    * ``None``, ``"embedded"`` or ``"gemma3-270m"``: the embedded Gemma 3 270M (llama.cpp);
    * a path to a ``.gguf`` file, or ``"llama.cpp:<path>"``: that file with llama.cpp;
    * a loaded ``llama_cpp.Llama``: its weights, shared (`LlamaCppModel.from_llama`);
    * a directory holding a Hugging Face model (``config.json``), or
      ``"transformers:<name or path>"``: the transformers backend;
    * an ``http://`` or ``https://`` URL (``"https://host/v1#model-name"``): an
      OpenAI-compatible server (`tether.models.openai_http.OpenAIModel`); ``server=``
      (``"tether"``, ``"vllm"``, ``"llama.cpp"``, ``"llama-cpp-python"``, ``"openai"``)
      says which one, so constraints go in its own request fields; left out, the
      server is probed on first use. It also takes ``model``, ``api_key``,
      ``timeout``, ``n_ctx``, ``retries`` and ``backoff``;
    * an object that already is a model: returned as is (no options allowed).

    ``options`` go to the backend, which checks each: llama.cpp takes ``n_ctx``,
    ``n_threads``, ``n_threads_batch``, ``n_gpu_layers``, ``n_batch``, ``n_seq``, ``seed``,
    ``verbose`` and any
    scalar field of llama.cpp's model/context params (`LlamaCppModel`).

    Raises:
        MissingDependencyError: the backend's extra is not installed.
        ModelArgumentError: an unknown option, or one of the wrong type or range
            (a ``ValueError``).
        ModelError: ``spec`` names no known kind of model, a file is missing (named),
            or loading failed.
    """
    if spec is not None and not isinstance(spec, str | Path):
        if _is_llama(spec):
            from tether.models.llama_cpp import LlamaCppModel

            return cast(Model, LlamaCppModel.from_llama(spec, **options))
        if isinstance(spec, Model):
            if options:
                raise ModelArgumentError(
                    f"options {', '.join(sorted(options))} cannot apply to a model already loaded",
                    argument=sorted(options)[0])
            return spec
        raise ModelArgumentError(
            f"cannot load a model from {type(spec).__name__}: expected None, a name, a path, "
            "a URL, a llama_cpp.Llama or a model object", argument="spec")
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in EMBEDDED_NAMES):
        from tether.models.llama_cpp import LlamaCppModel

        return cast(Model, LlamaCppModel(None, **options))
    text = str(spec).strip()
    if not text or "\x00" in text:
        raise ModelArgumentError(f"model spec {spec!r} is empty or holds a NUL character",
                                 argument="spec")
    if text.startswith("llama.cpp:") or text.lower().endswith(".gguf"):
        from tether.models.llama_cpp import LlamaCppModel

        path = Path(text.removeprefix("llama.cpp:")).expanduser()
        if not path.is_file():
            raise ModelError(f"model file not found: {path}"
                             + (" (a directory, not a .gguf file)" if path.is_dir() else ""))
        return cast(Model, LlamaCppModel(path, **options))
    if text.startswith(("http://", "https://")):
        return _load_backend("openai", text, options)
    if text.startswith(("transformers:", "hf:")):
        return _load_backend("transformers", text.split(":", 1)[1], options)
    path = Path(text).expanduser()
    try:
        is_hf_dir = path.is_dir() and (path / "config.json").exists()
        exists = path.exists()
    except OSError as exc:  # name too long, permission denied
        raise ModelError(f"cannot read model path {text!r}: {exc.strerror or exc}") from None
    if is_hf_dir:
        return _load_backend("transformers", str(path), options)
    if exists:
        raise ModelError(f"{text}: not a .gguf file nor a Hugging Face model directory")
    raise ModelError(
        f"unknown model {text!r}; expected 'embedded', a .gguf path, a transformers directory "
        "or 'transformers:<name>', or an http(s) URL of an OpenAI-compatible server"
    )


def _is_llama(obj: Any) -> bool:
    """``obj`` is a ``llama_cpp.Llama`` (checked without importing llama_cpp first)."""
    import sys

    llama_cpp = sys.modules.get("llama_cpp")
    return llama_cpp is not None and isinstance(obj, llama_cpp.Llama)


def _load_backend(kind: str, spec: str, options: dict[str, Any]) -> Model:
    module_name, extra, class_names = _BACKENDS[kind]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ModelError(
                f"the {kind} backend ({module_name}) is not available in this version of tether"
            ) from None
        raise MissingDependencyError(str(exc.name), extra) from None
    loader = getattr(module, "load", None)
    if callable(loader):
        return loader(spec, **options)  # type: ignore[no-any-return]
    for name in class_names:
        cls = getattr(module, name, None)
        if cls is not None:
            return cls(spec, **options)  # type: ignore[no-any-return]
    raise ModelError(f"{module_name} offers no load() nor any of {', '.join(class_names)} "
                     f"(install 'tether[{extra}]'?)")
