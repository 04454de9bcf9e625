"""`OpenAIModel`: a black-box model behind an OpenAI-compatible HTTP API.

tether does not see the logits of a remote model, so it cannot mask them. What holds:

* **JSON Schema** outputs are sent as ``response_format`` (``{"type": "json_schema"}``);
  a server that enforces it (llama.cpp's servers, vLLM, OpenAI strict mode for its
  subset) makes the output valid. tether always validates the result and reports
  ``Generation.error`` when the server did not hold to the schema.
* **Choices** are decoded token by token with ``logit_bias`` (+100 on the tokens that
  continue some option, one token per request; forced tokens need no request), when
  the server offers a tokenizer endpoint (``/extras/tokenize``, llama.cpp) — otherwise
  as a JSON Schema ``enum``. Validated either way.
* **Regex / grammar** outputs cannot be expressed in the OpenAI API: the output is
  generated freely and then checked; an invalid output is reported, never returned as valid.
* ``stop``, ``max_tokens``, ``temperature``, ``top_p``, ``seed`` are passed through;
  determinism is the server's (llama.cpp's server does not repeat greedy outputs
  exactly across requests: its prompt cache changes how the prefix is batched).
* Streaming uses server-sent events (``stream: true``); the result is validated once
  the stream ends.

HTTP goes through the standard library (no extra dependency). Network failures raise
`ModelError` (``retryable`` for timeouts, 429 and 5xx).
"""

from __future__ import annotations

import http.client
import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from tether.errors import ModelError
from tether.models.base import Costs, IntOption, ModelArgumentError, check_options

OPENAI_OPTIONS: dict[str, Any] = {"model": str, "api_key": str, "timeout": (int, float),
                                  "n_ctx": IntOption(1, 1 << 30)}

# what a broken connection raises from urllib: refused/reset sockets, timeouts, a
# server that hangs up mid-reply or sends a malformed status line
_NETWORK_ERRORS = (urllib.error.URLError, OSError, http.client.HTTPException)


