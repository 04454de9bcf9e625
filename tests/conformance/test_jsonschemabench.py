"""JSONSchemaBench developer sample (300 schemas, 10 categories) through compile_json_schema.

Per schema: does it compile (strict, then ``lenient=True``)? For each compiled grammar,
every ``valid`` MaskBench instance, re-serialised in the output policy, must be accepted,
and every ``invalid`` one rejected where the grammar claims exactness (no warnings).
``KNOWN`` lists the documented exceptions, with the reason.

The default run takes a deterministic sample (every 6th schema); the whole set is ``slow``.
``python tests/conformance/test_jsonschemabench.py [--peers]`` prints the per-category
table (with llguidance's and xgrammar's numbers on the same re-serialised instances when
``--peers`` and they are installed; both in compact JSON, spec ``additionalProperties``).
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tether.errors import LimitError, SchemaError, UnsupportedSchemaError
from tether.grammar.json_schema import compile_json_schema, dumps_for
from tether.parser import ByteParser, accepts

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / ".." / "shared" / "data" / "jsonschemabench-dev"

# schema id → reason a valid instance is rejected (or an invalid one accepted) by design
KNOWN: dict[str, str] = {}

pytestmark = pytest.mark.skipif(not (BENCH / "manifest.json").exists(), reason=f"test data missing: {BENCH}")


def items() -> list[dict]:
    manifest = json.loads((BENCH / "manifest.json").read_text())
    return manifest["items"]


def load(item: dict) -> dict:
    return json.loads((BENCH / item["file"]).read_text())


def check_schema(rec: dict) -> dict:
    """Outcome of one schema: status, and per-instance results."""
    out: dict = {"status": "ok", "valid_ok": 0, "valid_bad": [], "invalid_ok": 0, "invalid_bad": [],
                 "invalid_unclaimed": 0, "warnings": 0}
    try:
        g = compile_json_schema(rec["schema"])
    except UnsupportedSchemaError as exc:
        out["status"] = "unsupported"
        out["error"] = str(exc)
        try:
            g = compile_json_schema(rec["schema"], lenient=True)
            out["status"] = "lenient"
        except (SchemaError, LimitError) as exc2:
            out["error2"] = str(exc2)
            return out
    except (SchemaError, LimitError) as exc:
        out["status"] = "error"
        out["error"] = str(exc)
        return out
    out["warnings"] = len(g.warnings)
    g = ByteParser(g)  # lends its tables to every check below
    for i, t in enumerate(rec["tests"]):
        text = dumps_for(rec["schema"], t["data"]).encode("utf-8")
        ok = accepts(g, text)
        if t["valid"]:
            if ok:
                out["valid_ok"] += 1
            else:
                out["valid_bad"].append(i)
        elif out["warnings"]:
            out["invalid_unclaimed"] += 1
            out["invalid_unclaimed_rejected"] = out.get("invalid_unclaimed_rejected", 0) + (not ok)
        elif not ok:
            out["invalid_ok"] += 1
        else:
            out["invalid_bad"].append(i)
    return out


def _sample(step: int) -> list[dict]:
    return items()[::step]


def _run(selected: list[dict]) -> None:
    bad = []
    for item in selected:
        rec = load(item)
        res = check_schema(rec)
        if item["id"] in KNOWN:
            continue
        if res["status"] in ("ok",) and (res["valid_bad"] or res["invalid_bad"]):
            bad.append(f"{item['id']}: valid rejected {res['valid_bad']}, invalid accepted {res['invalid_bad']}")
        if res["status"] == "lenient" and res["valid_bad"]:
            bad.append(f"{item['id']} (lenient): valid rejected {res['valid_bad']}")
    assert not bad, "\n".join(bad)


def test_bench_sample() -> None:
    _run(_sample(6))


@pytest.mark.slow
def test_bench_full() -> None:
    _run(items())


# --------------------------------------------------------------------------- the table


def _llguidance_checker():  # type: ignore[no-untyped-def]
    import llguidance

    class ByteTok:
        eos_token_id = 256
        bos_token_id = None
        tokens = [bytes([i]) for i in range(256)] + [b""]
        special_token_ids = [256]

        def __call__(self, s):  # type: ignore[no-untyped-def]
            return list(s if isinstance(s, bytes) else s.encode("utf-8"))

    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(ByteTok()))

    def compile_(schema):  # type: ignore[no-untyped-def]
        grm = llguidance.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False}
        )
        is_err, msgs = llguidance.LLMatcher.validate_grammar_with_warnings(grm, tok)
        if is_err:
            return None
        return grm

    def accepts_(grm, text: bytes) -> bool:  # type: ignore[no-untyped-def]
        m = llguidance.LLMatcher(tok, grm, log_level=0)
        if m.is_error():
            return False
        return m.consume_tokens(list(text)) and m.is_accepting()

    return compile_, accepts_


def _xgrammar_checker():  # type: ignore[no-untyped-def]
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    def compile_(schema):  # type: ignore[no-untyped-def]
        try:  # spec semantics (strict_mode=False keeps additionalProperties allowed by default)
            return xgrammar.Grammar.from_json_schema(
                json.dumps(schema), any_whitespace=False, separators=(",", ":"), strict_mode=False
            )
        except Exception:  # noqa: BLE001 - any failure counts as "does not compile"
            return None

    def accepts_(grm, text: bytes) -> bool:  # type: ignore[no-untyped-def]
        try:
            return bool(_is_grammar_accept_string(grm, text.decode("utf-8")))
        except Exception:  # noqa: BLE001
            return False

    return compile_, accepts_


def table(peers: bool = False) -> str:
    cats: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    others = {}
    if peers:
        for name, make in (("llg", _llguidance_checker), ("xgr", _xgrammar_checker)):
            try:
                others[name] = make()
            except ImportError:
                pass
    t0 = time.time()
    for item in items():
        rec = load(item)
        c = cats[item["category"]]
        c["schemas"] += 1
        res = check_schema(rec)
        c[res["status"]] += 1
        if res["status"] in ("ok", "lenient"):
            c["valid_total"] += res["valid_ok"] + len(res["valid_bad"])
            c["valid_ok"] += res["valid_ok"]
            c["invalid_claimed"] += res["invalid_ok"] + len(res["invalid_bad"])
            c["invalid_rejected"] += res["invalid_ok"]
            c["invalid_all"] += res["invalid_ok"] + len(res["invalid_bad"]) + res["invalid_unclaimed"]
            c["invalid_all_rejected"] += res["invalid_ok"] + res.get("invalid_unclaimed_rejected", 0)
        for name, (comp, acc) in others.items():
            grm = comp(rec["schema"])
            if grm is None:
                continue
            c[f"{name}_compiled"] += 1
            for t in rec["tests"]:
                ok = acc(grm, dumps_for(rec["schema"], t["data"]).encode("utf-8"))
                key = f"{name}_valid" if t["valid"] else f"{name}_invalid"
                c[key + "_total"] += 1
                c[key + "_ok"] += ok == t["valid"]
    head = (f"{'category':16s} {'n':>3s} {'strict':>6s} {'lenient':>7s} {'valid acc':>11s} "
            f"{'invalid rej':>11s} {'(all inv.)':>11s}" + "".join(f"  {n}: compiled valid-acc invalid-rej" for n in others))
    lines = [head]
    tot: dict[str, int] = defaultdict(int)
    for cat in sorted(cats) + ["TOTAL"]:
        c = cats[cat] if cat != "TOTAL" else tot
        if cat != "TOTAL":
            for k, v in c.items():
                tot[k] += v
        line = (f"{cat:16s} {c['schemas']:3d} {c['ok']:6d} {c['ok'] + c['lenient']:7d} "
                f"{c['valid_ok']:5d}/{c['valid_total']:<5d} {c['invalid_rejected']:5d}/{c['invalid_claimed']:<5d} "
                f"{c['invalid_all_rejected']:5d}/{c['invalid_all']:<5d}")
        for n in others:
            line += (f"  {c[n + '_compiled']:13d} {c[n + '_valid_ok']:5d}/{c[n + '_valid_total']:<5d} "
                     f"{c[n + '_invalid_ok']:5d}/{c[n + '_invalid_total']:<5d}")
        lines.append(line)
    lines.append(f"({time.time() - t0:.0f} s)")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(table(peers="--peers" in sys.argv))
