"""One way to import optional dependencies: a missing one is a one-line ImportError naming the
extra to install (``pip install "neardup[parquet]"``), never a NameError or a traceback later."""

from __future__ import annotations

import importlib
from types import ModuleType

#: The extra that installs each optional top-level module.
EXTRAS = {
    "pyarrow": "parquet",
    "pandas": "dask",
    "dask": "dask",
    "distributed": "dask",
    "fastapi": "server",
    "uvicorn": "server",
    "fastapi_offline": "server",
    "prometheus_client": "server",
    "pydantic": "server",
    "datasets": "hf",
    "fsspec": "remote",
    "aiohttp": "remote",
    "zstandard": "zstd",
    "matplotlib": "report",
    "ray": "ray",
}


class MissingDependency(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def require(module: str, extra: str | None = None, feature: str | None = None) -> ModuleType:
    """Import ``module`` (e.g. ``"pyarrow.parquet"``) or raise :class:`MissingDependency`.

    Parameters
    ----------
    module : str
        Dotted module name.
    extra : str, optional
        The neardup extra that installs it (default: looked up from the top-level name).
    feature : str, optional
        What needs it, for the message (e.g. ``"Parquet input"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        # only a missing optional package itself is reported this way; a broken install of
        # it (or of something it needs) keeps its own message
        if e.name is not None and e.name.split(".")[0] != top:
            raise
        extra = extra or EXTRAS.get(top, "all")
        what = f"{feature} needs" if feature else "this needs"
        raise MissingDependency(
            f'{what} {top}, which is not installed: pip install "neardup[{extra}]"'
        ) from None
