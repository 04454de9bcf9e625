"""Reproduce the method of the LMQL paper's Tables 3 and 4 on the embedded model.

The same three tasks are written twice, both in this project:

* **LMQL** — a query (``tether.lang``): constraints are checked per token, so holes end
  exactly where they should and prompt text is inserted between holes without a new
  round trip;
* **baseline** — Python around ``tether.program.generate()`` without constraints, the way
  a plain generate() API is used: generate a chunk of ``--chunk`` tokens, parse it,
  cut at the stop phrase, call again (paper §6: chunk-wise decoding).

Tasks (few-shot prompts written for this project): Odd One Out with chain of thought and
``distribute`` (Fig. 10 / Table 3), ReAct with a stub search function (Fig. 11 / Table 4),
arithmetic with a calculator (case study 3 / Table 4).

Metrics (paper §6.1): generate() calls (decoding runs started), model queries (forward
passes), billable tokens (prompt + generated tokens, per generate call) and lines of code
(functional lines: no blanks, comments, docstrings or few-shot prompt text). For LMQL
two accountings are printed: per hole (every hole is a decoding run that re-sends its
prompt, which is what ``Costs`` counts) and per query (the paper's: the query is one
continuous decoding run, each trace token billed once).

    PYTHONPATH=src .venv/bin/python bench/bench_lmql_costs.py [--chunk 10,30] [--n 3]
"""

from __future__ import annotations

import argparse
import inspect
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------------------
# few-shot prompts (excluded from lines of code, as in the paper)

ODD_SHOTS = (
    "Pick the odd word out: shirt, coat, spoon, scarf.\n"
    "shirt is clothing, coat is clothing, spoon is cutlery, scarf is clothing.\n"
    "So the odd one is spoon.\n\n"
    "Pick the odd word out: Peru, Chile, Spanish, Brazil.\n"
    "Peru is a country, Chile is a country, Spanish is a language, Brazil is a country.\n"
    "So the odd one is Spanish.\n\n"
)
REACT_SHOTS = (
    "What is the elevation range of the area the eastern Colorado orogeny extends into?\n"
    "Tho 1: I need to search Colorado orogeny and find where its eastern sector goes.\n"
    "Act 2: Search 'Colorado orogeny'\n"
    "Obs 2: The Colorado orogeny was an episode of mountain building in Colorado.\n"
    "Tho 3: The High Plains rise from about 1,800 to 7,000 ft, so that is the answer.\n"
    "Act 4: Finish '1,800 to 7,000 ft'\n"
)
MATH_SHOTS = (
    "Q: Ann has 2 bags with 5 pears each. She eats 3. How many pears are left?\n"
    "A: She had <<2*5=10>>10 pears. After eating 3 she has <<10-3=7>>7 left. So the answer is 7.\n\n"
    "Q: A book costs 4 dollars. How much do 6 books cost?\n"
    "A: Six books cost <<6*4=24>>24 dollars. So the answer is 24.\n\n"
)

ODD_DATA = ["apple, pear, hammer, plum", "red, blue, seven, green", "dog, cat, chair, horse",
            "Paris, Rome, Tokyo, banana", "violin, cello, carrot, flute", "oak, pine, maple, salmon"]
ODD_ANSWERS = ["hammer", "seven", "chair", "banana", "carrot", "salmon"]
MATH_ANSWERS = [12, 35, 12]
REACT_DATA = ["Where is Apple Computers headquartered?", "Which river flows through Paris?"]
MATH_DATA = ["Tom has 3 boxes with 4 apples each. How many apples does he have?",
             "A train ride costs 7 dollars. How much do 5 rides cost?",
             "Sara had 20 sweets and gave away 8. How many are left?"]
REACT_STEPS = 4
MATH_STEPS = 4


def wiki_search(q: str) -> str:
    """Stub search: a fixed sentence mentioning the subject (deterministic, pure)."""
    return f"{q.strip()} is described in the encyclopedia; its main facts are well known."


