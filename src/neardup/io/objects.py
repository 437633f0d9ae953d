"""Files on object storage (any fsspec URL: ``s3://``, ``gs://``, ``memory://``...) that a
staged dedup writes: its work directory and its outputs of parts.

Each object is written whole, by one request (a put, or a server-side copy): a reader sees it
whole or not at all, so nothing is renamed. The filesystem is fsspec's for the URL, without its
listing cache (a cluster's workers write the same prefixes: a listing cached here would miss
their files). An S3-compatible store is reached as fsspec and boto reach it, through the
environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``...) or fsspec's
configuration; nothing of them is printed: the errors name the URL. A network failure is one
line naming the URL (:func:`neardup.io.remote.remote_errors`); a missing object stays a
``FileNotFoundError``, which the work directory's readers name as damaged.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

from neardup.errors import InputError
from neardup.io.files import is_url, url_filesystem
from neardup.io.remote import remote_errors

__all__ = [
    "cat",
    "copy",
    "exists",
    "get_file",
    "is_object_url",
    "object_fs",
    "put_bytes",
    "put_files",
    "remove",
    "sizes",
    "storage_errors",
    "writable_root",
]

#: Schemes fsspec reads but cannot write: never a work directory or an output.
READ_ONLY = frozenset({"http", "https", "hf", "github", "zip", "tar"})


def object_fs(url: str) -> tuple[Any, str]:
    """``(filesystem, path)`` of ``url``: fsspec's filesystem for its scheme, without a
    listing cache."""
    return url_filesystem(url, use_listings_cache=False)


@contextlib.contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """A network failure in the block as one line naming ``url`` (the credentials and the
    endpoint never in it); refused access too (``PermissionError``)."""
    with remote_errors(url):
        try:
            yield
        except PermissionError as e:
            raise InputError(url, None, f"access refused by the store ({_first_line(e)})") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def writable_root(url: str, what: str) -> None:
    """Refuse, in one line, ``url`` as a place ``what`` writes: a scheme fsspec only reads
    (``https://``), fsspec or its backend missing (named), or an S3-like bucket that does not
    exist."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in READ_ONLY:
        raise InputError(url, None, f"{what} must be writable: {scheme}:// is read-only")
    fs, path = object_fs(url)
    bucket = path.strip("/").split("/", 1)[0]
    if scheme in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss") and bucket:
        with storage_errors(url):
            there = fs.exists(bucket)
        if not there:
            raise InputError(url, None, f"bucket {bucket} does not exist; create it first")


def sizes(url: str) -> dict[str, int]:
    """``{name: bytes}`` of every object under the prefix ``url`` (names relative to it, by
    ``/``), in one listing; ``{}`` where there are none."""
    fs, root = object_fs(url)
    root = root.rstrip("/")
    with storage_errors(url):
        try:
            found = fs.find(root, detail=True)
        except FileNotFoundError:
            return {}
    out = {}
    for path, info in found.items():
        if info.get("type", "file") == "file" and path.startswith(root + "/"):
            out[path[len(root) + 1 :]] = int(info["size"])
    return out


def exists(url: str) -> bool:
    """Whether the object ``url`` is there."""
    fs, path = object_fs(url)
    with storage_errors(url):
        return bool(fs.exists(path))


def cat(url: str) -> bytes:
    """The bytes of the object ``url`` (``FileNotFoundError`` where there is none)."""
    fs, path = object_fs(url)
    with storage_errors(url):
        return fs.cat_file(path)


def get_file(url: str, local: str) -> None:
    """The object ``url`` downloaded to the local file ``local``."""
    fs, path = object_fs(url)
    with storage_errors(url):
        fs.get_file(path, local)


def put_bytes(url: str, data: bytes) -> None:
    """``data`` as the object ``url``, whole (one request)."""
    fs, path = object_fs(url)
    with storage_errors(url):
        fs.pipe_file(path, data)


def put_files(pairs: Iterable[tuple[str, str]], url: str) -> None:
    """Each local file ``src`` of ``pairs`` as the object ``dest`` (URLs of ``url``'s store;
    ``url`` names them in errors), sent together."""
    pairs = list(pairs)
    if not pairs:
        return
    fs, _ = object_fs(url)
    with storage_errors(url):
        fs.put([s for s, _ in pairs], [fs._strip_protocol(d) for _, d in pairs])


def copy(pairs: Iterable[tuple[str, str]], url: str) -> None:
    """Each object ``src`` of ``pairs`` copied to ``dest`` (URLs of one store; ``url`` names
    them in errors), by the store (nothing passes through this process)."""
    pairs = list(pairs)
    if not pairs:
        return
    fs, _ = object_fs(url)
    with storage_errors(url):
        fs.copy([fs._strip_protocol(s) for s, _ in pairs],
                [fs._strip_protocol(d) for _, d in pairs])  # fmt: skip


def remove(urls: Iterable[str], url: str, recursive: bool = False) -> None:
    """The objects ``urls`` removed (with ``recursive``, every object under each prefix);
    those already gone are no error."""
    urls = list(urls)
    if not urls:
        return
    fs, _ = object_fs(url)
    paths = [fs._strip_protocol(u) for u in urls]
    with storage_errors(url), contextlib.suppress(FileNotFoundError):
        fs.rm(paths, recursive=recursive)


def is_object_url(path: str | os.PathLike | None) -> bool:
    """Whether ``path`` is a URL of a store that is not this machine's files (``file://``
    is a local path)."""
    from neardup.io.files import local_path

    return path is not None and is_url(path) and local_path(path) is None
