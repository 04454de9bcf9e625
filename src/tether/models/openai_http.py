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

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from tether.errors import ModelError
from tether.models.base import Costs


class OpenAIModel:
    """An OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``).

    Args:
        base_url: the API root; a ``#name`` suffix names the model.
        model: the model name sent with each request (None: the server's default).
        api_key: bearer token; default ``$OPENAI_API_KEY`` if set.
        timeout: seconds per request.
    """

    black_box = True

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
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
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise ModelError(f"{url} answered HTTP {exc.code}: {detail}",
                             retryable=exc.code == 429 or exc.code >= 500) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise ModelError(f"cannot reach {url}: {exc}", retryable=True) from None

    def post_stream(self, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST with ``stream: true``; yield each server-sent event's JSON (until ``[DONE]``)."""
        url = self.base_url + path
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(url, data=json.dumps({**body, "stream": True}).encode(),
                                     headers=headers, method="POST")
        try:
            resp = urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise ModelError(f"{url} answered HTTP {exc.code}: {detail}",
                             retryable=exc.code == 429 or exc.code >= 500) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise ModelError(f"cannot reach {url}: {exc}", retryable=True) from None
        with resp:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                yield json.loads(data)

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
        toks = [int(t) for t in reply["tokens"]]
        return toks

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        reply = self.post("/extras/detokenize", self._with_model({"tokens": list(tokens)}), root=True)
        return str(reply["text"]).encode()

    def __repr__(self) -> str:
        return f"OpenAIModel({self.base_url!r}, model={self.model!r})"


def load(spec: str, **options: Any) -> OpenAIModel:
    """`tether.models.load_model` entry: ``http(s)://host[:port][/v1][#model]``."""
    return OpenAIModel(spec, **options)
