"""DistributedLog's per-stream write rate limits: ``rpsSoftWriteLimit``, ``rpsHardWriteLimit``,
``bpsSoftWriteLimit``, ``bpsHardWriteLimit`` (records and payload bytes per second; ``<= 0`` = off).

As in DistributedLog's write proxy (``StreamRequestLimiter``: ``RpsSoftLimiter``, ``RpsHardLimiter``,
``BpsSoftLimiter``, ``BpsHardLimiter`` over rate limiters): a write over a *soft* limit is accepted and
counted (and logged, at most once per 10 s); a write over a *hard* limit is refused before anything
of it is buffered with ``OverCapacityError`` (status 517, retriable) — ``"RPS limit exceeded for
stream X"`` / ``"BPS limit exceeded for stream X"``. A refused write never happened: nothing of it was
acknowledged or queued, the writer stays usable, and writes pass again once the rate drops.

Each limit is a :class:`RateLimiter` with Guava's ``SmoothBursty`` semantics (DistributedLog's
``RateLimiter``): up to one second of unused permits is stored, and a request is granted whenever
no earlier request is still being paid for — so a single request larger than a second's worth
passes, and the ones after it wait until it is paid off. Limits can change on a running writer
(:meth:`WriteLimiter.reconfigure`, dynamic configuration).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from storage.errors import OverCapacityError

__all__ = ["LIMIT_KEYS", "RateLimiter", "WriteLimiter", "WriteLimits"]

log = logging.getLogger(__name__)

#: The configuration keys of the write rate limits, DistributedLog's names.
LIMIT_KEYS = ("rpsSoftWriteLimit", "rpsHardWriteLimit", "bpsSoftWriteLimit", "bpsHardWriteLimit")
_WARN_EVERY_S = 10.0


class RateLimiter:
    """``rate`` permits per second, storing up to one second of unused permits (``SmoothBursty``)."""

    __slots__ = ("_clock", "_max_stored", "_next_free", "_rate", "_stored")

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._rate = 0.0
        self._stored = 0.0
        self._max_stored = 0.0
        self._next_free = clock()
        self.set_rate(rate)

    @property
    def rate(self) -> float:
        return self._rate

    def set_rate(self, rate: float) -> None:
        """Change the rate (> 0); stored permits keep their share of the new burst size."""
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self._resync(self._clock())
        old = self._max_stored
        self._rate = float(rate)
        self._max_stored = self._rate  # one second's worth
        self._stored = self._max_stored if old == 0 else self._stored * self._max_stored / old

    def _resync(self, now: float) -> None:
        if now > self._next_free:
            if self._rate > 0:
                self._stored = min(self._max_stored, self._stored + (now - self._next_free) * self._rate)
            self._next_free = now

    def ready(self) -> bool:
        """True if :meth:`try_acquire` would grant a request now."""
        return self._clock() >= self._next_free

    def try_acquire(self, permits: float) -> bool:
        """Take ``permits`` if no earlier request is still being paid for; False otherwise."""
        now = self._clock()
        if now < self._next_free:
            return False
        self._resync(now)
        from_stored = min(permits, self._stored)
        self._stored -= from_stored
        self._next_free += (permits - from_stored) / self._rate
        return True


@dataclass(frozen=True)
class WriteLimits:
    """The four limits (``<= 0`` = off)."""

    rps_soft: float = -1
    rps_hard: float = -1
    bps_soft: float = -1
    bps_hard: float = -1

    @classmethod
    def from_conf(cls, get: Callable[[str], object]) -> WriteLimits:
        """From a configuration's ``get`` (DistributedLog's key names)."""
        return cls(*(float(get(k)) for k in LIMIT_KEYS))  # type: ignore[arg-type]

    @property
    def active(self) -> bool:
        return any(v > 0 for v in (self.rps_soft, self.rps_hard, self.bps_soft, self.bps_hard))

    def as_dict(self) -> Mapping[str, float]:
        return dict(zip(LIMIT_KEYS, (self.rps_soft, self.rps_hard, self.bps_soft, self.bps_hard), strict=True))


class WriteLimiter:
    """The write limits of one stream's writer. Thread-safe."""

    def __init__(self, stream: str, limits: WriteLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self._clock = clock
        self._lock = threading.Lock()
        self._limits = WriteLimits()
        self._rps_soft: RateLimiter | None = None
        self._rps_hard: RateLimiter | None = None
        self._bps_soft: RateLimiter | None = None
        self._bps_hard: RateLimiter | None = None
        #: Writes (calls) over each limit so far: ``rps_soft``, ``rps_hard``, ``bps_soft``, ``bps_hard``.
        self.hits = {"rps_soft": 0, "rps_hard": 0, "bps_soft": 0, "bps_hard": 0}
        self._last_warning = -_WARN_EVERY_S
        self.reconfigure(limits)

    @property
    def limits(self) -> WriteLimits:
        return self._limits

    def reconfigure(self, limits: WriteLimits) -> None:
        """Apply new limits to the running writer (a changed rate keeps the limiter's state)."""
        with self._lock:

            def make(old: RateLimiter | None, rate: float) -> RateLimiter | None:
                if rate <= 0:
                    return None
                if old is None:
                    return RateLimiter(rate, self._clock)
                if old.rate != rate:
                    old.set_rate(rate)
                return old

            self._rps_soft = make(self._rps_soft, limits.rps_soft)
            self._rps_hard = make(self._rps_hard, limits.rps_hard)
            self._bps_soft = make(self._bps_soft, limits.bps_soft)
            self._bps_hard = make(self._bps_hard, limits.bps_hard)
            self._limits = limits

    def acquire(self, records: int, nbytes: int) -> None:
        """Admit a write of ``records`` records and ``nbytes`` payload bytes.

        Raises:
            OverCapacityError: over ``rpsHardWriteLimit`` or ``bpsHardWriteLimit`` (nothing admitted).
        """
        with self._lock:
            # the hard limits first, without taking anything: a refused write costs nothing anywhere
            if self._rps_hard is not None and not self._rps_hard.ready():
                self.hits["rps_hard"] += 1
                raise OverCapacityError(f"RPS limit exceeded for stream {self.stream}")
            if self._bps_hard is not None and not self._bps_hard.ready():
                self.hits["bps_hard"] += 1
                raise OverCapacityError(f"BPS limit exceeded for stream {self.stream}")
            if self._rps_hard is not None:
                self._rps_hard.try_acquire(records)
            if self._bps_hard is not None:
                self._bps_hard.try_acquire(nbytes)
            soft = []
            if self._rps_soft is not None and not self._rps_soft.try_acquire(records):
                self.hits["rps_soft"] += 1
                soft.append("rpsSoftWriteLimit")
            if self._bps_soft is not None and not self._bps_soft.try_acquire(nbytes):
                self.hits["bps_soft"] += 1
                soft.append("bpsSoftWriteLimit")
            if soft:
                now = self._clock()
                if now - self._last_warning >= _WARN_EVERY_S:
                    self._last_warning = now
                    log.warning("stream %r is writing over its %s (counted, not refused)", self.stream, soft)
