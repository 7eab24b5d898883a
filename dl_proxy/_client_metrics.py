"""The client's metrics, in Prometheus' format: one registry per :class:`dl_proxy.ProxyClient` (several clients in
one process do not mix), read with ``client.metrics_text()`` (the text exposition format) or exported with
``prometheus_client`` through ``client.metrics.registry``.

=========================================  ==========================================================================
``dl_proxy_client_records_sent_total``     records sent in requests (a resend counts again)
``dl_proxy_client_requests_sent_total``    requests sent (first sends and resends)
``dl_proxy_client_requests_retried_total`` requests sent again (after a lost answer, a redirect, a failover, ...)
``dl_proxy_client_calls_total``            RPCs made, by ``method`` (``writeMulti`` carries several streams' requests)
``dl_proxy_client_records_acked_total``    records acknowledged (durable)
``dl_proxy_client_records_failed_total``   records whose futures failed, by ``outcome`` (``definitive`` / ``unknown``)
``dl_proxy_client_requests_in_flight``     requests sent and not yet answered
``dl_proxy_client_pending_bytes``          payload bytes buffered or unanswered
``dl_proxy_client_ack_latency_seconds``    per answered request: from its first record's ``write`` to the answer
=========================================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["ClientMetrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ClientMetrics:
    """The metrics of one client; ``in_flight`` and ``pending_bytes`` are read from the client when collected."""

    def __init__(self, in_flight: Callable[[], float], pending_bytes: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.records_sent = Counter("dl_proxy_client_records_sent", "Records sent in requests", registry=r)
        self.requests_sent = Counter("dl_proxy_client_requests_sent", "Requests sent", registry=r)
        self.requests_retried = Counter("dl_proxy_client_requests_retried", "Requests sent again", registry=r)
        self.calls = Counter("dl_proxy_client_calls", "RPCs made, by method", ["method"], registry=r)
        self.records_acked = Counter("dl_proxy_client_records_acked", "Records acknowledged", registry=r)
        self.records_failed = Counter(
            "dl_proxy_client_records_failed", "Records failed, by outcome", ["outcome"], registry=r
        )
        self.ack_latency = Histogram(
            "dl_proxy_client_ack_latency_seconds",
            "Per answered request: from its first record's write to the acknowledgement",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        g = Gauge("dl_proxy_client_requests_in_flight", "Requests sent, not yet answered", registry=r)
        g.set_function(in_flight)
        p = Gauge("dl_proxy_client_pending_bytes", "Payload bytes buffered or unanswered", registry=r)
        p.set_function(pending_bytes)

    def text(self) -> str:
        """The metrics in Prometheus' text exposition format."""
        return generate_latest(self.registry).decode()
