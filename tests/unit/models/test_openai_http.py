"""OpenAIModel without a server: URL handling, errors (the live server is in integration)."""

from __future__ import annotations

import socket

import pytest

from tether.errors import ModelError
from tether.models import load_model
from tether.models.openai_http import OpenAIModel


def test_url_and_model_name() -> None:
    m = OpenAIModel("http://127.0.0.1:9/v1#my-model")
    assert m.base_url == "http://127.0.0.1:9/v1" and m.model == "my-model" and m.black_box
    assert OpenAIModel("http://h:1").base_url == "http://h:1/v1"


def test_load_model_picks_openai_for_urls() -> None:
    m = load_model("http://127.0.0.1:9/v1#x")
    assert isinstance(m, OpenAIModel)


def test_refused_connection_is_a_retryable_model_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = OpenAIModel(f"http://127.0.0.1:{port}/v1", timeout=2)
    with pytest.raises(ModelError) as info:
        m.complete("x", max_tokens=1)
    assert info.value.retryable and "cannot reach" in str(info.value)
