"""The cold store over ``pyarrow.fs``: S3-compatible object storage (``S3FileSystem``) and a filesystem path
(``LocalFileSystem``), one implementation for both.

URIs::

    s3://BUCKET[/PREFIX][?endpoint=HOST:PORT][&scheme=http|https][&region=R]
    file:///abs/path

* ``endpoint`` points at a non-AWS server (Ceph's radosgw, MinIO); ``scheme`` defaults to ``https``, ``region``
  to ``us-east-1``. Path-style addressing is used (what radosgw and MinIO serve without DNS setup).
* Credentials never go in the URI: the configuration keys ``coldStoreAccessKey`` / ``coldStoreSecretKey``, else the
  standard ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` variables (and the AWS SDK's usual chain).
* ``coldStoreRequestTimeoutSeconds`` bounds connecting and each request; ``coldStoreMaxAttempts`` is the AWS SDK's
  retry budget per request (an outage fails after these, retriable, and offload tries again later).
* The AWS SDK in recent pyarrow computes request checksums and chunked uploads that older S3 servers (Ceph
  Pacific's radosgw: ``HTTP 411 MissingContentLength during UploadPart``) refuse; this module sets
  ``AWS_REQUEST_CHECKSUM_CALCULATION`` and ``AWS_RESPONSE_CHECKSUM_VALIDATION`` to ``when_required`` (unless the
  environment already says otherwise) before it makes an S3 client.
* The bucket must exist: binding checks it (and the credentials, with a probe object) and never creates one.
* ``file://``: objects are files under the path; a write goes to a temporary file that is fsynced and renamed, so
  a reader never sees half an object and an acknowledged one survives a crash.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlparse

from storage.cold.base import ColdStore, ObjectInfo, RangeReader
from storage.common.durable import fsync_path, os_error_detail
from storage.config import Config
from storage.errors import ColdObjectNotFoundError, ColdStoreError, InvalidArgumentError

__all__ = ["ArrowColdStore", "ColdLocation", "canonical_cold_uri", "open_cold_store"]

_FORMS = "s3://BUCKET/PREFIX?endpoint=HOST:PORT&scheme=http|https&region=R or file:///abs/path"
_CHECKSUM_ENV = ("AWS_REQUEST_CHECKSUM_CALCULATION", "AWS_RESPONSE_CHECKSUM_VALIDATION")
_env_lock = threading.Lock()

# AWS SDK error names / curl failures that mean "not now" (retriable) vs "never with this setup".
_RETRIABLE = re.compile(
    r"NETWORK_CONNECTION|curlCode|Couldn't connect|Connection refused|timed out|Timeout|SERVICE_UNAVAILABLE|"
    r"SLOW_DOWN|INTERNAL_FAILURE|THROTTLING|REQUEST_TIMEOUT|HTTP response code 5\d\d|"
    r"response code: 5\d\d|Unable to connect|connection reset|Broken pipe",
    re.IGNORECASE,
)
_REFUSED = re.compile(
    r"ACCESS_DENIED|InvalidAccessKeyId|SignatureDoesNotMatch|Forbidden|response code: 403|"
    r"HTTP response code 403|INVALID_ACCESS_KEY_ID|SIGNATURE_DOES_NOT_MATCH|NoSuchBucket|NO_SUCH_BUCKET|"
    r"AuthorizationHeaderMalformed|UNRECOGNIZED_CLIENT",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ColdLocation:
    """A parsed cold store URI."""

    scheme: str  # "s3" or "file"
    root: str  # "bucket/prefix" (no trailing slash) or "/abs/path"
    bucket: str = ""
    endpoint: str | None = None
    http_scheme: str = "https"
    region: str = "us-east-1"

    @staticmethod
    def parse(uri: str) -> ColdLocation:
        """Parse ``uri`` (see the module docstring).

        Raises:
            InvalidArgumentError: a malformed or unsupported URI, naming what is wrong.
        """
        if not isinstance(uri, str) or not uri:
            raise InvalidArgumentError(f"cold store URI must be {_FORMS}, got {uri!r}")
        parsed = urlparse(uri)
        if parsed.scheme == "file":
            path = unquote(parsed.path)
            if parsed.netloc not in ("", "localhost") or not path.startswith("/") or parsed.query:
                raise InvalidArgumentError(f"cold store URI must be file:///abs/path, got {uri!r}")
            return ColdLocation("file", os.path.normpath(path))
        if parsed.scheme != "s3":
            raise InvalidArgumentError(f"cold store URI must be {_FORMS}, got {uri!r}")
        bucket = parsed.netloc
        if not bucket or "@" in bucket:
            raise InvalidArgumentError(
                f"cold store URI {uri!r} must name a bucket (and no credentials): s3://BUCKET/PREFIX?endpoint=..."
            )
        prefix = unquote(parsed.path).strip("/")
        query = parse_qs(parsed.query, keep_blank_values=True, strict_parsing=False)
        unknown = set(query) - {"endpoint", "scheme", "region"}
        if unknown:
            raise InvalidArgumentError(
                f"cold store URI {uri!r}: unknown parameter(s) {', '.join(sorted(unknown))} "
                "(known: endpoint, scheme, region; credentials come from coldStoreAccessKey/coldStoreSecretKey "
                "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
            )

        def one(name: str, default: str | None) -> str | None:
            values = query.get(name)
            if not values:
                return default
            if len(values) > 1 or not values[0]:
                raise InvalidArgumentError(f"cold store URI {uri!r}: {name}= must appear once, with a value")
            return values[0]

        http_scheme = one("scheme", "https")
        if http_scheme not in ("http", "https"):
            raise InvalidArgumentError(f"cold store URI {uri!r}: scheme must be http or https, got {http_scheme!r}")
        endpoint = one("endpoint", None)
        region = one("region", "us-east-1")
        assert http_scheme is not None and region is not None
        root = f"{bucket}/{prefix}" if prefix else bucket
        return ColdLocation("s3", root, bucket, endpoint, http_scheme, region)

    def uri(self) -> str:
        """The canonical URI (parameters in a fixed order; no credentials)."""
        if self.scheme == "file":
            return f"file://{self.root}"
        params = [f"endpoint={self.endpoint}"] if self.endpoint else []
        params += [f"scheme={self.http_scheme}", f"region={self.region}"]
        return f"s3://{self.root}?{'&'.join(params)}"


def canonical_cold_uri(uri: str) -> str:
    """The URI to store in a namespace binding for ``uri``. Raises InvalidArgumentError."""
    return ColdLocation.parse(uri).uri()


def _translate(exc: BaseException, what: str, uri: str) -> ColdStoreError:
    """One ColdStoreError for a pyarrow / OS failure of ``what`` (retriable as the module says)."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = str(exc)
    missing = isinstance(exc, FileNotFoundError) or "NoSuchKey" in text or "NO_SUCH_KEY" in text
    if missing and "NoSuchBucket" not in text and "NO_SUCH_BUCKET" not in text:
        return ColdObjectNotFoundError(f"cold store {uri}: {what}: no such object ({msg})")
    if isinstance(exc, PermissionError) and uri.startswith("file://"):
        return ColdStoreError(
            f"cold store {uri}: {what}: refused ({msg}); check the directory's permissions (the writing user needs "
            "to create, write, rename and delete files in it)",
            retriable=False,
        )
    if isinstance(exc, PermissionError) or _REFUSED.search(text):
        return ColdStoreError(
            f"cold store {uri}: {what}: refused ({msg}); check the bucket and the credentials "
            "(coldStoreAccessKey/coldStoreSecretKey or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)",
            retriable=False,
        )
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) and uri.startswith("file://"):
        where = uri[len("file://") :]
        return ColdStoreError(f"cold store {uri}: {what} failed: {os_error_detail(exc, where)}", retriable=True)
    if _RETRIABLE.search(text):
        return ColdStoreError(f"cold store {uri}: {what}: unreachable or failing ({msg})", retriable=True)
    # Anything else (disk full, an unknown server reply): trying again later may succeed.
    return ColdStoreError(f"cold store {uri}: {what} failed: {msg}", retriable=True)


