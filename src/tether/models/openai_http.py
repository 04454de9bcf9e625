"""`OpenAIModel`: a black-box model behind an OpenAI-compatible HTTP API.

tether does not see the logits of a remote model, so it cannot mask them: it forwards
the constraint in the field the server enforces it by, and validates every result
(`tether.program.remote` builds the fields). Which fields depends on the server:

==================  =========================================================
``server=``         what it is
==================  =========================================================
``"tether"``        ``tether serve``: vLLM's ``structured_outputs`` fields
``"vllm"``          vLLM's OpenAI server: ``structured_outputs``
``"llama.cpp"``     llama.cpp's ``llama-server``: ``json_schema``, ``grammar``
``"llama-cpp-python"``  ``python -m llama_cpp.server``: ``grammar``;
                    ``response_format`` with a schema on chat requests
``"openai"``        the OpenAI API (and unknown servers): ``response_format``
==================  =========================================================

``server=None`` (the default) probes the server once, on the first request that needs
to know: the host ``api.openai.com`` is OpenAI; otherwise ``GET /v1/models`` and its
``owned_by`` (``"tether"``, ``"vllm"``, ``"llamacpp"``, llama-cpp-python's ``"me"``),
then ``GET /props`` (llama.cpp) and ``GET /version`` (vLLM); a server none of these
recognizes is treated as ``"openai"``.

HTTP goes through ``httpx`` (the ``openai`` extra): one pooled client per model, a
timeout per request (connect within ``min(timeout, 10)`` s), and ``retries`` more tries
with exponential backoff on a refused/failed connection and on HTTP 503. Failures raise
`ModelError` (``retryable`` for timeouts, connection errors, 408, 429 and 5xx). The
``a*`` methods are the same requests on an ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import httpx

from tether.errors import ModelArgumentError, ModelError
from tether.models.base import Costs, IntOption, ModelIdioms, check_options

Server = Literal["tether", "vllm", "llama.cpp", "llama-cpp-python", "openai"]
SERVERS: tuple[str, ...] = get_args(Server)

OPENAI_OPTIONS: dict[str, Any] = {"model": str, "api_key": str, "timeout": (int, float),
                                  "n_ctx": IntOption(1, 1 << 30), "server": str,
                                  "retries": IntOption(0, 10), "backoff": (int, float)}

# what /v1/models says in ``owned_by`` on each server
_OWNERS = {"tether": "tether", "vllm": "vllm", "llamacpp": "llama.cpp", "me": "llama-cpp-python"}
_MAX_BACKOFF = 8.0
#: the largest reply body read from a server (a completion, an error, a whole stream)
MAX_REPLY_BYTES = 32 << 20


def _json_reply(raw: bytes, url: str) -> dict[str, Any]:
    """The JSON object of a reply body; a ModelError for anything else."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ModelError(f"{url} answered with a body that is not JSON: {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise ModelError(f"{url} answered with JSON that is not an object: {raw[:200]!r}")
    return value


def _http_error(url: str, status: int, content: bytes) -> ModelError:
    """A ModelError for an HTTP error status (retryable: 408, 429 and 5xx)."""
    detail = content[:300].decode("utf-8", "replace")
    return ModelError(f"{url} answered HTTP {status}: {detail}", retryable=status in (408, 429) or status >= 500)


def _too_long(url: str) -> ModelError:
    return ModelError(f"{url} answered with more than {MAX_REPLY_BYTES} bytes; not read further")


def _capped(chunks: Iterator[bytes], url: str) -> bytes:
    """The bytes of ``chunks``, at most ``MAX_REPLY_BYTES`` (else ModelError)."""
    out, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise _too_long(url)
        out.append(chunk)
    return b"".join(out)


def _lines(chunks: Iterator[bytes], url: str) -> Iterator[str]:
    """The lines of a server-sent event stream; a stream past ``MAX_REPLY_BYTES`` in all
    raises ModelError (so does one endless line)."""
    buf, size = b"", 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise _too_long(url)
        buf += chunk
        *done, buf = buf.split(b"\n")
        for line in done:
            yield line.decode("utf-8", "replace")
    if buf:
        yield buf.decode("utf-8", "replace")


def _check_server(server: object) -> Server | None:
    if server is None:
        return None
    if server not in SERVERS:
        raise ModelArgumentError(f"option server={server!r}: expected one of {', '.join(map(repr, SERVERS))} "
                                 "(or None to probe the server)", argument="server")
    return server  # type: ignore[return-value]


class OpenAIModel(ModelIdioms):
    """An OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``).

    Args:
        base_url: the API root; a ``#name`` suffix names the model.
        model: the model name sent with each request (None: the server's default).
        api_key: bearer token; default ``$OPENAI_API_KEY`` if set.
        timeout: seconds per request.
        n_ctx: the server model's context window, if known; None (the default) means
            unknown: tether cannot check a prompt's length and the server decides.
        server: which server it is (see the module table); None probes it.
        retries: further tries after a connection error or HTTP 503 (default 2).
        backoff: seconds before the first retry, doubled for each next one (at most 8 s).
        transport: an ``httpx`` transport to use instead of the network (tests).

    Raises:
        ModelArgumentError: a bad URL or option.
    """

    black_box = True

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 timeout: float = 120.0, n_ctx: int | None = None, server: str | None = None,
                 retries: int = 2, backoff: float = 0.5, transport: httpx.BaseTransport | None = None,
                 async_transport: httpx.AsyncBaseTransport | None = None) -> None:
        check_options(dict(base_url=base_url, model=model, api_key=api_key, timeout=timeout, n_ctx=n_ctx,
                           server=server, retries=retries, backoff=backoff),
                      OPENAI_OPTIONS | {"base_url": str}, "openai")
        if not base_url.startswith(("http://", "https://")):
            raise ModelArgumentError(f"base_url {base_url!r} is not an http(s) URL", argument="base_url")
        if not (0 < timeout < math.inf):
            raise ModelArgumentError(f"option timeout={timeout!r} must be a positive number of seconds",
                                     argument="timeout")
        if not (0 <= backoff <= _MAX_BACKOFF):
            raise ModelArgumentError(f"option backoff={backoff!r} must be between 0 and {_MAX_BACKOFF} seconds",
                                     argument="backoff")
        #: the context window; None: unknown (see the class docstring)
        self.n_ctx: int | None = n_ctx
        url, _, frag = base_url.partition("#")
        self.base_url = url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1" if "/v1" not in self.base_url else ""
        try:
            httpx.URL(self.base_url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise ModelArgumentError(f"bad URL {base_url!r}: {exc}", argument="base_url") from None
        self.model = model or (frag or None)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.retries = retries
        self.backoff = float(backoff)
        self.costs = Costs()
        self.name = self.model or self.base_url
        self._server: Server | None = _check_server(server)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client_args: dict[str, Any] = dict(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
            headers=headers, follow_redirects=False)
        self._client = httpx.Client(transport=transport, **self._client_args)
        self._async_transport = async_transport
        self._aclient: httpx.AsyncClient | None = None

    # --- which server ---------------------------------------------------------------------
    @property
    def server(self) -> Server:
        """The server kind (``server=`` or probed once; see the module docstring)."""
        if self._server is None:
            self._server = self.detect_server()
        return self._server

    def detect_server(self) -> Server:
        """Probe the server (see the module docstring). Raises ModelError when it cannot be reached."""
        host = (urlsplit(self.base_url).hostname or "").lower()
        if host == "api.openai.com":
            return "openai"
        models = self._probe("/models", root=False)
        data = models.get("data") if models is not None else None
        owners = {m.get("owned_by") for m in data if isinstance(m, dict)} if isinstance(data, list) else set()
        for owner, kind in _OWNERS.items():
            if owner in owners:
                return kind  # type: ignore[return-value]
        props = self._probe("/props", root=True)
        if props is not None and "default_generation_settings" in props:
            return "llama.cpp"
        version = self._probe("/version", root=True)
        if version is not None and isinstance(version.get("version"), str):
            return "vllm"
        return "openai"

    def _probe(self, path: str, *, root: bool) -> dict[str, Any] | None:
        """GET a probe path; None when the server answers it with a client error or no JSON."""
        try:
            return self.get(path, root=root)
        except ModelError as exc:
            if exc.retryable:
                raise
            return None

    # --- HTTP ---------------------------------------------------------------------------
    def _root(self) -> str:
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def _url(self, path: str, root: bool) -> str:
        return (self._root() if root else self.base_url) + path

    def _wait(self, attempt: int) -> float:
        return min(self.backoff * 2.0 ** attempt, _MAX_BACKOFF)

    def _check_retry(self, exc: httpx.HTTPError, url: str, attempt: int) -> None:
        """Return when ``exc`` (a failed attempt) may be retried, else raise its ModelError."""
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            if attempt < self.retries:
                return
            raise ModelError(f"cannot reach {url}: {exc}", retryable=True) from None
        if isinstance(exc, httpx.TimeoutException):
            raise ModelError(f"{url} did not answer within {self.timeout} s ({type(exc).__name__})",
                             retryable=True) from None
        raise ModelError(f"the request to {url} failed: {type(exc).__name__}: {exc}", retryable=True) from None

    def _request(self, method: str, url: str, body: dict[str, Any] | None) -> tuple[int, bytes]:
        """One request with retries on connection errors and 503: (status, body, at most
        ``MAX_REPLY_BYTES``); ModelError for failures."""
        attempt = 0
        while True:
            try:
                with self._client.stream(method, url, json=body) as resp:
                    status = resp.status_code
                    if status == 503 and attempt < self.retries:
                        resp.close()
                    else:
                        return status, _capped(resp.iter_bytes(), url)
            except httpx.HTTPError as exc:
                self._check_retry(exc, url, attempt)
            time.sleep(self._wait(attempt))
            attempt += 1

    async def _arequest(self, method: str, url: str, body: dict[str, Any] | None) -> tuple[int, bytes]:
        client = self._async_client()
        attempt = 0
        while True:
            try:
                async with client.stream(method, url, json=body) as resp:
                    status = resp.status_code
                    if status == 503 and attempt < self.retries:
                        await resp.aclose()
                    else:
                        chunks, size = [], 0
                        async for chunk in resp.aiter_bytes():
                            size += len(chunk)
                            if size > MAX_REPLY_BYTES:
                                raise _too_long(url)
                            chunks.append(chunk)
                        return status, b"".join(chunks)
            except httpx.HTTPError as exc:
                self._check_retry(exc, url, attempt)
            await asyncio.sleep(self._wait(attempt))
            attempt += 1

    def _async_client(self) -> httpx.AsyncClient:
        if self._aclient is None:
            self._aclient = httpx.AsyncClient(transport=self._async_transport, **self._client_args)
        return self._aclient

    @staticmethod
    def _reply(url: str, reply: tuple[int, bytes]) -> dict[str, Any]:
        status, content = reply
        if status >= 400:
            raise _http_error(url, status, content)
        return _json_reply(content, url)

    def post(self, path: str, body: dict[str, Any], *, root: bool = False) -> dict[str, Any]:
        """POST JSON to ``path`` under the API (or server root); return the JSON reply."""
        url = self._url(path, root)
        return self._reply(url, self._request("POST", url, body))

    def get(self, path: str, *, root: bool = False) -> dict[str, Any]:
        """GET ``path`` under the API (or server root); return the JSON reply."""
        url = self._url(path, root)
        return self._reply(url, self._request("GET", url, None))

    async def apost(self, path: str, body: dict[str, Any], *, root: bool = False) -> dict[str, Any]:
        """`post` on the async client."""
        url = self._url(path, root)
        return self._reply(url, await self._arequest("POST", url, body))

    def post_stream(self, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST with ``stream: true``; yield each server-sent event's JSON (until ``[DONE]``)."""
        url = self.base_url + path
        try:
            with self._client.stream("POST", url, json={**body, "stream": True},
                                     headers={"Accept": "text/event-stream"}) as resp:
                if resp.status_code >= 400:
                    raise _http_error(url, resp.status_code, _capped(resp.iter_bytes(), url))
                for raw in _lines(resp.iter_bytes(), url):
                    line = raw.strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    yield _json_reply(data.encode(), url)
        except httpx.TimeoutException as exc:
            raise ModelError(f"{url} did not answer within {self.timeout} s ({type(exc).__name__})",
                             retryable=True) from None
        except httpx.HTTPError as exc:
            raise ModelError(f"the stream from {url} broke: {type(exc).__name__}: {exc}", retryable=True) from None

    def close(self) -> None:
        """Close the pooled connections (the async client's too, when there is no running loop)."""
        self._client.close()

    async def aclose(self) -> None:
        """Close the async client's connections."""
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None

    def stream(self, prompt: Any, *, chat: bool, **params: Any) -> Iterator[str]:
        """Text pieces of a streamed completion (``chat``: ``/chat/completions``)."""
        body = self._with_model({("messages" if chat else "prompt"): prompt, **params})
        self.costs.model_calls += 1
        for event in self.post_stream("/chat/completions" if chat else "/completions", body):
            choices = event.get("choices") or []
            if not choices or not isinstance(choices[0], dict):
                continue
            delta = choices[0].get("delta") if chat else None
            piece = (delta.get("content") if isinstance(delta, dict) else None) if chat else choices[0].get("text")
            if isinstance(piece, str) and piece:
                self.costs.generated_tokens += 1  # one event per token on common servers
                yield piece

    def _with_model(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.model:
            body["model"] = self.model
        return {k: v for k, v in body.items() if v is not None}

    def _count(self, reply: dict[str, Any]) -> None:
        usage = reply.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        self.costs.model_calls += 1

        def n(key: str) -> int:
            v = usage.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

        self.costs.prompt_tokens += n("prompt_tokens")
        self.costs.generated_tokens += n("completion_tokens")

    # --- endpoints --------------------------------------------------------------------
    def complete(self, prompt: str, **params: Any) -> dict[str, Any]:
        """``POST /completions``; ``params`` are request fields (max_tokens, stop, grammar…)."""
        reply = self.post("/completions", self._with_model({"prompt": prompt, **params}))
        self._count(reply)
        return reply

    def chat(self, messages: Sequence[dict[str, str]], **params: Any) -> dict[str, Any]:
        """``POST /chat/completions``."""
        reply = self.post("/chat/completions", self._with_model({"messages": list(messages), **params}))
        self._count(reply)
        return reply

    async def acomplete(self, prompt: str, **params: Any) -> dict[str, Any]:
        """`complete` on the async client."""
        reply = await self.apost("/completions", self._with_model({"prompt": prompt, **params}))
        self._count(reply)
        return reply

    async def achat(self, messages: Sequence[dict[str, str]], **params: Any) -> dict[str, Any]:
        """`chat` on the async client."""
        reply = await self.apost("/chat/completions", self._with_model({"messages": list(messages), **params}))
        self._count(reply)
        return reply

    def __repr__(self) -> str:
        return f"OpenAIModel({self.base_url!r}, model={self.model!r}, server={self._server!r})"


def load(spec: str, **options: Any) -> OpenAIModel:
    """`tether.models.load_model` entry: ``http(s)://host[:port][/v1][#model]``.

    Raises ModelArgumentError for unknown options (naming them)."""
    check_options(options, OPENAI_OPTIONS, "openai")
    return OpenAIModel(spec, **options)