def calc(expr: str) -> str:
    if not re.fullmatch(r"[0-9+\-*/(). ]+", expr.strip()):
        return "?"
    try:
        return str(eval(expr, {"__builtins__": {}}))  # noqa: S307 - digits and operators only
    except Exception:
        return "?"


# --------------------------------------------------------------------------------------
# LMQL versions

ODD_QUERY = '''argmax
    "{ODD_SHOTS}Pick the odd word out: {OPTIONS}\\n"
    "[REASONING]"
    "[RESULT]"
where
    not "\\n" in REASONING and not "Pick" in REASONING and
    stops_at(REASONING, "So the odd one") and stops_at(REASONING, ".") and len(WORDS(REASONING)) < 40
distribute
    RESULT over OPTIONS.split(", ")
'''

REACT_QUERY = '''argmax
    "{REACT_SHOTS}{QUESTION}\\n"
    for i in range(REACT_STEPS):
        "[MODE] {i}:"
        if MODE == "Tho":
            "[THOUGHT] "
        elif MODE == "Act":
            " [ACTION] '[SUBJECT]\\n"
            if ACTION == "Search":
                "Obs {i}: {wiki_search(SUBJECT[:-1])}\\n"
            else:
                break
where
    MODE in ["Tho", "Act"] and stops_at(THOUGHT, "\\n") and ACTION in ["Search", "Finish"] and
    len(words(THOUGHT)) > 2 and stops_at(SUBJECT, "'") and not "Tho" in THOUGHT and len(TOKENS(THOUGHT)) < 40
'''

MATH_QUERY = '''argmax
    "{MATH_SHOTS}Q: {QUESTION}\\nA:"
    for i in range(MATH_STEPS):
        "[STEP]" where STOPS_AT(STEP, "<<") and STOPS_AT(STEP, "So the answer") and len(TOKENS(STEP)) < 40
        if STEP.endswith("<<"):
            "[EXPR]" where STOPS_AT(EXPR, "=") and len(TOKENS(EXPR)) < 16
            "{calc(EXPR[:-1])}>>"
        else:
            " is[ANSWER]." where INT(ANSWER) and len(TOKENS(ANSWER)) < 6
            break
'''


# --------------------------------------------------------------------------------------
# chunk-wise generate() baselines


def gen(model: Any, prompt: str, chunk: int) -> str:
    from tether.program import generate

    return generate(model, prompt, max_tokens=chunk, healing=False).text


def odd_baseline(model: Any, options: str, chunk: int) -> str:
    prompt = ODD_SHOTS + f"Pick the odd word out: {options}\n"
    reasoning = ""
    while len(reasoning.split()) < 40:
        out = gen(model, prompt + reasoning, chunk)
        reasoning += out
        cuts = [i + len(s) for s in (".", "\n", "So the odd one", "Pick") if (i := reasoning.find(s)) >= 0]
        if cuts or not out:
            reasoning = reasoning[: min(cuts)] if cuts else reasoning
            break
    reasoning = reasoning.replace("\n", "").replace("Pick", "")
    scores = {o: score(model, prompt + reasoning, o) for o in options.split(", ")}
    return max(scores, key=scores.get)


def score(model: Any, prompt: str, value: str) -> float:
    from tether.decoding.scoring import score_tokens

    ctx = model.tokenize(prompt, add_bos=True)
    full = model.tokenize(prompt + value, add_bos=True)
    cont = full[len(ctx):] if full[: len(ctx)] == ctx else model.tokenize(value)
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(ctx)
    model.costs.generated_tokens += len(cont)
    return score_tokens(model, ctx, [cont], batch=False)[0]


def read_line(model: Any, prompt: str, chunk: int, limit: int = 120) -> str:
    line = ""
    while "\n" not in line and len(line) < limit:
        out = gen(model, prompt + line, chunk)
        if not out:
            break
        line += out
    return line.split("\n", 1)[0] + "\n"


