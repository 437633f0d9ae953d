"""Where numba keeps neardup's compiled kernels, and the first run's notice that it compiles them.

Every kernel is compiled once per machine and cached by numba (``cache=True``): beside its module
(``__pycache__``) when that directory is writable, else in a per-user directory
(``$XDG_CACHE_HOME/numba``, usually ``~/.cache/numba``), or in ``NUMBA_CACHE_DIR`` when set. When
none of these is writable (a read-only install and a read-only home), :func:`use_writable_cache`
points ``NUMBA_CACHE_DIR`` at a per-user directory under the system's temporary directory, so the
compile happens once rather than on every run.

Every kernel is made with :func:`njit` (numba's, with a checked cache): each data file holds its
entry's key and the source stamp, is named by that key, and is written before the index names it,
so an entry left half-written, or written over by another process compiling the same kernel at
the same time, or by a run killed while compiling, is never loaded: it is compiled again and
replaced. numba's own cache can hand one kernel variant another's code in these cases.

This module imports neither numba nor the kernels until :func:`njit` is called; the notice looks
for numba's index files (``*.nbi``).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

__all__ = [
    "GROUPS",
    "cache_dir_for",
    "compile_notice",
    "first_notice",
    "is_compiled",
    "njit",
    "use_writable_cache",
]

_ROOT = os.path.dirname(os.path.abspath(__file__))

#: kernel group -> (module file, a kernel whose cache stands for the group, CPU seconds to compile
#: what a run on a few thousand ASCII documents compiles of the group, measured on a 2-core
#: machine with numba's compile events, a fresh cache each: see bench/startup.py --breakdown)
GROUPS = {
    "fingerprint": (
        os.path.join(_ROOT, "fingerprints", "_pipeline.py"),
        "_fingerprint_chunk_*",
        4,
    ),
    "search": (os.path.join(_ROOT, "core", "tree_kernels.py"), "root_pairs", 3),
    "verify": (os.path.join(_ROOT, "core", "verify_kernels.py"), "greedy_keep", 2),
    # prefix candidates: the counts, the prefixes and the pass that keeps or drops
    "prefix": (os.path.join(_ROOT, "core", "prefix_kernels.py"), "prefix_keep", 3),
    # band candidates' MinHash band keys (with the prefix group's pass)
    "bands": (os.path.join(_ROOT, "core", "band_kernels.py"), "band_keys", 1),
    # an index's queries: the tree walk (not the all-pairs search's kernels)
    "query": (os.path.join(_ROOT, "core", "tree_kernels.py"), "_walk", 10),
    "index": (os.path.join(_ROOT, "index", "_kernels.py"), "", 1),
    "formats": (os.path.join(_ROOT, "io", "_kernels.py"), "parse_decimal_lines", 1),
    # the block reader of inputs of config.READ_KERNEL_FROM bytes or more, with its id and
    # kept-line kernels
    "reader": (os.path.join(_ROOT, "io", "_line_kernels.py"), "parse_lines", 12),
}

#: groups a notice of this process named already (each is announced once)
_ANNOUNCED: set[str] = set()


def _writable(path: str) -> bool:
    """numba's own test: the directory can be created and a file written in it."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _user_cache_root() -> str:
    """numba's per-user cache directory (its ``AppDirs("numba").user_cache_dir``)."""
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numba")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
        return os.path.join(base, "numba", "Cache")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "numba")


def _subpath(py_file: str) -> str:
    parent = os.path.dirname(os.path.abspath(py_file))
    return "_".join([os.path.basename(parent), hashlib.sha1(parent.encode()).hexdigest()])


def cache_dir_for(py_file: str) -> str | None:
    """The directory numba caches ``py_file``'s kernels in, in numba's order of preference;
    None when no candidate is writable (nothing is cached)."""
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return os.path.join(user, _subpath(py_file))
    for candidate in (
        os.path.join(os.path.dirname(py_file), "__pycache__"),
        os.path.join(_user_cache_root(), _subpath(py_file)),
    ):
        if _writable(candidate):
            return candidate
    return None


def use_writable_cache() -> str | None:
    """Set ``NUMBA_CACHE_DIR`` to a per-user directory under the temporary directory when numba
    could cache nowhere else; returns it (None when there was no need). Call it before numba is
    imported: a console script does, at start."""
    if os.environ.get("NUMBA_CACHE_DIR") or "numba" in sys.modules:
        return None
    if cache_dir_for(GROUPS["search"][0]) is not None:
        return None
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    path = os.path.join(tempfile.gettempdir(), f"neardup-numba-cache-{uid}")
    if not _writable(path):
        return None
    os.environ["NUMBA_CACHE_DIR"] = path
    return path