class _ArrowRanges:
    """:class:`RangeReader` over one open ``pyarrow`` random-access file (``read_at`` is thread-safe)."""

    def __init__(self, store: ArrowColdStore, key: str, handle: object, size: int) -> None:
        self._store = store
        self._key = key
        self._handle = handle
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        try:
            return bytes(self._handle.read_at(length, offset))  # type: ignore[attr-defined]
        except (OSError, ValueError) as e:
            raise _translate(e, f"read {self._key!r} [{offset}, +{length})", self._store.uri) from e

    def close(self) -> None:
        try:
            self._handle.close()  # type: ignore[attr-defined]
        except (OSError, ValueError):
            pass


class ArrowColdStore(ColdStore):
    """A cold store at a :class:`ColdLocation`, through ``pyarrow.fs``.

    Raises (constructor):
        ColdStoreError: pyarrow cannot make the filesystem (not retriable).
    """

    def __init__(
        self,
        location: ColdLocation,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        timeout_s: float = 30.0,
        max_attempts: int = 3,
    ) -> None:
        import pyarrow.fs as pafs

        self.location = location
        self.uri = location.uri()
        self._local = location.scheme == "file"
        try:
            if self._local:
                self._fs: pafs.FileSystem = pafs.LocalFileSystem()
            else:
                _set_checksum_env()
                self._fs = pafs.S3FileSystem(
                    access_key=access_key,
                    secret_key=secret_key,
                    region=location.region,
                    endpoint_override=location.endpoint,
                    scheme=location.http_scheme,
                    connect_timeout=timeout_s,
                    request_timeout=timeout_s,
                    retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=max_attempts),
                    force_virtual_addressing=False,
                    background_writes=False,  # an upload's errors surface in close(), before we call it done
                    allow_bucket_creation=False,
                    allow_bucket_deletion=False,
                )
        except (OSError, ValueError, TypeError) as e:
            raise ColdStoreError(f"cannot open cold store {self.uri}: {e}", retriable=False) from e

    def _path(self, key: str) -> str:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise InvalidArgumentError(f"bad cold object key {key!r}")
        return f"{self.location.root}/{key}"

    # --- objects ---------------------------------------------------------------------------
    def put(self, key: str, chunks: Iterable[bytes | memoryview]) -> int:
        path = self._path(key)
        target = path
        if self._local:
            target = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
        size = 0
        try:
            if self._local:
                self._fs.create_dir(os.path.dirname(path), recursive=True)
            with self._fs.open_output_stream(target) as out:
                for chunk in chunks:
                    out.write(chunk)
                    size += len(chunk)
            if self._local:
                fsync_path(target)
                self._fs.move(target, path)
                fsync_path(os.path.dirname(path))
        except (OSError, ValueError) as e:
            if self._local:
                try:
                    os.unlink(target)
                except OSError:
                    pass
            raise _translate(e, f"write {key!r}", self.uri) from e
        return size

    def read_range(self, key: str, offset: int, length: int) -> bytes:
        ranges = self.open_ranges(key)
        try:
            return ranges.read(offset, length)
        finally:
            ranges.close()

    def open_ranges(self, key: str) -> RangeReader:
        path = self._path(key)
        try:
            handle = self._fs.open_input_file(path)
            size = int(handle.size())
        except (OSError, ValueError) as e:
            raise _translate(e, f"open {key!r}", self.uri) from e
        return _ArrowRanges(self, key, handle, size)

    def stat(self, key: str) -> ObjectInfo:
        import pyarrow.fs as pafs

        try:
            info = self._fs.get_file_info(self._path(key))
        except (OSError, ValueError) as e:
            raise _translate(e, f"stat {key!r}", self.uri) from e
        if info.type != pafs.FileType.File:
            raise ColdObjectNotFoundError(f"cold store {self.uri}: no object {key!r}")
        return ObjectInfo(key, int(info.size or 0))

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        import pyarrow.fs as pafs

        base = self.location.root
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        sel = pafs.FileSelector(f"{base}/{folder}" if folder else base, recursive=True, allow_not_found=True)
        try:
            infos = self._fs.get_file_info(sel)
        except (OSError, ValueError) as e:
            raise _translate(e, f"list {prefix!r}", self.uri) from e
        out = []
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            key = info.path[len(base) + 1 :] if info.path.startswith(base + "/") else info.path
            if key.startswith(prefix) and ".tmp-" not in key.rsplit("/", 1)[-1]:
                out.append(ObjectInfo(key, int(info.size or 0)))
        return sorted(out, key=lambda o: o.key)

    def delete(self, key: str) -> None:
        try:
            self._fs.delete_file(self._path(key))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            err = _translate(e, f"delete {key!r}", self.uri)
            if isinstance(err, ColdObjectNotFoundError):
                return
            raise err from e

    def check(self) -> None:
        import pyarrow.fs as pafs

        where = self.location.bucket if not self._local else self.location.root
        try:
            info = self._fs.get_file_info(where)
        except (OSError, ValueError) as e:
            raise _translate(e, f"look up {'bucket' if not self._local else 'directory'} {where!r}", self.uri) from e
        if info.type != pafs.FileType.Directory:
            if not self._local:
                problem = "does not exist (create it first; binding never creates a bucket)"
            elif info.type == pafs.FileType.NotFound:
                problem = "does not exist"
            else:
                problem = "is a file, not a directory: give the path of a directory"
            raise ColdStoreError(
                f"cold store {self.uri}: {'bucket' if not self._local else 'directory'} {where!r} {problem}",
                retriable=False,
            )
        probe = f".dl-probe-{uuid.uuid4().hex[:12]}"
        self.put_verified(probe, [b"distributedlog cold store probe\n"])
        self.delete(probe)


def _set_checksum_env() -> None:
    """Make the AWS SDK send plain, content-length uploads (see the module docstring)."""
    with _env_lock:
        for name in _CHECKSUM_ENV:
            os.environ.setdefault(name, "when_required")


def open_cold_store(uri: str, conf: Config | None = None) -> ArrowColdStore:
    """The cold store at ``uri`` with the credentials and timeouts of ``conf`` (nothing is contacted yet: see
    :meth:`ColdStore.check`).

    Raises:
        InvalidArgumentError: a bad URI. ColdStoreError: pyarrow cannot make the filesystem.
    """
    cfg = conf if conf is not None else Config()
    location = ColdLocation.parse(uri)
    access = cfg.get("coldStoreAccessKey")
    secret = cfg.get("coldStoreSecretKey")
    if (access is None) != (secret is None):
        raise InvalidArgumentError("coldStoreAccessKey and coldStoreSecretKey must be set together (or neither)")
    return ArrowColdStore(
        location,
        access_key=None if access is None else str(access),
        secret_key=None if secret is None else str(secret),
        timeout_s=float(cfg.get("coldStoreRequestTimeoutSeconds")),
        max_attempts=int(cfg.get("coldStoreMaxAttempts")),
    )
