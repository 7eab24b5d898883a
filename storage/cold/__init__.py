"""Cold storage: completed log segments copied to S3-compatible object storage or a filesystem path.

* :mod:`storage.cold.base`: the :class:`ColdStore` interface (put with read-back verification, range reads,
  stat, list, delete, bind-time check) and its errors;
* :mod:`storage.cold.arrowfs`: the one implementation, over ``pyarrow.fs`` (``s3://`` and ``file://``);
* :mod:`storage.cold.segment_object`: the layout of an offloaded segment's object and its range reader.

Offload, tiered reads, retention by tier and restore build on these in :mod:`storage.log` (``offload``,
``tiered``, ``retention``, ``restore``).
"""

from storage.cold.arrowfs import ArrowColdStore, ColdLocation, canonical_cold_uri, open_cold_store
from storage.cold.base import ColdStore, ObjectInfo, PutResult

__all__ = [
    "ArrowColdStore",
    "ColdLocation",
    "ColdStore",
    "ObjectInfo",
    "PutResult",
    "canonical_cold_uri",
    "open_cold_store",
]
