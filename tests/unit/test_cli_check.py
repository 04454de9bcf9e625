"""``tether check``, ``tether --version`` and ``tether run`` on a missing file.

Good and broken files of every kind ``check`` reads; broken inputs generated with
hypothesis never end in a traceback (``main`` returns 0 or 1, never raises).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import cli

SRC = Path(__file__).resolve().parents[2] / "src"

GOOD = {
    "schema.json": '{"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}',
    "g.gbnf": 'root ::= "yes" | "no" | num\nnum ::= [0-9]+\n',
    "g.lark": 'start: pair ("," pair)*\npair: WORD "=" INT\n%import common.WORD\n%import common.INT\n',
    "g.ebnf": "start ::= 'a' b ;\nb ::= 'b' | 'c' ;\n",
    "g.kbnf": "start ::= #\"[0-9]+\" ;\n",
    "p.regex": "[0-9]{3}-[0-9]{4}\n",
    "p.re": "(yes|no)",
    "q.lmql": 'argmax\n    "Q: Capital of France?\\nA:[CITY]" where STOPS_AT(CITY, "\\n")\nfrom\n    "embedded"\n',
}

# file -> (text, what the error names: the place)
BROKEN = {
    "schema.json": ('{"type": "object", "properties": {"a": {"minimum": "x"}}}', "#/properties/a/minimum"),
    "syntax.json": ('{"type": \n "object",, }', "line 2 column"),
    "g.gbnf": ('root ::= "a" missing\n', "line 1 column 14"),
    "g.lark": ("start: A\nA: /a(b/\n", "line 2 column"),
    "g.ebnf": ("start ::= 'a' | b ;\n", "line 1 column 17"),
    "p.regex": ("a(b|c", "offset 1"),
    "q.lmql": ('argmax\n    "Q:[X"\nfrom "embedded"\n', "line 2 column"),
}


def _write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_file_compiles_with_a_summary(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, name, GOOD[name])
    assert cli.main(["check", str(p)]) == 0
    out = capsys.readouterr()
    line, = out.out.strip().splitlines()
    assert line.startswith(f"{p}: ok: ")
    if name.endswith(".lmql"):
        assert "1 hole (CITY)" in line
    elif name.endswith((".regex", ".re")):
        assert "lexer DFA state" in line
    else:
        assert " rule" in line and " terminal" in line and "lexer DFA state" in line
    assert out.err == ""


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_file_names_the_place(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, place = BROKEN[name]
    p = _write(tmp_path, name, text)
    assert cli.main(["check", str(p)]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith(f"{p}: error: ")
    assert place in out.err
    assert "Traceback" not in out.err


def test_several_files_each_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path, "g.gbnf", GOOD["g.gbnf"])
    bad = _write(tmp_path, "p.regex", BROKEN["p.regex"][0])
    assert cli.main(["check", str(good), str(bad), "--regex", "[a-z]+", "--regex", "(x"]) == 1
    out = capsys.readouterr()
    assert f"{good}: ok" in out.out and "--regex '[a-z]+': ok" in out.out
    assert f"{bad}: error" in out.err and "--regex '(x': error" in out.err


def test_inline_regex(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", "--regex", "[0-9]{2}"]) == 0
    assert "3 lexer DFA states" in capsys.readouterr().out
    assert cli.main(["check", "--regex", "a{2,1}"]) == 1
    assert "offset" in capsys.readouterr().err


def test_grammar_start_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "g.lark", "top: \"a\"\n")
    assert cli.main(["check", str(p)]) == 1
    assert "no start rule" in capsys.readouterr().err
    assert cli.main(["check", str(p), "--start", "top"]) == 0


def test_lmql_is_compiled_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"
    query = (f"argmax\n    import pathlib\n    pathlib.Path({str(marker)!r}).write_text('x')\n"
             '    "A:[X]"\nfrom "embedded"\n')
    p = _write(tmp_path, "q.lmql", query)
    assert cli.main(["check", str(p)]) == 0
    assert "1 hole (X)" in capsys.readouterr().out
    assert not marker.exists()


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(tmp_path / "missing.lark")]) == 2
    assert "file not found" in capsys.readouterr().err
    p = _write(tmp_path, "notes.txt", "hello")
    assert cli.main(["check", str(p)]) == 2
    assert "unknown file kind '.txt'" in capsys.readouterr().err
    assert cli.main(["check"]) == 2


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "g.gbnf"
    p.write_bytes(b'root ::= "\xff"\n')
    assert cli.main(["check", str(p)]) == 1
    assert "not UTF-8 text (byte offset 10)" in capsys.readouterr().err


def test_hostile_depth_is_a_limit_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "deep.json", "[" * 50_000)
    assert cli.main(["check", str(p)]) == 1
    assert "LimitError" in capsys.readouterr().err
    p = _write(tmp_path, "deep.lark", "start: " + "(" * 50_000 + '"a"' + ")" * 50_000 + "\n")
    assert cli.main(["check", str(p)]) == 1
    assert "max_nesting" in capsys.readouterr().err


def _mutations(text: str) -> st.SearchStrategy[str]:
    """Broken variants of ``text``: a slice deleted, characters inserted, or cut short."""
    alphabet = st.sampled_from(list('()[]{}|*+?"\'/\\:=;,.-~#%\n ab0Z'))
    edits = st.tuples(st.integers(0, len(text)), st.integers(0, 8), st.text(alphabet, max_size=6))
    return edits.map(lambda e: text[: e[0]] + e[2] + text[e[0] + e[1]:])


@pytest.mark.parametrize("name", sorted(GOOD))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_broken_inputs_never_traceback(name: str, data: st.DataObject, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    text = data.draw(st.one_of(_mutations(GOOD[name]), st.text(max_size=60)), label="text")
    p = _write(tmp_path, name, text)
    rc = cli.main(["check", str(p)])  # a foreign exception would fail the test here
    out = capsys.readouterr()
    assert rc in (0, 1)
    if rc == 0:
        assert out.out.startswith(f"{p}: ok: ") and out.err == ""
    else:
        assert out.err.startswith(f"{p}: error: ") and out.out == ""


def _tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300, check=False)


def test_version_subprocess(tmp_path: Path) -> None:
    from importlib.metadata import version

    r = _tether("--version", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout.strip() == f"tether {version('tether')}"


def test_run_missing_file_subprocess(tmp_path: Path) -> None:
    r = _tether("run", "missing.lmql", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == "tether run: file not found: missing.lmql"
    assert "Traceback" not in r.stderr


def test_check_subprocess_exit_codes(tmp_path: Path) -> None:
    _write(tmp_path, "g.gbnf", GOOD["g.gbnf"])
    _write(tmp_path, "bad.gbnf", BROKEN["g.gbnf"][0])
    ok = _tether("check", "g.gbnf", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("g.gbnf: ok: GBNF grammar: ")
    bad = _tether("check", "bad.gbnf", cwd=tmp_path)
    assert bad.returncode == 1 and "line 1 column 14" in bad.stderr and "Traceback" not in bad.stderr


def test_run_unknown_model_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "q.lmql", 'argmax\n    x = 1 / 0\n    "A:[X]"\nfrom "embedded"\n')
    assert cli.main(["run", str(p), "--model", "no-such-model-spec"]) == 1
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.model
def test_run_on_the_embedded_model_subprocess(tmp_path: Path) -> None:
    _write(tmp_path, "q.lmql", 'argmax\n    "Q: Is Paris in France? Answer yes or no.\\nA:[ANSWER]" '
                               'where ANSWER in [" yes", " no"]\nfrom\n    "embedded"\n')
    r = _tether("run", "q.lmql", "--no-color", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ANSWER = ' yes'" in r.stdout or "ANSWER = ' no'" in r.stdout
    assert "costs:" in r.stdout


@pytest.mark.model
def test_run_reports_the_query_raising_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "q.lmql", 'argmax\n    x = 1 / 0\n    "A:[X]"\nfrom\n    "embedded"\n')
    assert cli.main(["run", str(p)]) == 1
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and "Traceback" not in err
