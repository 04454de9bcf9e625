"""Arguments to model backends fail closed: token ids, option names, types and ranges
raise tether errors (ModelArgumentError, a ValueError; ContextLengthError), never a
library's own exception."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.errors import ContextLengthError, ModelError, TetherError
from tether.models import ModelArgumentError, load_model
from tether.models.base import IntOption, check_options, check_tokens
from tether.models.scripted import ScriptedModel

anything = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5),
                     st.binary(max_size=5), st.lists(st.integers(), max_size=3))


@given(st.lists(st.one_of(st.integers(), anything), max_size=12), st.integers(1, 40),
       st.one_of(st.none(), st.integers(1, 12)))
def test_check_tokens_accepts_exactly_in_range_integer_lists(tokens, n_vocab, n_ctx) -> None:
    ints = all(isinstance(t, int) and not isinstance(t, bool) for t in tokens)
    in_range = ints and all(0 <= t < n_vocab for t in tokens)
    try:
        out = check_tokens(tokens, n_vocab, n_ctx)
    except ContextLengthError as e:
        assert in_range and tokens and n_ctx is not None and len(tokens) > n_ctx
        assert (e.n_ctx, e.needed) == (n_ctx, len(tokens))
    except ModelArgumentError as e:
        assert isinstance(e, ValueError) and e.argument == "tokens"
        assert not (in_range and tokens)
    else:
        assert in_range and tokens and out == list(tokens)
        assert n_ctx is None or len(out) <= n_ctx


def test_check_tokens_takes_numpy_integers() -> None:
    assert check_tokens(np.array([1, 2], dtype=np.int32), 3, None) == [1, 2]
    with pytest.raises(ModelArgumentError, match="not str"):
        check_tokens("ab", 300, None)  # type: ignore[arg-type]


KNOWN = {"n": IntOption(0, 10), "flag": bool, "name": str, "x": (int, float)}


@given(st.dictionaries(st.sampled_from(["n", "flag", "name", "x", "other", "n_ctx"]), anything,
                       max_size=4))
def test_check_options_refuses_with_tether_errors_only(options) -> None:
    try:
        check_options(options, KNOWN, "test")
    except ModelArgumentError as e:
        assert isinstance(e, ValueError) and e.argument
        assert e.argument in str(e)
    else:
        for k, v in options.items():
            assert k in KNOWN
            if v is None:
                continue
            if k == "n":
                assert type(v) is int and 0 <= v <= 10
            elif k == "flag":
                assert type(v) is bool
            elif k == "name":
                assert isinstance(v, str)
            else:
                assert type(v) in (int, float)


def test_unknown_options_are_named() -> None:
    with pytest.raises(ModelArgumentError, match=r"unknown options 'a', 'b' for the test backend; known: flag, n"):
        check_options({"b": 1, "a": 2}, KNOWN, "test")


def test_scripted_model_checks_tokens_and_context() -> None:
    m = ScriptedModel(n_ctx=4)
    assert m.n_ctx == 4
    m.logits([0, 5, 6, 7])
    with pytest.raises(ContextLengthError):
        m.logits([0, 5, 6, 7, 8])
    with pytest.raises(ContextLengthError):
        m.logits_batch([[0], [0, 5, 6, 7, 8]])
    with pytest.raises(ModelArgumentError, match="outside the vocabulary"):
        m.logits([0, m.vocabulary.n_logits])
    with pytest.raises(ModelArgumentError, match="at least one token"):
        m.logits_rows([], np.array([1]))
    assert ScriptedModel().n_ctx is None


@pytest.mark.parametrize("spec", [3, 2.5, b"embedded", ["embedded"], object()])
def test_load_model_refuses_other_spec_types(spec) -> None:
    with pytest.raises(ModelArgumentError, match="cannot load a model from"):
        load_model(spec)


def test_load_model_returns_a_model_as_is_without_options() -> None:
    m = ScriptedModel()
    assert load_model(m) is m
    with pytest.raises(ModelArgumentError, match="already loaded"):
        load_model(m, n_ctx=3)


@pytest.mark.parametrize(("options", "match"), [
    ({"timeout": 0}, "timeout=0"), ({"timeout": "1"}, "timeout='1'"), ({"timeout": True}, "timeout=True"),
    ({"n_ctx": -1}, "n_ctx=-1"), ({"nope": 1}, "unknown option 'nope' for the openai backend"),
])
def test_openai_options_are_checked(options, match) -> None:
    with pytest.raises(ModelArgumentError, match=match):
        load_model("http://127.0.0.1:9/v1", **options)


def test_openai_context_is_unknown_unless_given() -> None:
    assert load_model("http://127.0.0.1:9/v1").n_ctx is None
    assert load_model("http://127.0.0.1:9/v1", n_ctx=8192).n_ctx == 8192


def test_openai_unreachable_server_is_a_retryable_model_error() -> None:
    m = load_model("http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(ModelError) as info:
        m.complete("hi")
    assert info.value.retryable
    with pytest.raises(ModelError):
        list(m.stream("hi", chat=False))


def test_errors_are_tether_errors() -> None:
    assert issubclass(ModelArgumentError, TetherError) and issubclass(ModelArgumentError, ModelError)


@pytest.fixture(scope="module")
def bad_server():
    """A local server answering each path with a different failure."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path = self.path.removeprefix("/v1")
            if path.startswith("/status/"):
                code = int(path.split("/")[2])
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"nope")
                return
            body = {"/html/completions": b"<html>oops</html>", "/array/completions": b"[1, 2]",
                    "/binary/completions": b"\xff\xfe\x00",
                    "/stream/completions": b'data: {"choices": [{"text": "a"}]}\n\ndata: {broken\n\n'}[path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(("code", "retryable"), [(400, False), (404, False), (408, True),
                                                 (429, True), (500, True), (503, True)])
def test_http_statuses_are_model_errors(bad_server, code, retryable) -> None:
    m = load_model(f"{bad_server}/status/{code}/v1", timeout=5)
    m.base_url = f"{bad_server}/status/{code}"
    with pytest.raises(ModelError, match=f"HTTP {code}") as info:
        m.post("", {})
    assert info.value.retryable is retryable


@pytest.mark.parametrize("kind", ["html", "array", "binary"])
def test_malformed_replies_are_model_errors(bad_server, kind) -> None:
    m = load_model(f"{bad_server}/v1", timeout=5)
    m.base_url = f"{bad_server}/{kind}"
    with pytest.raises(ModelError, match="not JSON|not an object"):
        m.complete("hi")


def test_malformed_stream_event_is_a_model_error(bad_server) -> None:
    m = load_model(f"{bad_server}/v1", timeout=5)
    m.base_url = f"{bad_server}/stream"
    pieces = []
    with pytest.raises(ModelError, match="not JSON"):
        for p in m.stream("hi", chat=False):
            pieces.append(p)
    assert pieces == ["a"]
