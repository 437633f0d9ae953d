"""Real text found on a Debian/Ubuntu machine, for the fingerprint bench and evaluation.

Sources: license texts (/usr/share/common-licenses, every LICENSE*/COPYING* file), package
copyright files (/usr/share/doc/*/copyright), man pages in every installed language (gzip,
roff markup roughly stripped) and, to make up size, Python standard library sources.
"""

from __future__ import annotations

import glob
import gzip
import os
import random
import re
import sysconfig
from collections.abc import Iterator

_ROFF_ESCAPE = re.compile(
    r"\\(?:f[BIRP1-4]|f\(..|f\[[^\]]*\]|\(..|\[[^\]]*\]|\*\(..|\*.|s[-+]?\d|&|-|e|.)"
)
_ROFF_REQUEST = re.compile(r"^[.'][ \t]*([A-Za-z]{1,3})?[ \t]*")


def strip_roff(src: str) -> str:
    """Rough man-page text: drop comments and request names, keep their arguments."""
    out = []
    for line in src.splitlines():
        if line.startswith(('.\\"', "'\\\"", '.\\\\"')):
            continue
        line = _ROFF_REQUEST.sub("", line, count=1) if line[:1] in ".'" else line
        out.append(_ROFF_ESCAPE.sub(" ", line).replace('"', ""))
    return "\n".join(out)


def _read(path: str) -> str | None:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError:
        return None
    text = data.decode("utf-8", "replace")
    if "/man/" in path:
        if text.startswith(".so "):
            return None  # a link to another page
        text = strip_roff(text)
    return text


def license_files() -> list[str]:
    paths = sorted(glob.glob("/usr/share/common-licenses/*"))
    paths += sorted(glob.glob("/usr/share/doc/*/copyright"))
    for root in ("/usr/share", "/usr/lib", "/usr/local/lib", "/root/.pyenv/versions", "/opt"):
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.startswith(("LICENSE", "COPYING", "LICENCE")) and not name.endswith(
                    (".gz", ".py", ".pyc", ".html")
                ):
                    paths.append(os.path.join(dirpath, name))
    return sorted(set(p for p in paths if os.path.isfile(p)))


def man_pages() -> list[str]:
    return sorted(glob.glob("/usr/share/man/**/*.gz", recursive=True))


def python_sources() -> list[str]:
    return sorted(
        glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "**/*.py"), recursive=True)
    )


def eval_documents(n_man: int = 2500, seed: int = 0) -> list[tuple[str, str]]:
    """(path, text) of all license/copyright files and a seeded sample of man pages, minus
    byte-identical duplicates and documents of fewer than 10 words."""
    rng = random.Random(seed)
    mans = man_pages()
    paths = license_files() + sorted(rng.sample(mans, min(n_man, len(mans))))
    seen: set[str] = set()
    docs = []
    for p in paths:
        text = _read(p)
        if text is None or text in seen or len(text.split()) < 10:
            continue
        seen.add(text)
        docs.append((p, text))
    return docs


def bench_documents(megabytes: float, seed: int = 0) -> Iterator[str]:
    """Documents (one per file) totalling at least ``megabytes`` MB of UTF-8, cycling through
    man pages, doc files and Python sources in a seeded order."""
    rng = random.Random(seed)
    paths = man_pages() + license_files() + python_sources()
    rng.shuffle(paths)
    need = megabytes * 1e6
    total = 0
    while total < need:
        for p in paths:
            text = _read(p)
            if not text:
                continue
            yield text
            total += len(text.encode("utf-8"))
            if total >= need:
                return
