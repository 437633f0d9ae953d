"""The package's shape: imports point down, no private name crosses a package, no public name
hides a submodule, no module grows past about 500 lines (550 at most)."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import neardup

SRC = Path(neardup.__file__).parent

# each room may import only from rooms at its level or below (config, errors, _optional and the
# shared numba primitives are the ground floor; core never imports a room above it)
LEVEL = {
    "config": 0,
    "errors": 0,
    "_optional": 0,
    "primitives": 0,
    "core": 1,
    "fingerprints": 1,
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


def test_modules_stay_small():
    big = {name: n for name, path in _modules() if (n := len(path.read_text().splitlines())) > 550}
    assert big == {}


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
