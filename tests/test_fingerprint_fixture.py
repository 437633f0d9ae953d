"""Fingerprints stay bit-identical: a multilingual sample against values kept in tests/data.

The expected values were computed by the implementation of the time the fixture was committed
(see ``tests/data/make_fingerprint_fixture.py``); users' indexes hold such fingerprints.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata

import numpy as np
import pytest

from neardup.fingerprints import Fingerprinter

DATA = os.path.join(os.path.dirname(__file__), "data")
sys.path.insert(0, DATA)

import make_fingerprint_fixture as fixture  # noqa: E402

with open(fixture.EXPECTED, encoding="utf-8") as _f:
    EXPECTED = json.load(_f)

# The values depend on the Unicode data of the interpreter (categories, NFKC, case folding).
pytestmark = pytest.mark.skipif(
    unicodedata.unidata_version != EXPECTED["unidata_version"],
    reason=f"fixture made with Unicode {EXPECTED['unidata_version']}, "
    f"this interpreter has {unicodedata.unidata_version}",
)


@pytest.fixture(scope="module")
def docs() -> list[str | bytes]:
    return fixture.read_sample()


def _fingerprinter(cfg: dict) -> Fingerprinter:
    opts = {k: v for k, v in cfg.items() if k not in ("preset", "subset")}
    return Fingerprinter(cfg["preset"], **opts)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["default", "reference"])
def test_presets_match_fixture(docs, preset):
    cfg = {"preset": preset, "subset": "all"}
    texts = fixture.documents_for(cfg, docs)
    expected = np.array([int(x) for x in EXPECTED["presets"][preset]], dtype=np.uint64)
    fp = _fingerprinter(cfg)
    for threads in (1, 2):
        got = fp.fingerprint_many(texts, threads=threads)
        bad = np.flatnonzero(got != expected)
        assert bad.size == 0, f"{preset}: {bad.size} documents differ, first {bad[:10].tolist()}"
    # one document at a time, and every document as str as well as bytes
    for i in range(0, len(texts), 37):
        t = texts[i]
        assert fp.fingerprint(t) == int(expected[i]), i
        if isinstance(t, bytes) and preset == "default":
            assert fp.fingerprint(t.decode("utf-8")) == int(expected[i]), i


@pytest.mark.slow
def test_every_option_matches_fixture(docs):
    failed = []
    for cfg in fixture.configs():
        got = _fingerprinter(cfg).fingerprint_many(fixture.documents_for(cfg, docs))
        if fixture.digest(got) != EXPECTED["digests"][fixture.config_key(cfg)]:
            failed.append(fixture.config_key(cfg))
    assert not failed, f"{len(failed)} option sets changed, e.g. {failed[:5]}"
