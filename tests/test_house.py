"""The package's shape: imports point down, no private name crosses a package, no public name
hides a submodule, no function grows past 60 lines outside numba kernels, and nothing outside
the index package asks an index for its type."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import neardup

SRC = Path(neardup.__file__).parent

# each room may import only from rooms at its level or below (config, errors, _optional and the
# shared numba primitives are the ground floor; core never imports a room above it; the
# optional GPU engine sits beside core: it uses core, and core's device= reaches it when asked)
LEVEL = {
    "config": 0,
    "errors": 0,
    "_optional": 0,
    "primitives": 0,
    "core": 1,
    "fingerprints": 1,
    "gpu": 1,
    "io": 2,
    "index": 2,
    "distributed": 3,
    "pipeline": 4,
    "server": 5,
    "cli": 6,
}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        out.append((".".join(("neardup", *rel.parts)).removesuffix(".__init__"), path))
    return out


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
    return found


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "neardup" else None


def test_imports_point_down():
    wrong = []
    for name, path in _modules():
        here = _room(name)
        if here not in LEVEL:
            continue
        for mod, _ in _imports(path):
            there = _room(mod)
            if there in LEVEL and there != here and LEVEL[there] > LEVEL[here]:
                wrong.append(f"{name} imports {mod}")
    assert wrong == []


def test_no_private_name_crosses_a_package():
    wrong = []
    for name, path in _modules():
        package = name.rsplit(".", 1)[0] if not path.name == "__init__.py" else name
        for mod, names in _imports(path):
            if not mod.startswith("neardup"):
                continue
            target_pkg = (
                mod if (SRC / Path(*mod.split(".")[1:])).is_dir() else mod.rsplit(".", 1)[0]
            )
            private = [n for n in names if n.startswith("_") and n != "__version__"]
            private += [p for p in mod.split(".")[1:] if p.startswith("_") and p != "_optional"]
            if private and target_pkg != package:
                wrong.append(f"{name} imports {private} from {mod}")
    assert wrong == []


def test_no_public_name_hides_a_submodule():
    submodules = {m.name for m in pkgutil.iter_modules(neardup.__path__)}
    assert set(neardup.__all__) & submodules == set()


#: Most lines of a function, not counting its docstring or the numba kernels defined inside it.
MAX_FUNCTION_LINES = 60

#: Today's long functions that the shard-stage rebuild and the service rework will shrink;
#: nothing may join this list, and each entry may only shrink.
LONG_FUNCTIONS = {}


def _is_kernel(f: ast.AST) -> bool:
    for d in getattr(f, "decorator_list", []):
        n = d.func if isinstance(d, ast.Call) else d
        name = n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
        if "jit" in name or name in ("vectorize", "guvectorize", "cfunc"):
            return True
    return False


def _lines(f: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    n = f.end_lineno - f.lineno + 1
    first = f.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            n -= first.end_lineno - first.lineno + 1
    for inner in ast.walk(f):
        if inner is not f and _is_kernel(inner):
            start = min([inner.lineno] + [d.lineno for d in inner.decorator_list])
            n -= inner.end_lineno - start + 1
    return n


def _functions(tree: ast.AST, prefix: str):
    """(qualified name, node) of every function, methods as ``module.Class.method``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}.{node.name}", node
            yield from _functions(node, f"{prefix}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}.{node.name}")


def test_no_function_over_60_lines_outside_numba_kernels():
    long = {}
    for name, path in _modules():
        for qual, f in _functions(ast.parse(path.read_text(encoding="utf-8")), name):
            if not _is_kernel(f) and (n := _lines(f)) > LONG_FUNCTIONS.get(
                qual, MAX_FUNCTION_LINES
            ):
                long[qual] = n
    assert long == {}


def test_the_measure_of_a_function():
    src = (
        'def f():\n    """Doc\n    string."""\n    x = 1\n\n'
        "    @njit\n    def k():\n        return 1\n\n    return x\n"
    )
    f = next(node for _, node in _functions(ast.parse(src), "m"))
    assert _lines(f) == 5  # def, x = 1, two blank lines and return


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    return (SRC / Path(*parts)).is_dir() or (SRC / Path(*parts)).with_suffix(".py").is_file()


