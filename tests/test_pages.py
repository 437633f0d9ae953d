"""neardup.pages: numpy's huge-page advice off inside the blocks that ask, back after the last."""

from __future__ import annotations

import threading

import pytest

from neardup import pages
from neardup.pages import small_pages


def test_small_pages_turns_the_advice_off_and_back_on_after_the_last_block():
    switch = pages._setter()
    if switch is None:
        pytest.skip("this numpy has no switch of the advice")
    before = switch(True)
    try:
        with small_pages():
            with small_pages():  # nested: still off
                assert switch(False) is False  # reading it sets what it already was
            assert switch(False) is False
        assert switch(True) is True  # back on
        inside, go, done = [], threading.Event(), threading.Event()

        def other() -> None:  # a block in another thread, ending after this one's
            with small_pages():
                go.set()
                done.wait(5)
                inside.append(switch(False))

        t = threading.Thread(target=other)
        t.start()
        go.wait(5)
        with small_pages():
            pass
        assert switch(False) is False  # the other thread's block still runs
        done.set()
        t.join(5)
        assert inside == [False] and switch(True) is True
    finally:
        switch(before)
