"""Atomic outputs: every output of a run is checked first, staged, then committed together.

An :class:`OutputSet` holds the outputs of one run (a command's main output and its side
outputs). Each path is checked when it is registered, before any work starts: it must not be an
input, another output of the run, or inside a protected directory (an index), and its directory
must exist and be writable; symlinks and ``./`` are resolved first. Each output is written to a
temporary file beside its target (named as :mod:`neardup.io.leftovers` says, so that a run killed
outright leaves files a later run recognises and removes); :meth:`OutputSet.commit` renames them all into place at the end
(an existing file keeps its permissions), and any error or interrupt before that removes every
temporary file, leaving the previous files untouched. Standard output (``-``) and existing
devices or pipes are written last, at commit, from a spool file. Messages name the paths as the
user gave them, never the temporary files. An output directory on object storage (a URL ending
in ``/``) gets its parts at commit, before the files are renamed
(:mod:`neardup.io.object_outputs`).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from neardup._optional import require
from neardup.errors import InputError
from neardup.io.files import compression_of, is_url, local_path
from neardup.io.filesystem import current_umask, fsync_dir, is_inside, same_file, stat_or_none
from neardup.io.formats import STDIO, display_name
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix

__all__ = ["Output", "OutputSet", "RolledBack", "atomic_directory", "atomic_output"]

_COPY_CHUNK = 1 << 20


class RolledBack(ValueError):
    """A change committed with the outputs (:meth:`OutputSet.commit` ``then``) failed, so the
    outputs were put back: ``cause`` is its error, ``outputs`` the files it concerned and
    ``left`` those that could not be put back (now holding this run's output)."""

    def __init__(self, cause: Exception, outputs: list[Output], left: list[Output]) -> None:
        self.cause = cause
        self.outputs = outputs
        self.left = left
        if left:
            state = f"{', '.join(o.name for o in left)} already written (could not be put back)"
            rest = [o.name for o in outputs if o not in left]
            if rest:
                state += f"; {', '.join(rest)} left as they were"
        else:
            state = "no output was changed"
        self.state = state
        super().__init__(f"{cause}; {state}")


@dataclass(eq=False)
class Output:
    """One registered output (see :meth:`OutputSet.file` and :meth:`OutputSet.directory`)."""

    path: str  #: as the user gave it
    what: str  #: how messages call it (e.g. ``"--clusters"``)
    kind: str  #: ``"file"`` or ``"directory"``
    target: str | None  #: resolved absolute path; None for stdout
    stream: bool  #: stdout, device or pipe: written at commit from a spool file
    mode: int  #: permission bits the output gets
    owner: tuple[int, int] | None  #: (uid, gid) of the file it replaces
    existed: bool  #: a file (or empty directory) is at ``target`` now
    tmp: str | None = None
    spool: IO[bytes] | None = None
    staged: bool = False
    #: an output directory on object storage (:class:`~neardup.io.object_outputs.ObjectDirectory`)
    remote: Any = None

    @property
    def name(self) -> str:
        """The output's name in messages."""
        return display_name(self.path, output=True)


def _enclosing_index(target: str) -> str | None:
    """The neardup index directory that holds ``target`` (resolved), at any depth, or None:
    an index's files are its own, written only through it."""
    from neardup.index.storage import is_index_directory

    d = os.path.dirname(target)
    while True:
        if is_index_directory(d):
            return d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


class OutputSet:
    """The outputs of one run, checked up front and committed together (or not at all).

    Use it as a context manager: leaving the block without :meth:`commit` (an error, Ctrl-C)
    removes every temporary file and leaves existing files as they were.

    Parameters
    ----------
    inputs : iterable of path
        Files and directories the run reads; no output may be one of them.
    protect : iterable of path
        Directories no output may be in (an index the run reads or updates).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with OutputSet() as outs:
    ...     a = outs.file(os.path.join(d, "a.txt"))
    ...     with outs.open(a, "w") as f:
    ...         _ = f.write("hello\\n")
    ...     outs.commit()
    >>> open(os.path.join(d, "a.txt")).read()
    'hello\\n'
    """

    def __init__(self, inputs: Iterable[str | os.PathLike] = (), *, protect: Iterable = ()):
        self._inputs: list[tuple[str, str, os.stat_result | None]] = []
        self._url_inputs: list[str] = []
        self._protected: list[tuple[str, str]] = []
        self._outputs: list[Output] = []
        self._closed = False
        self.add_inputs(inputs)
        for d in protect:
            self.protect(d)

    # ------------------------------------------------------------------ registration
    def add_inputs(self, paths: Iterable[str | os.PathLike]) -> None:
        """Record files or directories the run reads (``-``, stdin, is ignored; a ``file://``
        URL is the file it names, other URLs are never local outputs)."""
        for raw in paths:
            p = os.fspath(raw)
            local = local_path(p) if p != STDIO else None
            if local is not None:
                real = os.path.realpath(local)
                self._inputs.append((p, real, stat_or_none(real)))
            elif p != STDIO:
                self._url_inputs.append(p)
        self._recheck()

    def protect(self, directory: str | os.PathLike) -> None:
        """Refuse outputs inside ``directory`` (an index: its files belong to it)."""
        local = local_path(directory)
        if local is None:
            return
        self._protected.append((os.fspath(directory), os.path.realpath(local)))
        self._recheck()

    def _recheck(self) -> None:
        outputs, self._outputs = self._outputs, []
        for o in outputs:
            if o.target is not None:
                self._check_conflicts(o, stat_or_none(o.target))
            elif o.remote is not None:
                self._check_url_conflicts(o)
            self._outputs.append(o)

    def file(self, path: str | os.PathLike, what: str = "the output") -> Output:
        """Register and check an output file (``-`` for stdout); raise :class:`InputError`
        naming ``path`` when it cannot be written safely."""
        return self._register(os.fspath(path), what, "file")

    def directory(self, path: str | os.PathLike, what: str = "the output") -> Output:
        """Register and check an output directory: it must not exist or be empty."""
        return self._register(os.fspath(path), what, "directory")

    def _register(self, p: str, what: str, kind: str) -> Output:
        self._check_usable()
        if is_url(p) and local_path(p) is None:
            return self._register_url(p, what, kind)
        if p == STDIO:
            if kind == "directory":
                raise InputError("<stdout>", None, f"{what} is a directory and cannot be stdout")
            for o in self._outputs:
                if o.target is None and o.remote is None:
                    raise InputError(
                        "<stdout>", None, f"{what} and {o.what} both go to stdout; name a file"
                    )
            out = Output(p, what, kind, None, True, 0, None, False)
            self._outputs.append(out)
            return out
        if not p:
            raise InputError("''", None, f"{what} needs a file name")
        if kind == "file" and compression_of(p) == "zstd":  # before any work, not at the end
            require("zstandard", "zstd", f"writing .zst files ({p})")
        real = os.path.realpath(p)
        parent = os.path.dirname(real)
        shown_parent = os.path.dirname(p) or "."
        if os.path.realpath(shown_parent) != parent:
            shown_parent = parent
        try:
            st = os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as e:
            raise InputError(p, None, f"cannot use it as {what}: {e.strerror}") from None
        out = Output(p, what, kind, real, False, 0, None, st is not None)
        self._check_conflicts(out, st)
        out.mode = (0o777 if kind == "directory" else 0o666) & ~current_umask()
        if st is None:
            if not os.path.isdir(parent):
                raise InputError(
                    p, None, f"directory {shown_parent} does not exist; create it first"
                )
        elif kind == "file":
            if stat.S_ISDIR(st.st_mode):
                raise InputError(p, None, f"is a directory; {what} needs a file name")
            out.stream = not stat.S_ISREG(st.st_mode)
            out.mode = stat.S_IMODE(st.st_mode)
            out.owner = (st.st_uid, st.st_gid)
            if out.stream and not os.access(real, os.W_OK):
                raise InputError(p, None, f"cannot write to it (permission denied); {what}")
        else:
            if not stat.S_ISDIR(st.st_mode):
                raise InputError(p, None, f"exists and is not a directory; {what} is a directory")
            if os.listdir(real):
                raise InputError(
                    p, None, "output directory exists and is not empty; remove it first"
                )
            out.mode = stat.S_IMODE(st.st_mode)
        if not out.stream and not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(
                p, None, f"cannot write in directory {shown_parent} (permission denied)"
            )
        self._outputs.append(out)
        return out

    def _register_url(self, p: str, what: str, kind: str) -> Output:
        """Register an output directory on object storage (a URL of a file is refused: only
        the parts of the records go there)."""
        if kind != "directory":
            raise InputError(p, None, f"{what} cannot go to object storage: only the records "
                             "(-o, --removed) of JSONL or line inputs can, as a directory of "
                             "parts (a URL ending in /)")  # fmt: skip
        from neardup.io.object_outputs import ObjectDirectory

        out = Output(p, what, kind, None, False, 0, None, False, remote=ObjectDirectory(p, what))
        self._check_url_conflicts(out)
        self._outputs.append(out)
        return out

    def _check_url_conflicts(self, out: Output) -> None:
        """Refuse the output ``out`` on object storage where it holds, or is inside, an input
        (the work directory included) or another output there."""
        for given in self._url_inputs:
            if out.remote.is_inside(given):
                raise InputError(out.path, None, f"{out.what} would overwrite an input "
                                 f"({given}); write it elsewhere")  # fmt: skip
        for o in self._outputs:
            if o is not out and o.remote is not None and out.remote.is_inside(o.remote.url):
                raise InputError(out.path, None, f"{out.what} and {o.what} ({o.path}) are "
                                 "inside one another; separate them")  # fmt: skip

    def _check_conflicts(self, out: Output, st: os.stat_result | None) -> None:
        """Refuse ``out`` when it is an input, in a protected directory or another output."""
        target = out.target
        assert target is not None
        for given, real, in_st in self._inputs:
            same = target == real or (st is not None and in_st is not None and same_file(st, in_st))
            if same or (out.kind == "directory" and is_inside(real, target)):
                also = "" if given == out.path else f" ({given})"
                raise InputError(
                    out.path, None, f"{out.what} would overwrite an input{also}; write it elsewhere"
                )
        for given, real in self._protected:
            if is_inside(target, real) or is_inside(real, target):
                raise InputError(
                    out.path, None, f"{out.what} is inside the index {given}; write it elsewhere"
                )
        index = _enclosing_index(target)
        if index is not None:
            raise InputError(
                out.path,
                None,
                f"{out.what} is inside the neardup index {index}; write it elsewhere",
            )
        for o in self._outputs:
            if o.target is None:
                continue
            other = stat_or_none(o.target) if st is not None else None
            if o.target == target or (other is not None and same_file(st, other)):  # type: ignore[arg-type]
                raise InputError(
                    out.path, None, f"{out.what} and {o.what} are the same file; name each its own"
                )
            if (o.kind == "directory" and is_inside(target, o.target)) or (
                out.kind == "directory" and is_inside(o.target, target)
            ):
                raise InputError(
                    out.path,
                    None,
                    f"{out.what} and {o.what} ({o.path}) are inside one another; separate them",
                )

    def _check_usable(self, out: Output | None = None) -> None:
        if self._closed:
            raise ValueError("this output set is already committed or aborted")
        if out is not None and (out not in self._outputs or out.staged or out.tmp or out.spool):
            raise ValueError(f"{out.name} is not a registered output waiting to be written")

    def get(self, path: str | os.PathLike) -> Output:
        """The output registered under ``path`` (as given)."""
        p = os.fspath(path)
        for o in self._outputs:
            if o.path == p:
                return o
        raise KeyError(f"{p} is not an output of this run")

    # ------------------------------------------------------------------ staging
    def _named(self, e: OSError, out: Output) -> OSError:
        """``e`` naming the output as the user gave it rather than its temporary file."""
        fn = e.filename
        if fn is None or (out.tmp is not None and os.fspath(fn).startswith(out.tmp)):
            shown = out.name
            if fn is not None and out.tmp is not None and out.kind == "directory":
                rest = os.fspath(fn)[len(out.tmp) :].lstrip(os.sep)
                shown = os.path.join(out.path, rest) if rest else out.path
            return OSError(e.errno, e.strerror or str(e), shown)
        return e

    def _new_temp(self, out: Output) -> None:
        assert out.target is not None
        where = os.path.dirname(out.target)
        remove_leftovers(where)  # what killed runs staged here before
        prefix = temp_prefix(os.path.basename(out.target))
        try:
            if out.kind == "directory":
                out.tmp = tempfile.mkdtemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=where)
                os.chmod(out.tmp, out.mode)
                return
            fd, out.tmp = tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=where)
            os.close(fd)
            os.chmod(out.tmp, out.mode)
            if out.owner is not None and out.owner != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):
                    os.chown(out.tmp, *out.owner)
        except OSError as e:
            raise self._named(e, out) from None

    @contextlib.contextmanager
    def open(self, out: Output, mode: str = "wb") -> Iterator[IO]:
        """Write output file ``out`` (``mode`` ``"wb"`` or ``"w"``: UTF-8, ``\\n`` line ends).

        The data goes to a temporary file (or, for stdout, a spool file) until :meth:`commit`.
        """
        self._check_usable(out)
        if out.kind != "file" or mode not in ("w", "wb"):
            raise ValueError(f"open() writes files in mode 'w' or 'wb' (got {out.kind}, {mode})")
        try:
            if out.stream:
                raw: IO[bytes] = tempfile.TemporaryFile()
                out.spool = raw
            else:
                self._new_temp(out)
                assert out.tmp is not None
                raw = open(out.tmp, "wb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise self._named(e, out) from None
        f: IO = raw
        if mode == "w":
            f = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")  # type: ignore[arg-type]
        try:
            yield f
            f.flush()
            if not out.stream:
                os.fsync(raw.fileno())
        except OSError as e:
            err = self._named(e, out)
            self._discard(out)
            raise err from None
        except BaseException:
            self._discard(out)
            raise
        finally:
            if out.stream:
                if isinstance(f, io.TextIOWrapper) and not f.closed:
                    with contextlib.suppress(ValueError):
                        f.detach()
            else:
                with contextlib.suppress(OSError):
                    f.close()
        out.staged = True

    def place(self, out: Output) -> str:
        """The temporary file of output file ``out`` (empty), for writers that fill it in
        place, each its own range, by path; :meth:`placed` once they all have. Removed by
        :meth:`abort` (the run failed) like any output's."""
        self._check_usable(out)
        if out.kind != "file" or out.stream:
            raise ValueError(f"{out.name} is not a file of this file system to write in place")
        self._new_temp(out)
        assert out.tmp is not None
        return out.tmp

    def placed(self, out: Output) -> None:
        """Output ``out``, filled in place (:meth:`place`), made durable and staged."""
        assert out.tmp is not None
        try:
            fd = os.open(out.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            err = self._named(e, out)
            self._discard(out)
            raise err from None
        out.staged = True

    @contextlib.contextmanager
    def open_objects(self, out: Output) -> Iterator[Callable[[str, str], None]]:
        """Fill the output directory ``out`` on object storage: yields ``add(name, source)``,
        ``source`` (a local file or a URL) to become the object ``name`` in it at commit."""
        self._check_usable(out)
        if out.remote is None:
            raise ValueError(f"{out.name} is not an output directory on object storage")
        try:
            yield out.remote.add
        except BaseException:
            self._discard(out)
            raise
        out.staged = True

    @contextlib.contextmanager
    def open_directory(self, out: Output) -> Iterator[str]:
        """Fill output directory ``out``: yields a temporary directory renamed at commit."""
        self._check_usable(out)
        if out.kind != "directory" or out.remote is not None:
            raise ValueError(f"{out.name} is not a directory output of this file system")
        self._new_temp(out)
        assert out.tmp is not None
        try:
            yield out.tmp
        except OSError as e:
            err = self._named(e, out)
            self._discard(out)
            raise err from None
        except BaseException:
            self._discard(out)
            raise
        out.staged = True

    def _discard(self, out: Output) -> None:
        if out.remote is not None:
            out.remote.parts.clear()
        if out.spool is not None:
            with contextlib.suppress(OSError):
                out.spool.close()
            out.spool = None
        if out.tmp is not None:
            if out.kind == "directory":
                shutil.rmtree(out.tmp, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(out.tmp)
            out.tmp = None
        out.staged = False

    # ------------------------------------------------------------------ commit
    def _backup(self, out: Output) -> str | None:
        """A hard link to the file ``out`` replaces, so a failed commit can put it back."""
        if out.kind != "file" or not out.existed or out.target is None:
            return None
        d, base = os.path.split(out.target)
        for _ in range(5):
            name = os.path.join(d, f".{base}.{secrets.token_hex(4)}.old.tmp")
            try:
                os.link(out.target, name)
                return name
            except FileExistsError:
                continue
            except OSError:
                return None  # no hard links here: commit without a way back for this file
        return None

    def commit(self, then: Callable[[], object] | None = None) -> None:
        """Move every staged output into place, then write stdout; nothing is left staged.

        Files replace their targets one after another once all are complete; if a rename
        fails, those already renamed are put back and the error names the output.

        ``then`` is a further change that belongs with the outputs (the survivors added to an
        index): it runs once every file is in place, before stdout is written. If it raises,
        the files are put back as they were and :class:`RolledBack` says so (naming any that
        could not be put back); an interrupt (Ctrl-C, SIGTERM) puts them back too.
        """
        self._check_usable()
        for o in self._outputs:
            if not o.staged:
                raise ValueError(f"{o.name} was registered but never written")
        done: list[tuple[Output, str | None]] = []
        try:
            for o in self._outputs:  # object storage first: the slowest, most likely to fail
                if o.remote is not None:
                    done.append((o, None))
                    o.remote.put()
            for o in self._outputs:
                if o.stream or o.remote is not None:
                    continue
                assert o.tmp is not None and o.target is not None
                backup = self._backup(o)
                try:
                    os.replace(o.tmp, o.target)
                except OSError as e:
                    if backup is not None:
                        os.unlink(backup)
                    raise self._named(e, o) from None
                done.append((o, backup))
                o.tmp = None
        except BaseException:
            self._roll_back(done)
            self.abort()
            raise
        for d in {os.path.dirname(o.target) for o, _ in done if o.target}:
            fsync_dir(d)
        if then is not None:
            self._then(then, done)
        for _, backup in done:
            if backup is not None:
                with contextlib.suppress(OSError):
                    os.unlink(backup)
        try:
            for o in self._outputs:
                if o.stream:
                    self._copy_out(o)
        finally:
            self.abort()

    def _then(self, then: Callable[[], object], done: list[tuple[Output, str | None]]) -> None:
        """Run ``then`` with the files in place; put them back if it fails."""
        try:
            then()
        except Exception as e:
            left = self._roll_back(done)
            self.abort()
            raise RolledBack(e, [o for o, _ in done], left) from e
        except BaseException:
            self._roll_back(done)
            self.abort()
            raise

    def _roll_back(self, done: list[tuple[Output, str | None]]) -> list[Output]:
        """Put back what the outputs in ``done`` replaced; return those it could not."""
        left = []
        for o, backup in reversed(done):
            if o.remote is not None:
                try:
                    o.remote.remove()
                except (OSError, InputError):
                    left.append(o)
                continue
            assert o.target is not None
            try:
                if backup is not None:
                    os.replace(backup, o.target)
                elif o.kind == "directory":
                    shutil.rmtree(o.target)
                    if o.existed:
                        os.mkdir(o.target, o.mode)
                elif o.existed:  # no hard link to put back: what it replaced is gone
                    left.append(o)
                else:
                    os.unlink(o.target)
            except OSError:
                left.append(o)
        return left[::-1]

    def _copy_out(self, out: Output) -> None:
        assert out.spool is not None
        out.spool.seek(0)
        try:
            if out.target is None:
                sys.stdout.flush()  # what was printed before comes first
                dest = getattr(sys.stdout, "buffer", None)
                if dest is None:  # a text-only stdout (some notebooks)
                    while chunk := out.spool.read(_COPY_CHUNK):
                        sys.stdout.write(chunk.decode("utf-8", "replace"))
                    sys.stdout.flush()
                    return
                shutil.copyfileobj(out.spool, dest, _COPY_CHUNK)
                dest.flush()
            else:
                with open(out.target, "wb") as dest:
                    shutil.copyfileobj(out.spool, dest, _COPY_CHUNK)
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), out.name) from None

    def abort(self) -> None:
        """Remove every temporary file; targets stay as they were. Safe to call twice."""
        for o in self._outputs:
            self._discard(o)
        self._closed = True

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike, mode: str = "wb", inputs: Iterable[str | os.PathLike] = ()
) -> Iterator[IO]:
    """Open ``path`` for writing so that it appears only if the ``with`` block completes.

    A one-output :class:`OutputSet`: ``path`` is checked before the block runs (not one of
    ``inputs``, its directory writable), ``-`` is stdout (written when the block completes).
    """
    with OutputSet(inputs) as outs:
        out = outs.file(path)
        with outs.open(out, mode) as f:
            yield f
        outs.commit()


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[str]:
    """A temporary directory beside ``path``, renamed to ``path`` when the block completes.

    An existing non-empty directory (or a file) at ``path`` is refused rather than replaced.
    """
    with OutputSet() as outs:
        out = outs.directory(path)
        with outs.open_directory(out) as tmp:
            yield tmp
        outs.commit()