def react_baseline(model: Any, question: str, chunk: int) -> str:
    prompt = REACT_SHOTS + question + "\n"
    for i in range(REACT_STEPS):
        line = read_line(model, prompt, chunk)
        m = re.match(r"\s*(Tho|Act)\s*\d*:\s*(.*)", line)
        if m is None or m.group(1) == "Tho":
            prompt += line
            continue
        act = re.match(r"\s*(Search|Finish)\s*'([^']*)'?", m.group(2))
        prompt += line
        if act is None:
            continue
        if act.group(1) == "Finish":
            break
        prompt += f"Obs {i}: {wiki_search(act.group(2))}\n"
    return prompt


def math_baseline(model: Any, question: str, chunk: int) -> str:
    prompt = MATH_SHOTS + f"Q: {question}\nA:"
    for _ in range(MATH_STEPS):
        out = gen(model, prompt, chunk)
        calc_at = out.find("<<")
        answer = re.search(r"So the answer is\s*(\d+)", out)
        if calc_at >= 0 and (answer is None or calc_at < answer.start()):
            prompt += out[: calc_at + 2]
            rest = out[calc_at + 2 :]
            while "=" not in rest and len(rest) < 80:
                more = gen(model, prompt + rest, chunk)
                if not more:
                    break
                rest += more
            expr = rest.split("=", 1)[0]
            prompt += f"{expr}={calc(expr)}>>"
        elif answer is not None:
            return prompt + out[: answer.end()] + "."
        else:
            prompt += out
    return prompt


# --------------------------------------------------------------------------------------
# measurement


def loc(text: str) -> int:
    """Functional lines: no blank lines, comments, docstrings or few-shot prompt text."""
    n, in_doc = 0, False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(('"""', "'''")):
            in_doc = not (s.count('"""') + s.count("'''") >= 2 and len(s) > 3) and not in_doc
            continue
        if in_doc or not s or s.startswith("#"):
            continue
        n += 1
    return n


@dataclass
class Tally:
    runs: int = 0
    generate_calls: int = 0
    model_calls: int = 0
    billable: int = 0
    per_query_billable: int = 0
    seconds: float = 0.0
    extra: list[Any] = field(default_factory=list)

    def add(self, c: Any, trace_tokens: int, secs: float) -> None:
        self.runs += 1
        self.generate_calls += c.generate_calls
        self.model_calls += c.model_calls
        self.billable += c.billable_tokens
        self.per_query_billable += trace_tokens
        self.seconds += secs

    def avg(self, name: str) -> float:
        return getattr(self, name) / max(1, self.runs)


def measure(model: Any, task: str, items: list[str], chunks: list[int]) -> tuple[Tally, dict[int, Tally]]:
    from tether.lang import load_query

    env = {"ODD_SHOTS": ODD_SHOTS, "REACT_SHOTS": REACT_SHOTS, "MATH_SHOTS": MATH_SHOTS,
           "wiki_search": wiki_search, "calc": calc, "REACT_STEPS": REACT_STEPS, "MATH_STEPS": MATH_STEPS}
    src, param, base = {"odd": (ODD_QUERY, "OPTIONS", odd_baseline), "react": (REACT_QUERY, "QUESTION", react_baseline),
                        "math": (MATH_QUERY, "QUESTION", math_baseline)}[task]
    q = load_query(src, params=[param], env=env)
    lm = Tally()
    bls = {c: Tally() for c in chunks}
    for item in items:
        model.costs.reset()
        t = time.perf_counter()
        res = q.run(model=model, **{param: item})
        c = model.costs.snapshot()
        # per query: one decoding run over the whole trace (each token billed once), plus
        # the scoring runs of distribute, which re-send their prompt as the paper's do
        trace = len(model.tokenize(res.prompt, add_bos=True))
        lm.add(c, c.billable_tokens if task == "odd" else trace, time.perf_counter() - t)
        lm.extra.append(res)
        for chunk, bl in bls.items():
            model.costs.reset()
            t = time.perf_counter()
            out = base(model, item, chunk)
            bl.add(model.costs.snapshot(), 0, time.perf_counter() - t)
            bl.extra.append(out)
    lm.extra.insert(0, loc(src))
    helpers = {"odd": [score], "react": [gen, read_line], "math": [gen]}[task]
    base_loc = loc(inspect.getsource(base)) + sum(loc(inspect.getsource(h)) for h in helpers)
    for bl in bls.values():
        bl.extra.insert(0, base_loc)
    return lm, bls


