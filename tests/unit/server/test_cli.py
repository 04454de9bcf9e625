"""`tether serve` argument checks and `tether --version` (no server started)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from tether.cli import main  # noqa: E402


@pytest.mark.parametrize("args", [
    ["serve", "--limit", "no_such_limit=3"],
    ["serve", "--limit", "max_repeat"],
    ["serve", "--limit", "max_repeat=abc"],
    ["serve", "--limit", "max_repeat=-1"],
    ["serve", "--parallel", "0"],
    ["serve", "--port", "70000"],
    ["serve", "--threads-batch", "0"],
])
def test_bad_serve_options_exit_2(args, capsys) -> None:
    assert main(args) == 2
    assert "tether serve:" in capsys.readouterr().err


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("tether ")


def test_serve_reads_options(monkeypatch) -> None:
    seen = {}

    def fake_serve(config):  # what `tether serve` would run
        seen["config"] = config
        return 0

    monkeypatch.setattr("tether.server.serve", fake_serve)
    monkeypatch.setenv("TETHER_API_KEY", "from-env")
    assert main(["serve", "--parallel", "3", "--limit", "compile_seconds=2", "--limit", "max_n=2",
                 "--port", "9000"]) == 0
    c = seen["config"]
    assert (c.parallel, c.port, c.api_key, c.limits.compile_seconds, c.limits.max_n) == (3, 9000, "from-env", 2.0, 2)
    assert c.host == "127.0.0.1"
    assert c.threads_batch is None  # the server picks every core
    assert main(["serve", "--threads-batch", "2"]) == 0 and seen["config"].threads_batch == 2
    assert main(["serve", "--api-key", "flag"]) == 0 and seen["config"].api_key == "flag"
