"""Counters of one server and their Prometheus text form (``GET /metrics``)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class Metrics:
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)  # (endpoint, outcome)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    queue_depth: int = 0
    in_flight: int = 0
    rejected_queue_full: int = 0
    ttft_sum: float = 0.0
    ttft_count: int = 0
    seconds_sum: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(self, endpoint: str, outcome: str, prompt: int, completion: int,
                 ttft: float | None, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, outcome)] += 1
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.seconds_sum += seconds
            if ttft is not None:
                self.ttft_sum += ttft
                self.ttft_count += 1

    def render(self, *, cache_hits: int, cache_misses: int, cache_size: int,
               backend: dict[str, float]) -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, samples: list[tuple[dict[str, str], float]]) -> None:
            lines.append(f"# HELP tether_{name} {help_}")
            lines.append(f"# TYPE tether_{name} {kind}")
            for labels, value in samples:
                lab = ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items())
                lines.append(f"tether_{name}{{{lab}}} {value:g}" if lab else f"tether_{name} {value:g}")

        with self._lock:
            metric("requests_total", "counter", "Requests handled, by endpoint and outcome.",
                   [({"endpoint": e, "outcome": o}, v) for (e, o), v in sorted(self.requests.items())])
            metric("prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
                   [({}, self.prompt_tokens)])
            metric("completion_tokens_total", "counter", "Generated tokens of finished requests.",
                   [({}, self.completion_tokens)])
            metric("queue_depth", "gauge", "Requests waiting for a slot.", [({}, self.queue_depth)])
            metric("requests_in_flight", "gauge", "Requests holding a slot.", [({}, self.in_flight)])
            metric("rejected_queue_full_total", "counter", "Requests refused with 503 (queue full).",
                   [({}, self.rejected_queue_full)])
            metric("time_to_first_token_seconds_sum", "counter", "Sum of times to first token.",
                   [({}, self.ttft_sum)])
            metric("time_to_first_token_seconds_count", "counter", "Requests with a first token.",
                   [({}, self.ttft_count)])
            metric("request_seconds_sum", "counter", "Sum of request times.", [({}, self.seconds_sum)])
        metric("compile_cache_hits_total", "counter", "Constraints found compiled.", [({}, cache_hits)])
        metric("compile_cache_misses_total", "counter", "Constraints compiled.", [({}, cache_misses)])
        metric("compile_cache_entries", "gauge", "Compiled constraints held.", [({}, cache_size)])
        for k, v in sorted(backend.items()):
            metric(f"model_{k}", "gauge" if k.startswith(("open", "batch_max")) else "counter",
                   f"Model backend: {k.replace('_', ' ')}.", [({}, v)])
        return "\n".join(lines) + "\n"