def is_compiled(group: str) -> bool:
    """True when the kernels of ``group`` (a key of :data:`GROUPS`) are in numba's cache."""
    py_file, kernel, _ = GROUPS[group]
    where = cache_dir_for(py_file)
    if where is None:
        return False
    stem = os.path.splitext(os.path.basename(py_file))[0]
    name = f"{stem}.{kernel}-*.nbi" if kernel else f"{stem}.*.nbi"
    return bool(glob.glob(os.path.join(glob.escape(where), name)))


def compile_notice(groups: list[str], alongside: list[str] = ()) -> str | None:
    """``"compiling kernels for this machine (first run only, ~N s)"`` when some of ``groups``
    (compiled one after another) or of ``alongside`` (compiled meanwhile in another process)
    are not compiled yet, else None."""
    missing = sum(GROUPS[g][2] for g in groups if not is_compiled(g))
    beside = sum(GROUPS[g][2] for g in alongside if not is_compiled(g))
    if max(missing, beside) <= 1:  # a second or less: not worth a line
        return None
    return f"compiling kernels for this machine (first run only, ~{max(missing, beside)} s)"


def first_notice(groups: list[str], alongside: list[str] = ()) -> str | None:
    """:func:`compile_notice` for the groups no earlier call of this process looked at (a
    command announces, then calls the Python API, which announces only what it adds; a group
    found compiled, or announced, is not looked for again: the cache is not listed per call)."""
    groups = [g for g in groups if g not in _ANNOUNCED]
    alongside = [g for g in alongside if g not in _ANNOUNCED]
    notice = compile_notice(groups, alongside)
    _ANNOUNCED.update(groups, alongside)
    return notice


# -- numba's cache, checked ------------------------------------------------------------------------

#: what the checked index files are marked with beside numba's version (numba's own index files,
#: unchecked, are not read, and numba does not read these)
_FORMAT = "neardup-checked-1"


@functools.cache
def _checked_cache() -> type:
    """A numba ``FunctionCache`` whose entries are checked on load (built on first use, so that
    this module does not import numba)."""
    from numba.core.caching import FunctionCache, IndexDataCacheFile

    class CheckedCacheFile(IndexDataCacheFile):
        """Data files that carry their key and source stamp, named by the key, and written
        before the index; anything that does not read back whole and matching is a miss."""

        def __init__(self, cache_path: str, filename_base: str, source_stamp: Any) -> None:
            super().__init__(cache_path, filename_base, source_stamp)
            self._version = f"{self._version}+{_FORMAT}"
            self._base = filename_base

        def _name_for(self, key: Any) -> str:
            return f"{self._base}.{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}.nbc"

        def save(self, key: Any, data: Any) -> None:
            name = self._name_for(key)
            self._save_data(name, (key, self._source_stamp, data))
            try:
                overloads = self._load_index()
            except Exception:  # a damaged index: start it again
                overloads = {}
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)

        def load(self, key: Any) -> Any:
            try:
                name = self._load_index().get(key)
                if name is None:
                    return None
                saved_key, stamp, data = self._load_data(name)
            except Exception:  # damaged, cut short or of another format: compile again
                return None
            return data if saved_key == key and stamp == self._source_stamp else None

    class CheckedFunctionCache(FunctionCache):
        def __init__(self, py_func: Callable) -> None:
            super().__init__(py_func)
            self._cache_file = CheckedCacheFile(
                self._cache_path, self._impl.filename_base, self._impl.locator.get_source_stamp()
            )

        def _load_overload(self, sig: Any, target_context: Any) -> Any:
            try:
                return super()._load_overload(sig, target_context)
            except Exception:  # an entry that cannot be rebuilt: compile again
                return None

    return CheckedFunctionCache


def njit(*args: Any, **options: Any) -> Any:
    """``numba.njit`` (same arguments, bare or called), whose on-disk cache (``cache=True``) is
    checked: an entry that is damaged, cut short or another kernel's is compiled again, never
    loaded. Every neardup kernel is made with it."""
    import numba

    def checked(dispatcher: Any) -> Any:
        if options.get("cache"):
            dispatcher._cache = _checked_cache()(dispatcher.py_func)
        return dispatcher

    if args and callable(args[0]):
        return checked(numba.njit(*args, **options))
    decorate = numba.njit(*args, **options)
    return lambda func: checked(decorate(func))
