"""Dynamic configuration: per-log overrides read from properties files and re-read when they change,
applied to running writers without reopening them (DistributedLog's ``DynamicDistributedLogConfiguration``
with a file ``ConfigurationSubscription``, and its ``ServiceStreamConfigProvider`` layout).

Files, both optional, later ones winning: ``defaultStreamConfigFile`` (every log), then
``<streamConfigDir>/<log name>.conf`` (one log). They are checked every ``dynamicConfigReloadIntervalSec``
seconds (a changed size or modification time, a file appearing or disappearing) by one thread per
namespace (:class:`DynamicConfigWatcher`).

Only the keys DistributedLog marks dynamic (:data:`DYNAMIC_KEYS`: write limits, retention, flush and
buffer settings) change a running writer; any other key of a per-log file applies when the log is
next opened (a warning says so when it changes). A bad value or unknown key is rejected with an ERROR
log naming the key, the file and the value, and that key keeps its previous value; the rest of the
file applies. :attr:`DynamicConfig.errors` keeps the messages of the last read.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from storage.config import Config
from storage.config._properties import parse_properties
from storage.errors import InvalidConfigError

__all__ = ["DYNAMIC_KEYS", "DynamicConfig", "DynamicConfigWatcher", "stream_config_files"]

log = logging.getLogger(__name__)

#: DistributedLog's dynamic keys (``DynamicDistributedLogConfiguration``) that this project applies
#: to running writers.
DYNAMIC_KEYS = frozenset(
    {
        "logSegmentRetentionHours",
        "writerOutputBufferSize",
        "periodicFlushFrequencyMilliSeconds",
        "rpsSoftWriteLimit",
        "rpsHardWriteLimit",
        "bpsSoftWriteLimit",
        "bpsHardWriteLimit",
    }
)

Listener = Callable[[Config], None]
_Stamp = tuple[int, int] | None


def stream_config_files(conf: Config, log_name: str) -> list[str]:
    """The dynamic configuration files of ``log_name`` under ``conf``, in the order they apply."""
    files = []
    default = conf.get("defaultStreamConfigFile")
    if default:
        files.append(str(default))
    directory = conf.get("streamConfigDir")
    if directory:
        files.append(os.path.join(str(directory), f"{log_name}.conf"))
    return files


def _stamp(path: str) -> _Stamp:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


class DynamicConfig:
    """A log's configuration: ``base`` plus the overrides of ``files``, kept current by
    :meth:`reload`. :attr:`current` is the effective :class:`Config`; listeners learn every change."""

    def __init__(self, base: Config, files: Sequence[str], name: str = "") -> None:
        self.base = base
        self.files = list(files)
        self.name = name
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}  # accepted overrides from the files (current key names)
        self._stamps: list[_Stamp] = [None] * len(self.files)
        self._listeners: list[Listener] = []
        self._current = base
        #: Messages of the rejected keys and unreadable files of the last read.
        self.errors: list[str] = []
        self.reload(force=True)

    @property
    def current(self) -> Config:
        return self._current

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(config)`` after every change; returns the function that unsubscribes."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def reload(self, *, force: bool = False) -> bool:
        """Re-read the files if any changed (or ``force``); True if the effective values changed."""
        stamps = [_stamp(f) for f in self.files]
        if not force and stamps == self._stamps:
            return False
        raw: dict[str, tuple[str, str]] = {}  # key as written -> (value, file)
        errors: list[str] = []
        for path, stamp in zip(self.files, stamps, strict=True):
            if stamp is None:
                continue
            try:
                with open(path, "rb") as fh:
                    text = fh.read().decode("utf-8", errors="replace")
                for key, value in parse_properties(text, source=path):
                    raw[key] = (value, path)
            except (OSError, InvalidConfigError) as e:
                errors.append(f"cannot read dynamic configuration {path}: {e}; keeping the current values")
        if errors:  # an unreadable or malformed file changes nothing
            for message in errors:
                log.error("%s: %s", self.name, message)
            with self._lock:
                self.errors = errors
            return False
        values, first = self._accept(raw, errors)
        for message in errors:  # every read of a changed file reports its rejected keys
            log.error("%s", message)
        with self._lock:
            self._stamps = stamps
            self.errors = errors
            if values == self._values:
                return False
            before, self._values = self._values, values
            self._current = self.base.with_overrides(values)
            listeners = list(self._listeners)
            current = self._current
        if not first:
            static = sorted(
                k for k in set(before) | set(values) if k not in DYNAMIC_KEYS and before.get(k) != values.get(k)
            )
            if static:
                log.warning("%s: %s changed; not dynamic, applies when the log is next opened", self.name, static)
        for listener in listeners:
            try:
                listener(current)
            except Exception:  # one broken listener must not stop the others
                log.exception("applying dynamic configuration of %s failed", self.name)
        return True

    def _accept(self, raw: Mapping[str, tuple[str, str]], errors: list[str]) -> tuple[dict[str, Any], bool]:
        """The values of ``raw`` that pass their key's checks; a rejected key keeps its old value."""
        first = not self._stamps or all(s is None for s in self._stamps)
        values: dict[str, Any] = {}
        for key, (text, path) in raw.items():
            try:
                spec = Config.spec(key)
                values[spec.name] = spec.coerce(text, source=path)
            except InvalidConfigError as e:
                canon = key
                try:
                    canon = Config.canonical_key(key)
                except InvalidConfigError:
                    pass
                old = self._values.get(canon)
                keep = f"keeping {old!r}" if canon in self._values else "keeping the default"
                errors.append(f"{self.name}: dynamic configuration {path}: key {key}={text!r} rejected ({e}); {keep}")
                if canon in self._values:
                    values[canon] = self._values[canon]
        return values, first


class DynamicConfigWatcher:
    """One thread that re-reads the files of every registered :class:`DynamicConfig` every
    ``interval_s`` seconds."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._configs: list[DynamicConfig] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, cfg: DynamicConfig) -> None:
        """Watch ``cfg``'s files (from now on; the thread starts with the first one, unless the
        interval is <= 0: then the files are read once, at open)."""
        with self._lock:
            self._configs.append(cfg)
            if self._thread is None and self.interval_s > 0 and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="dl-dynamic-config", daemon=True)
                self._thread.start()

    def remove(self, cfg: DynamicConfig) -> None:
        with self._lock:
            self._configs = [c for c in self._configs if c is not cfg]

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                configs = list(self._configs)
            for cfg in configs:
                try:
                    cfg.reload()
                except Exception:
                    log.exception("re-reading dynamic configuration of %s failed", cfg.name)

    def close(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