def _is_kernel_module(module: str) -> bool:
    """Numba kernels' module: named ``kernels`` or ``*_kernels``, or ``_``-prefixed with numba
    kernels in it (``fingerprints._pipeline``, ``fingerprints._normalize``)."""
    base = module.rsplit(".", 1)[-1]
    if base.endswith("kernels"):
        return True
    if not base.startswith("_") or base.startswith("__") or not _is_module(module):
        return False
    path = (SRC / Path(*module.split(".")[1:])).with_suffix(".py")
    return any(_is_kernel(f) for f in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _private_uses(name: str, tree: ast.AST) -> list[str]:
    """Private names of other neardup modules that module ``name`` imports or reads:
    ``from neardup.x import _y`` (a private submodule aside: the test above keeps those in their
    package) and ``m._y`` where ``m`` is bound by ``import neardup...`` or ``from neardup...
    import module``. Kernel modules may use each other's private kernels."""
    bound: dict[str, str] = {}  # local name -> the neardup module it names
    wrong = []

    def private(module: str, attr: str) -> bool:
        return (
            attr.startswith("_")
            and not attr.startswith("__")
            and module != name
            and not _is_module(f"{module}.{attr}")
            and not (_is_kernel_module(name) and _is_kernel_module(module))
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "neardup":
                continue
            for a in node.names:
                if _is_module(f"{node.module}.{a.name}"):
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
                elif private(node.module, a.name):
                    wrong.append(f"{name}:{node.lineno} imports {a.name} from {node.module}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "neardup":
                    bound[a.asname or "neardup"] = a.name if a.asname else "neardup"

    def module_of(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return bound.get(expr.id)
        if isinstance(expr, ast.Attribute) and (base := module_of(expr.value)):
            return f"{base}.{expr.attr}" if _is_module(f"{base}.{expr.attr}") else None
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (module := module_of(node.value)):
            if private(module, node.attr):
                wrong.append(f"{name}:{node.lineno} reads {module}.{node.attr}")
    return wrong


def test_no_module_uses_another_modules_private_names():
    """A name another module uses is part of its module's interface, public and documented;
    only kernel modules (``kernels``, ``*_kernels``, ``_pipeline``, ``_normalize``) may use
    each other's private kernels (a numba kernel calling another)."""
    wrong = []
    for name, path in _modules():
        wrong += _private_uses(name, ast.parse(path.read_text(encoding="utf-8")))
    assert wrong == []


def test_the_private_name_check_sees_imports_and_attribute_reads():
    src = (
        "import neardup.io.filesystem\n"
        "from neardup.io.readers import _hidden, check_id\n"
        "from neardup.io import readers as r, _kernels\n"
        "from neardup.distributed import plan as _plan\n"
        "r._helper(_plan.ShardPlan, r.__name__, _kernels._kernel)\n"
        "neardup.io.filesystem._secret('.')\n"
    )
    assert [w.split(" ", 1)[1] for w in _private_uses("neardup.io.arrow", ast.parse(src))] == [
        "imports _hidden from neardup.io.readers",
        "reads neardup.io.readers._helper",
        "reads neardup.io._kernels._kernel",
        "reads neardup.io.filesystem._secret",
    ]
    kernels = ast.parse("from neardup.index._query_kernels import _u64_at\n")
    assert _private_uses("neardup.index._sort_kernels", kernels) == []
    assert _private_uses("neardup.index.writer", kernels) != []
    assert not _is_kernel_module("neardup.distributed._dask")
    assert _is_kernel_module("neardup.fingerprints._normalize")


#: Index types and the methods that tell backends apart: outside the index package code asks a
#: backend for its capabilities (IndexBackend.require), never for its type.
_INDEX_TYPES = {"Index", "RedisIndex", "IndexBase", "LocalIndex", "ParquetCorpus"}
_INDEX_METHODS = {"nearest", "nearest_arrays", "verified_query", "search", "lock", "session"}


def _compares_backend_name(node: ast.AST) -> bool:
    """``x.backend == "redis"`` and the like: a branch on which backend an index is."""
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    named = any(
        isinstance(x, ast.Attribute) and x.attr == "backend"
        or isinstance(x, ast.Call) and getattr(x.func, "id", "") == "getattr"
        and len(x.args) >= 2 and getattr(x.args[1], "value", None) == "backend"
        for x in sides
    )  # fmt: skip
    return named and any(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in sides)


def test_no_type_checks_on_indexes_outside_the_index_package():
    wrong = []
    for name, path in _modules():
        if name.startswith("neardup.index"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _compares_backend_name(node):
                wrong.append(f"{name}:{node.lineno} compares a backend's name")
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            args = node.args
            if node.func.id == "isinstance" and len(args) == 2:
                types = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
                hit = {t.id for t in types if isinstance(t, ast.Name)} & _INDEX_TYPES
                if hit:
                    wrong.append(f"{name}:{node.lineno} isinstance(..., {sorted(hit)})")
            elif node.func.id in ("hasattr", "getattr") and len(args) >= 2:
                attr = args[1]
                if isinstance(attr, ast.Constant) and attr.value in _INDEX_METHODS | {
                    "sketch_words"
                }:
                    wrong.append(f"{name}:{node.lineno} {node.func.id}(..., {attr.value!r})")
    assert wrong == []


def test_config_holds_at_most_25_documented_tunables():
    from neardup import config

    lines = (SRC / "config.py").read_text(encoding="utf-8").splitlines()
    names = [n for n in vars(config) if n.isupper() and not n.startswith("_")]
    assert len(names) <= 25
    for name in names:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        above = at - 1
        while above >= 0 and lines[above].startswith("#") and not lines[above].startswith("#:"):
            above -= 1
        assert above >= 0 and lines[above].startswith("#:"), f"{name} has no #: comment"


@pytest.mark.slow
def test_a_failed_assertion_in_a_thread_fails_the_test(tmp_path):
    """The project's pytest settings turn a thread's unhandled exception into an error."""
    import subprocess
    import sys

    config = Path(__file__).parent.parent / "pyproject.toml"
    (tmp_path / "test_thread.py").write_text(
        "import threading\n\n\ndef test_t():\n"
        "    t = threading.Thread(target=lambda: [][0])\n    t.start()\n    t.join()\n"
    )
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(config)]
    r = subprocess.run([*args, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout
    assert "1 failed" in r.stdout and "IndexError" in r.stdout
