"""An output directory on object storage (``-o s3://bucket/kept/``): the parts of a staged
run, put when the run's outputs are committed (:class:`neardup.io.writers.OutputSet`).

Object storage renames nothing, so the parts are not staged beside their names: they are put
at their final names only at the commit, once every task has finished and every other output
is complete; each object appears whole or not at all. A part comes from a local file (put) or
from an object of the same store (copied by the store: nothing passes through this process).
The prefix must hold nothing when the run starts (checked before any work). An error or an
interrupt during the commit removes the parts already put; only a run killed outright
(``kill -9``) in the middle of the commit can leave some of them.
"""

from __future__ import annotations

import os
import tempfile

from neardup.errors import InputError
from neardup.io import objects
from neardup.io.files import is_url

__all__ = ["ObjectDirectory"]


class ObjectDirectory:
    """The output directory ``url`` on object storage (``what``: how messages call it),
    checked to be writable and empty; parts are :meth:`add`-ed, then :meth:`put` at commit
    (:meth:`remove` takes back what was put)."""

    def __init__(self, url: str, what: str) -> None:
        objects.writable_root(url, what)
        self.url = url.rstrip("/")
        if objects.sizes(self.url):
            raise InputError(url, None, "output directory exists and is not empty; remove it "
                             "first")  # fmt: skip
        self.parts: list[tuple[str, str]] = []  #: (name, source: a local path or a URL)
        self.written: list[str] = []  #: the objects put (or being put)

    def add(self, name: str, source: str) -> None:
        """``source`` (a local file, or an object of any store) to become ``url/name``."""
        self.parts.append((name, source))

    def put(self) -> None:
        """Every part at its name: local files put, objects copied by the store (one of
        another store through a local temporary file)."""
        dest = [(f"{self.url}/{name}", src) for name, src in self.parts]
        self.written = [d for d, _ in dest]
        same = self.url.split("://", 1)[0]
        local = [(src, d) for d, src in dest if not is_url(src)]
        copies = [(src, d) for d, src in dest if is_url(src) and src.split("://", 1)[0] == same]
        objects.put_files(local, self.url)
        objects.copy(copies, self.url)
        for d, src in dest:
            if is_url(src) and src.split("://", 1)[0] != same:
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "part")
                    objects.get_file(src, path)
                    objects.put_files([(path, d)], self.url)

    def remove(self) -> None:
        """The objects :meth:`put` put, removed (those not there are no error)."""
        objects.remove(self.written, self.url)
        self.written = []

    def is_inside(self, url: str) -> bool:
        """Whether the URL ``url`` is this directory, inside it, or holds it."""
        a, b = self.url + "/", url.rstrip("/") + "/"
        return a.startswith(b) or b.startswith(a)
