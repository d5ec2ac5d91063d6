"""The calls the self-fence relies on never keep their caller waiting past
its bound (:class:`swh_like_scheduler.worker.fencing.BoundedCalls`), and the
clock it counts on keeps counting (:func:`local_clock`)."""

from __future__ import annotations

import threading
import time

import pytest

from swh_like_scheduler.worker.fencing import BoundedCalls, CallTimeout, local_clock


def test_a_call_answers_or_raises_what_it_raised() -> None:
    calls = BoundedCalls("test-calls")
    assert calls.call(lambda: 42, 1.0) == 42
    with pytest.raises(ZeroDivisionError):
        calls.call(lambda: 1 / 0, 1.0)
    calls.close()


def test_a_call_that_hangs_is_given_up_in_time_and_holds_up_the_next_ones() -> None:
    calls = BoundedCalls("test-calls")
    release = threading.Event()
    began = time.monotonic()
    with pytest.raises(CallTimeout):
        calls.call(release.wait, 0.2)  # a database whose connection hangs
    assert time.monotonic() - began < 1.0
    with pytest.raises(CallTimeout):
        calls.call(lambda: 1, 0.1)  # queued behind it: not made in time, never made
    release.set()
    assert calls.call(lambda: 2, 5.0) == 2  # answering again
    calls.close()


def test_closed_calls_end_their_thread_and_start_another_when_needed() -> None:
    calls = BoundedCalls("test-calls-close")
    assert calls.call(threading.current_thread, 1.0).name == "test-calls-close"
    first = calls.call(threading.current_thread, 1.0)
    calls.close()
    first.join(2)
    assert not first.is_alive()
    second = calls.call(threading.current_thread, 1.0)
    assert second is not first and second.is_alive()
    calls.close()


def test_the_local_clock_is_monotonic_and_counts_seconds() -> None:
    one = local_clock()
    time.sleep(0.05)
    two = local_clock()
    assert 0.04 <= two - one < 1.0