def _accuracy(task: str, outs: list[Any], gold: list[Any]) -> float:
    if task == "odd":
        got = outs
    else:
        got = [int(m.group(1)) if (m := re.search(r"So the answer is\s*(\d+)", o)) else None for o in outs]
    return sum(a == g for a, g in zip(got, gold, strict=False)) / max(1, len(got))


def pct(a: float, b: float) -> str:
    return f"{(b - a) / a * 100:+.1f}%" if a else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunk", default="30", help="baseline chunk sizes in tokens, comma-separated (paper: 30)")
    ap.add_argument("--n", type=int, default=0, help="items per task (0: all)")
    ap.add_argument("--tasks", default="odd,react,math")
    args = ap.parse_args()
    from tether.models import load_model

    chunks = [int(c) for c in args.chunk.split(",")]
    model = load_model("embedded")
    print(f"# LMQL cost method (Tables 3/4) on {getattr(model, 'name', 'embedded')}; "
          f"{platform.machine()} {platform.python_version()}; baseline chunk sizes {chunks} tokens\n")
    data = {"odd": ODD_DATA, "react": REACT_DATA, "math": MATH_DATA}
    names = {"odd": "Odd One Out (Fig. 10)", "react": "ReAct (Fig. 11)", "math": "Arithmetic (calculator)"}
    head = " | ".join(f"baseline chunk {c}" for c in chunks)
    print(f"| task | metric | {head} | LMQL per hole | LMQL per query | Δ per query vs chunk {chunks[-1]} |")
    print("|---|---|" + "---:|" * (len(chunks) + 3))
    for task in args.tasks.split(","):
        items = data[task][: args.n or None]
        lm, bls = measure(model, task, items, chunks)
        per_query_calls = 1.0 + (len(items[0].split(", ")) if task == "odd" else 0)
        rows = [
            ("generate() calls", "generate_calls", lm.avg("generate_calls"), per_query_calls),
            ("model queries", "model_calls", lm.avg("model_calls"), lm.avg("model_calls")),
            ("billable tokens", "billable", lm.avg("billable"), lm.avg("per_query_billable")),
            ("lines of code", None, lm.extra[0], lm.extra[0]),
            ("seconds", "seconds", lm.avg("seconds"), lm.avg("seconds")),
        ]
        for metric, attr, l1, l2 in rows:
            vals = [bl.avg(attr) if attr else bl.extra[0] for bl in bls.values()]
            cells = " | ".join(f"{v:.2f}" for v in vals)
            print(f"| {names[task]} | {metric} | {cells} | {l1:.2f} | {l2:.2f} | {pct(vals[-1], l2)} |")
        if task in ("odd", "math"):
            gold = ODD_ANSWERS if task == "odd" else MATH_ANSWERS
            lm_ans = [r.variables.get("RESULT" if task == "odd" else "ANSWER") for r in lm.extra[1:]]
            if task == "math":
                lm_ans = [int(str(a).strip()) if str(a).strip().isdigit() else None for a in lm_ans]
            accs = [_accuracy(task, bl.extra[1:], gold) for bl in bls.values()]
            lm_acc = sum(a == g for a, g in zip(lm_ans, gold, strict=False)) / len(lm_ans)
            cells = " | ".join(f"{a:.0%}" for a in accs)
            print(f"| {names[task]} | accuracy | {cells} | {lm_acc:.0%} | {lm_acc:.0%} | |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
