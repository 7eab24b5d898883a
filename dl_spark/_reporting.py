"""How an error of the data source reaches the user: one line that says what is wrong and what to do.

PySpark (4.3) reports an exception raised by a Python data source as the text the Python worker formats,
by default the whole Python traceback, and Spark puts that text after its own prefix. Left alone, the first
line a user sees is::

    [PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):

and what is wrong comes 7 to 19 lines later. Every :class:`storage.errors.DLError` is an error meant for the
user (its message names the problem and what to do), so when one leaves the data source inside a Spark
Python worker, that worker reports it without the traceback, as ``<module>.<Class>: <message>``; the first
line becomes::

    [PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: dl_spark.errors.SourceOptionError: ...

The means is PySpark's own switch, the ``SPARK_HIDE_TRACEBACK`` environment variable its workers read when
they report an exception (the session setting ``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` sets
it for every error). It is set in that worker process only, and only as the error leaves: every PySpark
worker process that reports an exception exits right after (``sys.exit(-1)``; a forked worker is not reused),
so nothing else is reported without its traceback. Any other exception (a bug) keeps its traceback. Outside
a Spark worker (this package called directly) nothing is changed.

Checked against PySpark 4.3.0: ``pyspark.util.handle_worker_exception`` (the one formatter of the planner
workers, the streaming source and sink runners and the executors' workers) and the JVM's
``QueryCompilationErrors.pythonDataSourceError``, which takes that text as it is; PySpark has no data-source
hook for an error class of its own (``PySparkException`` raised here is formatted the same way).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from storage.errors import DLError

__all__ = ["in_spark_worker", "reported", "reported_iter"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: What PySpark's workers read when they report an exception: set, they report ``Class: message`` only.
HIDE_TRACEBACK = "SPARK_HIDE_TRACEBACK"
#: Set by Spark's PythonWorkerFactory in every Python worker it starts (and inherited by forked ones).
_WORKER_MARK = "PYTHON_WORKER_FACTORY_SECRET"


def in_spark_worker() -> bool:
    """Whether this process is a Python worker started by Spark (not a user's driver process)."""
    return _WORKER_MARK in os.environ


def _without_traceback() -> None:
    if in_spark_worker():
        os.environ[HIDE_TRACEBACK] = "1"


def reported(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a method Spark calls: a :class:`DLError` it raises is reported as one line (see the module).
    The exception itself is re-raised unchanged."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DLError:
            _without_traceback()
            raise

    return wrapper


def reported_iter(items: Iterator[T]) -> Iterator[T]:
    """``items``, with a :class:`DLError` raised while iterating reported as one line (for ``read``)."""
    try:
        yield from items
    except DLError:
        _without_traceback()
        raise
