"""What a `tether.Generator` saves per call: lowering the output again.

``generate(model, prompt, Output)`` lowers ``Output`` (a Pydantic model: its JSON Schema,
then the grammar) on every call and finds the compiled constraint in the engine's cache;
a `Generator` lowers it once and passes the lowered spec. Timed here without decoding:
the lowering plus the cache lookup (what ``generate`` does before decoding) against the
lookup alone (what a ``Generator`` call does), on the scripted model's vocabulary (the
cache key does not depend on the vocabulary's size).

    PYTHONPATH=src python bench/bench_generator.py
"""

from __future__ import annotations

import statistics
import time

from pydantic import BaseModel

from tether.models.scripted import ScriptedModel
from tether.program.generate import compile_output
from tether.program.outputs import output_spec


class Address(BaseModel):
    street: str
    city: str
    zip: str


class Person(BaseModel):
    name: str
    age: int
    email: str
    addresses: list[Address]
    tags: list[str]


def median_ms(fn: object, runs: int = 50) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    model = ScriptedModel()
    for output in (int, Person):
        spec = output_spec(output)
        compile_output(model, spec)  # compiled once, as a Generator does when it is made
        again = median_ms(lambda o=output: compile_output(model, output_spec(o)))
        kept = median_ms(lambda s=spec: compile_output(model, s))
        print(f"{output.__name__:8} generate: lower + cache hit {again:7.3f} ms   Generator: cache hit {kept:7.3f} ms")


if __name__ == "__main__":
    main()
