"""docs/limits.md lists every limit with its default and every error class."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

from tether import errors
from tether.limits import Limits

DOC = (Path(__file__).resolve().parents[3] / "docs" / "limits.md").read_text()


def _rows() -> dict[str, str]:
    rows = {}
    for line in DOC.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`") and cells[0].endswith("`"):
            rows.setdefault(cells[0].strip("`"), cells[1])
    return rows


def test_every_limit_is_in_the_table_with_its_default() -> None:
    rows = _rows()
    for f in dataclasses.fields(Limits):
        assert f.name in rows, f"docs/limits.md has no row for {f.name}"
        default = getattr(Limits(), f.name)
        written = rows[f.name].replace(",", "")
        assert float(written) == float(default), f"{f.name}: docs say {rows[f.name]}, code {default}"


def test_every_error_class_has_an_example_message() -> None:
    rows = _rows()
    classes = [n for n, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.TetherError) and c is not errors.TetherError]
    for name in classes:
        assert name in rows, f"docs/limits.md has no example message for {name}"
        assert name in DOC.split("## The errors")[1].split("Example messages")[0], name
