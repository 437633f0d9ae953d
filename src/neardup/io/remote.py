"""Remote reads that neither hang nor crash: a timeout, retries with backoff, one-line errors.

fsspec's http filesystem waits forever for a server that stalls, and lets a dropped connection
or a redirect loop out as an aiohttp traceback. Here every remote filesystem of http(s) and s3
gets a connect and read timeout (:data:`neardup.config.REMOTE_TIMEOUT_S`,
``--remote-timeout``), a read that fails for a transient reason (a connection dropped, reset or
refused, a timeout, a server error 5xx) is retried from the byte where it stopped
(:data:`RETRIES` times, after :data:`BACKOFF_S`
seconds, then twice as long each time), and what still fails is an :class:`InputError` naming
the URL.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from neardup import config
from neardup.errors import InputError

__all__ = ["Resuming", "is_transient", "remote_errors", "remote_options"]

#: Retries of a read that failed for a transient reason (a connection dropped or refused, a
#: timeout), from where it stopped, after BACKOFF_S seconds, then twice as long each time.
RETRIES = 3
BACKOFF_S = 1.0


def remote_options(scheme: str, configured: dict[str, Any]) -> dict[str, Any]:
    """fsspec storage options that bound every connect and read by the timeout, for
    ``scheme`` (none for other protocols, or where ``configured``, fsspec's configuration of
    the protocol, sets them itself)."""
    t = float(config.REMOTE_TIMEOUT_S)
    if scheme in ("http", "https") and "client_kwargs" not in configured:
        try:
            import aiohttp
        except ImportError:  # named when the filesystem is made
            return {}
        timeout = aiohttp.ClientTimeout(total=None, connect=t, sock_connect=t, sock_read=t)
        return {"client_kwargs": {"timeout": timeout}}
    if scheme in ("s3", "s3a") and "config_kwargs" not in configured:
        return {"config_kwargs": {"connect_timeout": t, "read_timeout": t}}
    return {}


def _family(e: BaseException) -> set[str]:
    return {f"{c.__module__.split('.')[0]}.{c.__name__}" for c in type(e).__mro__}


def is_transient(e: BaseException) -> bool:
    """True for a failure worth a retry: a connection dropped, reset or refused, a timeout, or
    a server error (5xx); not a redirect loop, a missing file or a refused request."""
    names = _family(e)
    if "aiohttp.TooManyRedirects" in names:
        return False
    if "aiohttp.ClientResponseError" in names:
        return int(getattr(e, "status", 0)) >= 500
    if isinstance(e, (TimeoutError, ConnectionError)):
        return True
    return bool(
        names
        & {
            "aiohttp.ClientPayloadError",
            "aiohttp.ClientConnectionError",
            "aiohttp.ServerTimeoutError",
            "botocore.EndpointConnectionError",
            "botocore.ReadTimeoutError",
            "botocore.ConnectionClosedError",
        }
    )


def _is_remote(e: BaseException) -> bool:
    names = _family(e)
    return is_transient(e) or any(n.startswith(("aiohttp.", "botocore.")) for n in names)


def _describe(e: BaseException, tries: int) -> str:
    names = _family(e)
    after = f" (tried {tries + 1} times)" if tries else ""
    if "aiohttp.TooManyRedirects" in names:
        return "too many redirects (a redirect loop?)"
    if isinstance(e, TimeoutError) or "aiohttp.ServerTimeoutError" in names:
        t = config.REMOTE_TIMEOUT_S
        return f"no answer from the server for {t:g} s{after}; see --remote-timeout"
    if "aiohttp.ClientResponseError" in names:
        status = getattr(e, "status", "?")
        return f"the server answered {status} {getattr(e, 'message', '')}".rstrip() + after
    what = str(e).strip().splitlines()[0] if str(e).strip() else ""
    detail = f"{type(e).__name__}: {what}" if what else type(e).__name__
    if "aiohttp.ClientPayloadError" in names or isinstance(e, ConnectionError):
        return f"the connection dropped ({detail}){after}"
    return f"cannot read it ({detail}){after}"


def remote_error(url: str, e: BaseException, tries: int = 0) -> InputError:
    """``e``, a remote read's failure, as one line naming ``url``."""
    return InputError(url, None, _describe(e, tries))


@contextlib.contextmanager
def remote_errors(url: str) -> Iterator[None]:
    """Inside the block, a network failure (aiohttp, botocore, a timeout, a dropped
    connection) is an :class:`InputError` naming ``url``."""
    try:
        yield
    except InputError:
        raise
    except Exception as e:
        if not _is_remote(e):
            raise
        raise remote_error(url, e) from None


class Resuming(io.RawIOBase):
    """A remote file read from start to end, reopened at the byte where a read failed for a
    transient reason (:func:`is_transient`) and retried with backoff; ``open_at(offset)``
    opens the file positioned at ``offset``."""

    def __init__(self, open_at: Callable[[int], IO[bytes]], url: str) -> None:
        self._open_at = open_at
        self._url = url
        self._pos = 0
        self._f: IO[bytes] | None = None
        self._retrying(lambda: 0)  # the first open, retried as reads are

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        def read() -> int:
            assert self._f is not None
            data = self._f.read(len(b))
            b[: len(data)] = data
            return len(data)

        n = self._retrying(read)
        self._pos += n
        return n

    def _retrying(self, step: Callable[[], int]) -> int:
        tries = 0
        while True:
            try:
                if self._f is None:
                    self._f = self._open_at(self._pos)
                return step()
            except InputError:
                raise
            except Exception as e:
                if not _is_remote(e):
                    raise
                if not is_transient(e) or tries >= RETRIES:
                    raise remote_error(self._url, e, tries) from None
                self._drop()
                time.sleep(BACKOFF_S * 2**tries)
                tries += 1

    def _drop(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            with contextlib.suppress(Exception):
                f.close()

    def close(self) -> None:
        self._drop()
        super().close()