def _json_reply(raw: bytes, url: str) -> dict[str, Any]:
    """The JSON object of a reply body; a ModelError for anything else."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ModelError(f"{url} answered with a body that is not JSON: {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise ModelError(f"{url} answered with JSON that is not an object: {raw[:200]!r}")
    return value


class OpenAIModel:
    """An OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``).

    Args:
        base_url: the API root; a ``#name`` suffix names the model.
        model: the model name sent with each request (None: the server's default).
        api_key: bearer token; default ``$OPENAI_API_KEY`` if set.
        timeout: seconds per request.
        n_ctx: the server model's context window, if known; None (the default) means
            unknown: tether cannot check a prompt's length and the server decides.

    Raises:
        ModelArgumentError: a bad URL or option.
    """

    black_box = True

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 timeout: float = 120.0, n_ctx: int | None = None) -> None:
        check_options(dict(base_url=base_url, model=model, api_key=api_key, timeout=timeout,
                           n_ctx=n_ctx), OPENAI_OPTIONS | {"base_url": str}, "openai")
        if not base_url.startswith(("http://", "https://")):
            raise ModelArgumentError(f"base_url {base_url!r} is not an http(s) URL", argument="base_url")
        if not (0 < timeout < math.inf):
            raise ModelArgumentError(f"option timeout={timeout!r} must be a positive number of seconds",
                                     argument="timeout")
        #: the context window; None: unknown (see the class docstring)
        self.n_ctx: int | None = n_ctx
        url, _, frag = base_url.partition("#")
        self.base_url = url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1" if "/v1" not in self.base_url else ""
        self.model = model or (frag or None)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.costs = Costs()
        self.name = self.model or self.base_url
        self._tokenizer_ok: bool | None = None

    # --- HTTP ---------------------------------------------------------------------------
    def _root(self) -> str:
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def post(self, path: str, body: dict[str, Any], *, root: bool = False) -> dict[str, Any]:
        """POST JSON to ``path`` under the API (or server root); return the JSON reply."""
        url = (self._root() if root else self.base_url) + path
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise _http_error(url, exc) from None
        except _NETWORK_ERRORS as exc:
            raise ModelError(f"cannot reach {url}: {exc}", retryable=True) from None
        except ValueError as exc:  # a URL urllib cannot parse
            raise ModelArgumentError(f"bad URL {url!r}: {exc}", argument="base_url") from None
        return _json_reply(raw, url)

    def post_stream(self, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST with ``stream: true``; yield each server-sent event's JSON (until ``[DONE]``)."""
        url = self.base_url + path
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            req = urllib.request.Request(url, data=json.dumps({**body, "stream": True}).encode(),
                                         headers=headers, method="POST")
            resp = urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            raise _http_error(url, exc) from None
        except _NETWORK_ERRORS as exc:
            raise ModelError(f"cannot reach {url}: {exc}", retryable=True) from None
        except ValueError as exc:
            raise ModelArgumentError(f"bad URL {url!r}: {exc}", argument="base_url") from None
        with resp:
            lines = iter(resp)
            while True:
                try:
                    raw = next(lines)
                except StopIteration:
                    return
                except _NETWORK_ERRORS as exc:
                    raise ModelError(f"the stream from {url} broke: {exc}", retryable=True) from None
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                yield _json_reply(data.encode(), url)

    def stream(self, prompt: Any, *, chat: bool, **params: Any) -> Iterator[str]:
        """Text pieces of a streamed completion (``chat``: ``/chat/completions``)."""
        body = self._with_model({("messages" if chat else "prompt"): prompt, **params})
        self.costs.model_calls += 1
        for event in self.post_stream("/chat/completions" if chat else "/completions", body):
            choices = event.get("choices") or []
            if not choices:
                continue
            piece = (choices[0].get("delta") or {}).get("content") if chat else choices[0].get("text")
            if piece:
                self.costs.generated_tokens += 1  # one event per token on common servers
                yield piece

    def _with_model(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.model:
            body["model"] = self.model
        return {k: v for k, v in body.items() if v is not None}

    def _count(self, reply: dict[str, Any]) -> None:
        usage = reply.get("usage") or {}
        self.costs.model_calls += 1
        self.costs.prompt_tokens += int(usage.get("prompt_tokens", 0) or 0)
        self.costs.generated_tokens += int(usage.get("completion_tokens", 0) or 0)

    # --- endpoints --------------------------------------------------------------------
    def complete(self, prompt: str, **params: Any) -> dict[str, Any]:
        """``POST /completions``; ``params`` are OpenAI fields (max_tokens, stop, logit_bias…)."""
        reply = self.post("/completions", self._with_model({"prompt": prompt, **params}))
        self._count(reply)
        return reply

    def chat(self, messages: Sequence[dict[str, str]], **params: Any) -> dict[str, Any]:
        """``POST /chat/completions``."""
        reply = self.post("/chat/completions", self._with_model({"messages": list(messages), **params}))
        self._count(reply)
        return reply

    # --- tokenizer (llama.cpp servers) ---------------------------------------------------
    @property
    def has_tokenizer(self) -> bool:
        """Whether the server offers ``/extras/tokenize`` (checked once)."""
        if self._tokenizer_ok is None:
            try:
                self.post("/extras/tokenize", self._with_model({"input": "a"}), root=True)
                self._tokenizer_ok = True
            except ModelError:
                self._tokenizer_ok = False
        return self._tokenizer_ok

    def tokenize(self, text: str, *, add_bos: bool = False) -> list[int]:
        """Server-side tokenization (llama.cpp's ``/extras/tokenize``); no BOS."""
        reply = self.post("/extras/tokenize", self._with_model({"input": text}), root=True)
        toks = reply.get("tokens")
        if not isinstance(toks, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                 for t in toks):
            raise ModelError(f"/extras/tokenize answered without a list of token ids: {str(reply)[:200]}")
        return toks

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        reply = self.post("/extras/detokenize", self._with_model({"tokens": list(tokens)}), root=True)
        text = reply.get("text")
        if not isinstance(text, str):
            raise ModelError(f"/extras/detokenize answered without a text: {str(reply)[:200]}")
        return text.encode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"OpenAIModel({self.base_url!r}, model={self.model!r})"


def _http_error(url: str, exc: urllib.error.HTTPError) -> ModelError:
    """A ModelError for an HTTP error status (retryable: 408, 429 and 5xx)."""
    try:
        detail = exc.read().decode("utf-8", "replace")[:300]
    except _NETWORK_ERRORS:
        detail = ""
    return ModelError(f"{url} answered HTTP {exc.code}: {detail}",
                      retryable=exc.code in (408, 429) or exc.code >= 500)


def load(spec: str, **options: Any) -> OpenAIModel:
    """`tether.models.load_model` entry: ``http(s)://host[:port][/v1][#model]``.

    Raises ModelArgumentError for unknown options (naming them)."""
    check_options(options, OPENAI_OPTIONS, "openai")
    return OpenAIModel(spec, **options)
