"""``/metrics`` of ``neardup serve`` in Prometheus' text format (``prometheus-client``).

Requests by endpoint and status, their latency histogram by endpoint, errors by endpoint and
kind, and the index's entries and generation (read when scraped). With several worker
processes, ``run_server`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory so that each
scrape, whichever worker answers it, sums every worker's counts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from neardup._optional import require

__all__ = ["Metrics", "MULTIPROC_ENV"]

#: Set by ``run_server`` for several workers: where they share their counts.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0)  # fmt: skip

#: The error kind of each status an answer may have.
_KINDS = {
    400: "bad_request",
    401: "unauthorized",
    404: "unknown_id",
    413: "too_large",
    422: "invalid",
    500: "internal",
    503: "unavailable",
}


class Metrics:
    """The service's Prometheus metrics; ``index_state()`` gives ``(entries, generation)``."""

    def __init__(self, index_state: Callable[[], tuple[int, int]]) -> None:
        pc = require("prometheus_client", "server", "neardup serve's /metrics")
        self._pc = pc
        self.registry = pc.CollectorRegistry(auto_describe=True)
        self.requests = pc.Counter(
            "neardup_requests",
            "HTTP requests answered, by endpoint and status.",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = pc.Histogram(
            "neardup_request_seconds",
            "Time to answer a request (seconds), by endpoint.",
            ["endpoint"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.errors = pc.Counter(
            "neardup_errors",
            "Requests answered with an error, by endpoint and kind.",
            ["endpoint", "kind"],
            registry=self.registry,
        )
        self._index = _IndexCollector(index_state)

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered request (status 0: the client went away before an answer)."""
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)
        if status >= 400 or status == 0:
            kind = _KINDS.get(status, "gone" if status == 0 else f"http_{status}")
            self.errors.labels(endpoint, kind).inc()

    def render(self) -> tuple[bytes, str]:
        """(the text exposition, its content type), every worker's counts included."""
        pc = self._pc
        if os.environ.get(MULTIPROC_ENV):
            from prometheus_client import multiprocess

            registry = pc.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        else:
            registry = pc.CollectorRegistry()
            registry.register(_Forward(self.registry))
        registry.register(self._index)
        return pc.generate_latest(registry), pc.CONTENT_TYPE_LATEST


class _Forward:
    """A collector giving another registry's metrics (this process's counts)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        yield from self.registry.collect()


class _IndexCollector:
    """Gauges of the index, read at each scrape."""

    def __init__(self, state: Callable[[], tuple[int, int]]) -> None:
        self.state = state

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            entries, generation = self.state()
        except Exception:  # storage down: /health says so; the counts are still served
            return
        yield GaugeMetricFamily("neardup_index_entries", "Entries in the index.", value=entries)
        yield GaugeMetricFamily(
            "neardup_index_generation", "Writes committed to the index.", value=generation
        )
