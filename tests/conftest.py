import os
import sys

import pytest
from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))
# every task of a staged dedup may read only the stages its step declares
# (neardup.pipeline.layout), in this process and in the workers and commands it starts
os.environ["NEARDUP_CHECK_LAYOUT"] = "1"

from neardup import config  # noqa: E402

# The first example of a test may compile or load numba kernels, and CI machines are shared:
# correctness, not per-example speed, is what these tests measure.
settings.register_profile("neardup", deadline=None)
settings.load_profile("neardup")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One real redis-server for the module's tests (see tests/servers.py)."""
    from servers import RedisNode

    n = RedisNode(tmp_path_factory.mktemp("redis"))
    yield n
    n.stop()


@pytest.fixture
def few_redis_shards():
    """len() sums one HLEN per id shard: fewer shards keep small Redis indexes quick."""
    config.REDIS_ENTRY_SHARDS = 16
    yield
    config._reset()
