"""Simhash combine, the reference preset (bit-exact to simhash-cpp) and the pipeline."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import FINGERPRINT_REFERENCE, naive_fingerprint, naive_shingle_keys

from neardup.fingerprints import (
    PRESETS,
    Fingerprinter,
    compute,
    compute_batch,
    fingerprint,
    fnv1a64,
)
from neardup.fingerprints import _kernels as K
from neardup.fingerprints.tokenize import ascii_letters, unicode_tokens

U64 = st.integers(min_value=0, max_value=2**64 - 1)


def naive_simhash(hashes, weights=None) -> int:
    """Plain numpy tally: +w where bit i is 1, -w where 0; bit i = tally > 0."""
    h = np.asarray(hashes, dtype=np.uint64)
    w = np.ones(len(h)) if weights is None else np.asarray(weights, dtype=np.float64)
    bits = (h[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    tally = (np.where(bits == 1, 1.0, -1.0) * w[:, None]).sum(axis=0)
    return int(sum(1 << i for i in range(64) if tally[i] > 0))


# ---- compute ----------------------------------------------------------------------------------


def test_compute_small_and_empty():
    assert compute([]) == 0
    assert compute(np.zeros(0, dtype=np.uint64)) == 0
    assert compute([0b1100, 0b1010, 0b1001]) == 0b1000
    assert compute([2**64 - 1]) == 2**64 - 1
    assert compute([5, 5]) == 5  # ties are 0, so two equal hashes give that hash
    assert compute([1, 2]) == 0


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(U64, max_size=30))
def test_compute_matches_naive_unit(hashes):
    assert compute(hashes) == naive_simhash(hashes)
    assert compute(np.array(hashes, dtype=np.uint64)) == naive_simhash(hashes)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(U64, st.integers(-5, 20).map(lambda x: x / 4)), max_size=30))
def test_compute_matches_naive_weighted(pairs):
    hashes = [h for h, _ in pairs]
    weights = [w for _, w in pairs]
    expected = naive_simhash(hashes, weights)
    assert compute(hashes, weights) == expected
    assert compute(pairs) == expected


def test_compute_feature_forms():
    weights = {"apple": 2.0, "pear": 0.5, "plum": 0.25}
    hashes = [fnv1a64(k) for k in weights]
    expected = naive_simhash(hashes, list(weights.values()))
    assert compute(weights) == expected
    assert compute(list(weights.items())) == expected
    assert compute([k.encode() for k in weights], list(weights.values())) == expected
    assert compute(np.array(hashes, dtype=np.uint64).view(np.int64), list(weights.values())) == (
        expected
    )


def test_compute_errors():
    with pytest.raises(ValueError, match="weights"):
        compute([1, 2], [1.0])
    with pytest.raises(ValueError, match="64-bit"):
        compute([-1])
    with pytest.raises(TypeError, match="feature"):
        compute([1.5])
    with pytest.raises(ValueError, match="finite"):
        compute([1], [float("nan")])
    with pytest.raises(ValueError, match="pairs"):
        compute({"a": 1.0}, [1.0])


@pytest.mark.slow
@settings(deadline=None)
@given(st.lists(st.lists(U64, max_size=8), max_size=6))
def test_compute_batch_matches_compute(docs):
    flat = np.array([h for d in docs for h in d], dtype=np.uint64)
    offsets = np.cumsum([0] + [len(d) for d in docs])
    got = compute_batch(flat, offsets)
    assert got.tolist() == [compute(d) for d in docs]
    w = np.linspace(-1, 3, len(flat))
    got = compute_batch(flat, offsets, w)
    ws = np.split(w, offsets[1:-1]) if docs else []
    assert got.tolist() == [naive_simhash(d, x) for d, x in zip(docs, ws, strict=True)]


def test_compute_batch_bad_offsets():
    with pytest.raises(ValueError, match="offsets"):
        compute_batch(np.zeros(3, np.uint64), np.array([0, 2]))


# ---- reference preset: seomoz/simhash-cpp ----------------------------------------------------

# The poem and the pinned value are the "Simhash integrated test" of seomoz/simhash-cpp
# (src/hash_test.cpp, removed in 2016): hash_text<jenkins, Strspn>(jabberwocky) == 0x041379A587C66880.
JABBERWOCKY = (
    "Twas brillig, and the slithy toves  Did gyre and gimble in the wabe:"
    "All mimsy were the borogoves,  And the mome raths outgrabe."
    "Beware the Jabberwock, my son!  The jaws that bite, the claws that catch!"
    "Beware the Jubjub bird, and shun  The frumious Bandersnatch!"
    "He took his vorpal sword in hand:  Long time the manxome foe he sought --"
    "So rested he by the Tumtum tree,  And stood awhile in thought."
    "And, as in uffish thought he stood,  The Jabberwock, with eyes of flame,"
    "Came whiffling through the tulgey wood,  And burbled as it came!"
    "One, two! One, two! And through and through  The vorpal blade went snicker-snack!"
    "He left it dead, and with its head  He went galumphing back."
    "And, has thou slain the Jabberwock?  Come to my arms, my beamish boy!"
    "O frabjous day! Callooh! Callay!'  He chortled in his joy."
)
JABBERWOCKY_SIMHASH = 0x041379A587C66880
POPE = (
    "There once was a man named Popewho loved an oscilloscope.  and the cyclical trace"
    "  of their carnal embracehad a damned-near-infinite slope"
)


@pytest.mark.slow
def test_reference_pinned_value():
    assert fingerprint(JABBERWOCKY, preset="reference") == JABBERWOCKY_SIMHASH
    assert Fingerprinter("reference").fingerprint(JABBERWOCKY.encode()) == JABBERWOCKY_SIMHASH


def test_reference_near_and_far():
    fp = Fingerprinter("reference")
    a = fp.fingerprint(JABBERWOCKY)
    b = fp.fingerprint(JABBERWOCKY + " - Lewis Carroll 'Alice In Wonderland'")
    assert 0 < bin(a ^ b).count("1") <= 3
    assert bin(a ^ fp.fingerprint(POPE)).count("1") > 5


@pytest.mark.slow
def test_reference_python_path_is_bit_exact():
    # the same pipeline through the Python path (a callable tokenizer) gives the same value
    fp = Fingerprinter("reference", tokenizer=ascii_letters)
    assert fp.fingerprint(JABBERWOCKY) == JABBERWOCKY_SIMHASH


# seomoz/simhash-cpp src/hash_test.cpp, "Simhash" section: the tally with the library's bit order.
def test_reference_tally_even_and_odd_samples():
    assert K.tally_unit(np.zeros(0, np.uint64), 0, True) == 0
    even = []
    mask = 1
    while mask < 0x4000000000000000:
        even.append(mask)
        mask = 2 * mask + 1
    assert K.tally_unit(np.array(even, np.uint64), len(even), True) == 0xFFFFFFFE00000000
    odd = []
    mask = 0xFFFFFFFFFFFFFFFF
    while mask > 1:
        odd.append(mask)
        mask >>= 1
    assert K.tally_unit(np.array(odd, np.uint64), len(odd), True) == 0xFFFFFFFF80000000


@pytest.mark.parametrize(
    ("window", "expected"),
    # simhash-cpp src/hash_test.cpp, "MovingWindowLegacyShingler": pushes 0x1, 0x10, 0x100
    [(2, [0x0001, 0x0012, 0x0120]), (3, [0x0001, 0x0012, 0x0124])],
)
def test_cyclic_shingles(window, expected):
    fp = Fingerprinter("reference", tokenizer=str.split, hash=lambda b: int(b, 16), window=window)
    feats, _ = fp._features_py("1 10 100", 0)
    assert feats == expected


def test_rotate_vectors():
    # simhash-cpp src/cyclic_test.cpp
    assert K._rotl64(np.uint64(0xDEADBEEFDEADBEEF), 1) == 0xBD5B7DDFBD5B7DDF
    assert K._rotl64(np.uint64(0xAAAAAAAAAAAAAAAA), 1) == 0x5555555555555555
    assert K._rotl64(np.uint64(0xDEADBEEFDEADBEEF), 10) == 0xB6FBBF7AB6FBBF7A
    assert K._rotl64(np.uint64(0xABCDEFFFABCDEFFF), 64) == 0xABCDEFFFABCDEFFF
    assert K._rotl64(np.uint64(0xABCDEFFFABCDEFFF), 1024) == 0xABCDEFFFABCDEFFF


# ---- the pipeline ----------------------------------------------------------------------------

TEXTS = st.text(
    alphabet=st.sampled_from(list("abc ABC.,\n1 é日本ภา\u0e48ЖΣσς\u0301ﬁ")), max_size=80
)


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXTS, max_size=12))
@pytest.mark.slow
def test_fingerprint_many_matches_fingerprint(texts):
    for preset in PRESETS:
        fp = Fingerprinter(preset)
        assert fp.fingerprint_many(texts).tolist() == [fp.fingerprint(t) for t in texts]


@settings(max_examples=60, deadline=None)
@given(TEXTS, st.sampled_from(["count", "unique", "log"]), st.integers(1, 4))
@pytest.mark.slow
def test_kernel_path_equals_python_path(text, weighting, window):
    fast = Fingerprinter("default", weighting=weighting, window=window)
    slow = Fingerprinter("default", weighting=weighting, window=window, tokenizer=unicode_tokens)
    assert fast._fast and not slow._fast
    assert fast.fingerprint(text) == slow.fingerprint(text)


def test_fingerprint_many_threads_and_chunks(monkeypatch):
    from neardup.fingerprints import batch as fbatch

    monkeypatch.setattr(fbatch, "FINGERPRINT_CHUNK_DOCS", 7)
    texts = [f"document number {i} with some words {i % 5}" for i in range(100)]
    fp = Fingerprinter()
    one = fp.fingerprint_many(texts, threads=1)
    two = fp.fingerprint_many(iter(texts), threads=2)
    assert one.dtype == np.uint64 and one.shape == (100,)
    assert one.tolist() == two.tolist() == [fp.fingerprint(t) for t in texts]
    assert fp.fingerprint_many([]).shape == (0,)


@pytest.mark.slow
def test_default_normalizes_and_handles_scripts():
    assert fingerprint("") == 0
    assert fingerprint("...!!") == 0
    assert fingerprint("Hello, WORLD") == fingerprint("hello world")
    assert fingerprint("ＨＥＬＬＯ world") == fingerprint("hello world")
    assert fingerprint("日本語のテキスト") != 0
    assert fingerprint("ภาษาไทย") != 0
    # one token shorter than the window still counts
    assert fingerprint("word") == Fingerprinter(window=1).fingerprint("word")


def test_default_near_duplicates_are_close():
    base = " ".join(f"w{i} alpha beta gamma{i % 7}" for i in range(300))
    edited = base.replace("w150 ", "w150 inserted words here ")
    a, b = fingerprint(base), fingerprint(edited)
    assert bin(a ^ b).count("1") <= 6
    zh = "我们在研究如何从大量的网页中找到几乎重复的文档这是一个很重要的问题" * 3
    assert bin(fingerprint(zh) ^ fingerprint(zh + "。谢谢")).count("1") <= 6


def test_custom_callables():
    seen = []

    def weigh(shingle: str, count: int) -> float:
        seen.append((shingle, count))
        return 2.0 if "b" in shingle else 1.0

    fp = Fingerprinter(
        "default",
        normalize=str.upper,
        tokenizer=str.split,
        hash=fnv1a64,
        weighting=weigh,
        window=2,
    )
    assert fp.fingerprint("a b c a b") == fp.fingerprint_many(["a b c a b"])[0]
    assert ("A B", 2) in seen and ("B C", 1) in seen


def test_bad_options():
    with pytest.raises(ValueError, match="unknown preset"):
        Fingerprinter("nope")
    with pytest.raises(TypeError, match="unknown Fingerprinter option"):
        Fingerprinter(widow=3)
    with pytest.raises(ValueError, match="window"):
        Fingerprinter(window=0)
    with pytest.raises(ValueError, match="unknown tokenizer"):
        Fingerprinter(tokenizer="spaces")
    with pytest.raises(ValueError, match="unknown weighting"):
        Fingerprinter(weighting="tfidf")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        Fingerprinter().fingerprint(b"\xff\xfe")
    with pytest.raises(TypeError, match="must be str or bytes"):
        Fingerprinter().fingerprint_many(["ok", 3])  # type: ignore[list-item]


# ---- the kernel pipeline against the pure-Python pipeline (tests/naive.py) -------------------

ALPHABET = st.one_of(
    st.characters(exclude_categories=()),  # surrogates included
    st.sampled_from(
        list(
            "abc ABC.,\n1 \0é日本ภา\u0e48ЖΣσςß\u0301\u0316ﬁＡｶﾞ①Ⅻ가\u1100\u1161\u11a8İı"
            "\U0001f600\U00020000\ufdfa\u3099\uff9e\ud800\udc00"
        )
    ),
)
OPTIONS = st.fixed_dictionaries(
    {
        "normalize": st.sampled_from(["none", "casefold", "nfkc", "nfkc_casefold"]),
        "tokenizer": st.sampled_from(["ascii_letters", "unicode", "unicode_words"]),
        "window": st.integers(1, 4),
        "hash": st.sampled_from(["jenkins", "fnv1a64"]),
        "shingle": st.sampled_from(["chain", "cyclic"]),
        "weighting": st.sampled_from(["count", "unique", "log"]),
        "bit_order": st.sampled_from(["natural", "reversed"]),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=60), max_size=6), OPTIONS)
@pytest.mark.slow
def test_kernels_match_naive_pipeline(texts, options):
    fp = Fingerprinter("default", **options)
    want = [naive_fingerprint(t, **options) for t in texts]
    assert fp.fingerprint_many(texts, threads=1).tolist() == want
    assert [fp.fingerprint(t) for t in texts] == want
    # the same text as UTF-8 bytes (where it is valid UTF-8)
    raw = [t.encode("utf-8") for t in texts if not any(0xD800 <= ord(c) < 0xE000 for c in t)]
    want_raw = [naive_fingerprint(b, **options) for b in raw]
    assert fp.fingerprint_many(raw, threads=1).tolist() == want_raw


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=200), min_size=1, max_size=30))
@pytest.mark.slow
def test_presets_match_naive_pipeline(texts):
    default = Fingerprinter("default").fingerprint_many(texts, threads=2)
    assert default.tolist() == [naive_fingerprint(t) for t in texts]
    reference = Fingerprinter("reference").fingerprint_many(texts, threads=2)
    assert reference.tolist() == [naive_fingerprint(t, **FINGERPRINT_REFERENCE) for t in texts]


@pytest.mark.slow
def test_naive_pipeline_pinned_values():
    assert naive_fingerprint(JABBERWOCKY, **FINGERPRINT_REFERENCE) == JABBERWOCKY_SIMHASH
    assert naive_fingerprint("Hello, WORLD") == fingerprint("hello world")


def test_concurrent_callers_get_the_same_fingerprints(monkeypatch):
    # fingerprint_many from several threads at once (say a reader pipeline and an indexer)
    from concurrent.futures import ThreadPoolExecutor

    from neardup.fingerprints import batch as fbatch

    monkeypatch.setattr(fbatch, "FINGERPRINT_CHUNK_DOCS", 16)
    texts = [f"Dokument {i}: Grüße, ＡＢＣ {'日本語' * (i % 5)} ﬁn {i % 7}" for i in range(400)]
    fp = Fingerprinter()
    expected = [fp.fingerprint(t) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda k: fp.fingerprint_many(texts, threads=1 + k % 3), range(8)))
    assert all(r.tolist() == expected for r in runs)


def test_every_kernel_is_cached_and_releases_the_gil():
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    from neardup.fingerprints import _kernels, _normalize, _pipeline

    kernels = [
        (mod.__name__, name, obj)
        for mod in (_kernels, _normalize, _pipeline)
        for name, obj in vars(mod).items()
        if isinstance(obj, CPUDispatcher)
    ]
    assert len(kernels) > 30
    for spec in (
        _pipeline.Spec(_pipeline.ANY, _pipeline.ANY, _pipeline.ANY, True, True, True, True),
        _pipeline.Spec(_pipeline.TOKENS_ASCII, K.HASH_JENKINS, 0, False, False, False, False),
    ):
        kernels.append(("chunk_kernel", str(spec), _pipeline.chunk_kernel(spec)))
    for mod, name, k in kernels:
        assert k.targetoptions.get("nogil") is True, f"{mod}.{name} holds the GIL"
        assert not isinstance(k._cache, NullCache), f"{mod}.{name} is not cached"


# Documents of each kind a chunk holds: ASCII, UTF-16 (str with non-ASCII), UTF-8 (bytes).
KIND_TEXTS = {
    "ascii": ["The quick brown fox", "the QUICK brown fox!", "", "x", "NUL\0ends it"],
    "utf16": ["Grüße aus Köln", "ＡＢＣ ﬁne", "日本語のテキスト", "plain ascii", "\U0001f600 ok"],
    "utf8": ["Grüße aus Köln".encode(), "caf\xc3\xa9 au lait".encode("latin-1"), b"ascii too"],
}


@pytest.mark.parametrize(
    "options",
    [
        {},  # the default preset's families: a kernel of their own
        {"normalize": "none", "tokenizer": "ascii_letters", "hash": "jenkins"},  # reference's
        {"normalize": "nfkc", "tokenizer": "ascii_letters", "hash": "jenkins"},
        {"hash": "jenkins", "weighting": "log", "shingle": "cyclic"},  # run-time choices
    ],
)
@pytest.mark.slow
def test_kernel_variants_agree(options):
    # Each chunk goes through the kernel compiled for its options and kinds of text, and
    # through kernels that accept more: one for every kind, and the run-time choosing one.
    from neardup.fingerprints import _pipeline as P
    from neardup.fingerprints.batch import encode_chunk

    fp = Fingerprinter("default", **options)
    for texts in KIND_TEXTS.values():
        want_fps = [naive_fingerprint(t, **options) for t in texts]
        want_keys = [naive_shingle_keys(t, **options) for t in texts]
        chunk = encode_chunk(texts, 0, fp._spec.normalize)
        kernel, classes, tables = fp._kernel(chunk, True)
        every = fp._spec._replace(keys=True, utf8=fp._spec.normalize, utf16=True)
        generic = every._replace(tokens=P.ANY, hash_code=P.ANY, collapse=P.ANY)
        for k in (kernel, P.chunk_kernel(every), P.chunk_kernel(generic)):
            out = np.zeros(len(texts), dtype=np.uint64)
            key_off = np.zeros(len(texts) + 1, dtype=np.int64)
            keys = k(chunk, classes, tables, fp._opt, out, key_off)
            assert out.tolist() == want_fps
            got = [keys[key_off[i] : key_off[i + 1]].tolist() for i in range(len(texts))]
            assert got == want_keys


@pytest.mark.slow
def test_presets_compile_only_the_stages_they_use(tmp_path):
    # A first run on ASCII text with the default preset compiles neither the normalization nor
    # the other tokenizer, hash or weighting (a fresh numba cache in a fresh process).
    script = (
        "import numba.core.event as ev\n"
        "from neardup.fingerprints import Fingerprinter\n"
        "names = set()\n"
        "class L(ev.Listener):\n"
        "    def on_start(self, e): names.add(e.data['dispatcher'].py_func.__name__)\n"
        "    def on_end(self, e): pass\n"
        "ev.register('numba:compile', L())\n"
        "Fingerprinter('default').features_many(['The quick brown fox', 'jumps over'])\n"
        "print(sorted(names))\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=600, check=True)  # fmt: skip
    compiled = set(ast.literal_eval(r.stdout.strip().splitlines()[-1]))
    chunk = {n for n in compiled if n.startswith("_fingerprint_chunk_")}  # one name per variant
    assert len(chunk) == 1 and {"_tokens_unicode", "fnv1a64", "_radix_sort"} <= compiled
    unused = {"_normalize_doc", "_nfkc_segment", "_char_to_unit_offsets", "_tokens_ascii",
              "jenkins64_bytes", "lookup3_2", "_weigh_sorted", "tally_weighted", "run_quicksort"}  # fmt: skip
    assert not compiled & unused


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 2**32 - 1), max_size=300),
    st.sampled_from([4, 8]),
    st.integers(0, 3),
)
def test_radix_sort_sorts(values, nbytes, spread):
    # narrow values (the same high bytes: passes skipped) and wide ones (every pass)
    a = np.array(values, dtype=np.uint64) >> np.uint64(8 * spread)
    if nbytes == 8:
        a = (a << np.uint64(32)) | (a * np.uint64(2654435761) & np.uint64(0xFFFFFFFF))
    want = np.sort(a)
    tmp = np.empty(len(a) + 1, dtype=np.uint64)
    K._radix_sort(a, np.int64(len(a)), np.int64(nbytes), tmp, np.empty(256 * nbytes, np.int64))
    assert a.tolist() == want.tolist()


@pytest.mark.slow
def test_callable_normalize_with_builtin_stages_runs_the_kernels():
    texts = ["Grüße aus Köln", "ＡＢＣ ﬁ", b"bytes doc", "a\ud800b", ""]
    fast = Fingerprinter("default", normalize=str.upper)
    slow = Fingerprinter("default", normalize=str.upper, tokenizer=unicode_tokens)
    assert fast._fast and not slow._fast
    assert fast.fingerprint_many(texts).tolist() == slow.fingerprint_many(texts).tolist()
    assert [fast.fingerprint(t) for t in texts] == slow.fingerprint_many(texts).tolist()


# ---- shingle keys for verification ------------------------------------------------------------


def _key_sets(features):
    off, keys = features.offsets, features.keys
    return [keys[off[i] : off[i + 1]].tolist() for i in range(len(off) - 1)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=80), max_size=6), OPTIONS)
@pytest.mark.slow
def test_features_many_match_naive_pipeline(texts, options):
    fp = Fingerprinter("default", **options)
    f = fp.features_many(texts, threads=1)
    assert f.fingerprints.dtype == np.uint64 and f.offsets.dtype == np.int64
    assert f.keys.dtype == np.uint32 and f.offsets.shape == (len(texts) + 1,)
    assert f.fingerprints.tolist() == fp.fingerprint_many(texts, threads=1).tolist()
    assert _key_sets(f) == [naive_shingle_keys(t, **options) for t in texts]


@pytest.mark.slow
def test_features_many_chunks_threads_and_python_path(monkeypatch):
    from neardup.fingerprints import batch as fbatch

    texts = [f"Dokument {i}: Grüße {'日本語' * (i % 4)} word{i % 9} ＡＢＣ" for i in range(300)]
    texts += ["", "x", b"bytes are text too"]
    want = [naive_shingle_keys(t) for t in texts]
    fp = Fingerprinter()
    monkeypatch.setattr(fbatch, "FINGERPRINT_CHUNK_DOCS", 7)
    for threads in (1, 3):
        f = fp.features_many(iter(texts), threads=threads)
        assert _key_sets(f) == want
        assert f.fingerprints.tolist() == [naive_fingerprint(t) for t in texts]
    slow = Fingerprinter("default", tokenizer=unicode_tokens)
    assert _key_sets(slow.features_many(texts)) == want
    empty = fp.features_many([])
    assert empty.offsets.tolist() == [0] and empty.keys.shape == (0,)
    assert slow.features_many([]).offsets.tolist() == [0]


def test_features_many_keys_are_sorted_unique_top_bits():
    text = "the cat sat on the mat the cat sat on the mat again"
    f = Fingerprinter().features_many([text])
    keys = f.keys.tolist()
    assert keys == sorted(set(keys)) and len(keys) == 7  # 11 shingles, 7 distinct
    fp = Fingerprinter("default", window=1)
    one = fp.features_many(["word"]).keys.tolist()
    assert one == [naive_shingle_keys("word", window=1)[0]]
