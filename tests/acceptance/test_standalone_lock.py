"""``swh scheduler standalone``: one per database (its lock), and children
that exit on their own are started again. The real entry point, real
processes; and the lock's and the restarts' logic one step at a time."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from standalone_run import assert_nothing_left, children, clean_env, processes_of, start, wait_for

from swh_like_scheduler.standalone.lock import (
    STANDALONE_LOCK,
    DatabaseLock,
    Holder,
    StandaloneRunning,
    holder_gone,
)
from swh_like_scheduler.standalone.restarts import RestartPolicy, Restarts, exit_text
from swh_like_scheduler.store import SQLAlchemyStore, migrations

QUICK = ("--no-api", "--no-examples", "--refresh", "0.5")
S = timedelta(seconds=1)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.acceptance
@pytest.mark.timeout(180)
def test_a_second_standalone_on_the_same_database_refuses_and_a_crashed_one_blocks_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    first_dir, second_dir, third_dir = (tmp_path / name for name in ("first", "second", "third"))
    for folder in (first_dir, second_dir, third_dir):
        folder.mkdir()
    first, _ = start(env, first_dir, "--db-url", url, *QUICK)
    try:
        wait_for(lambda: (first_dir / "run" / "children.json").exists(), 60, "the first one")
        first_children = children(first_dir / "run")
        second, _ = start(env, second_dir, "--db-url", url, *QUICK)
        try:
            code = second.wait(timeout=60)
        finally:
            stop(second)
        error = (second_dir / "standalone.err").read_text()
        assert code == 1, error
        assert f"pid {first.pid} on host {socket.gethostname()}" in error, error
        assert "another `swh scheduler standalone`" in error
        # nothing of the second one started
        assert not (second_dir / "run").exists()
        assert processes_of(second_dir / "run") == []
        assert first.poll() is None  # the first one runs on, untouched
        assert all(alive(pid) for pid in first_children.values())
        # the first one crashes: nothing releases its lock
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        # (its children get SIGTERM from the kernel and stop by themselves)
        wait_for(lambda: processes_of(first_dir / "run") == [], 60, "the orphans to stop")
        third, third_out = start(env, third_dir, "--db-url", url, "--duration", "3", *QUICK)
        try:
            code = third.wait(timeout=90)
        finally:
            stop(third)
        error = (third_dir / "standalone.err").read_text()
        assert code == 0, error
        assert "took over the database lock of a standalone that is gone" in error
        assert f":{first.pid}:" in error
        assert "Logs and pids of this run" in third_out.read_text()
        assert_nothing_left(third_dir / "run", children(third_dir / "run"))
    finally:
        stop(first)
    # the lock was released at the end: nobody holds it
    store = SQLAlchemyStore.from_url(url)
    try:
        probe = store.acquire_lock(STANDALONE_LOCK, holder="probe:1:x", ttl=60 * S)
        assert probe.held
    finally:
        store.close()


@pytest.mark.acceptance
@pytest.mark.timeout(180)
def test_a_child_killed_is_started_again(env: dict[str, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    url = f"sqlite:///{tmp_path / 'restart.sqlite'}"
    process, out = start(env, tmp_path, "--db-url", url, *QUICK)
    try:
        wait_for(lambda: (run_dir / "children.json").exists(), 60, "the children to start")
        before = children(run_dir)
        os.killpg(before["listener"], signal.SIGKILL)

        def listener_back() -> bool:
            pid = children(run_dir)["listener"]
            return pid != before["listener"] and alive(pid)

        wait_for(listener_back, 30, "the listener to be started again")
        after = children(run_dir)
        assert process.poll() is None
        assert {k: v for k, v in after.items() if k != "listener"} == {
            k: v for k, v in before.items() if k != "listener"
        }
        wait_for(lambda: "started again" in out.read_text(), 10, "the table's note")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        stop(process)
    text = out.read_text()
    error = (tmp_path / "standalone.err").read_text()
    assert code == 0, error
    said = f"listener (pid {before['listener']}) exited on its own, killed by SIGKILL (signal 9)"
    assert said in text and said in error
    assert "starting it again in 1 s (restart 1)" in text
    assert f"listener started again (pid {after['listener']})" in text
    assert_nothing_left(run_dir, after)


# --------------------------------------------------------------------------- #
# the lock and the restarts, one step at a time (no process started)
# --------------------------------------------------------------------------- #


@pytest.fixture
def store(tmp_path: Path) -> SQLAlchemyStore:
    found = SQLAlchemyStore.from_url(f"sqlite:///{tmp_path / 'lock.sqlite'}")
    migrations.upgrade(found.engine)
    return found


def test_holders_are_parsed_and_a_dead_one_of_this_host_is_gone() -> None:
    holder = Holder.parse("box-1.example.org:4242:abc123")
    assert holder == Holder("box-1.example.org", 4242, "abc123")
    assert Holder.parse("nonsense") is None and Holder.parse(None) is None
    assert holder_gone(holder, host="box-1.example.org", alive=lambda pid: False)
    assert not holder_gone(holder, host="box-1.example.org", alive=lambda pid: True)
    assert not holder_gone(holder, host="another", alive=lambda pid: False)  # its expiry decides


def test_the_lock_refuses_a_second_holder_and_is_taken_over_from_a_dead_one(
    store: SQLAlchemyStore,
) -> None:
    first = DatabaseLock(store, "sqlite:///x", holder="here:111:a", host="here")
    first.take()
    living = DatabaseLock(store, "sqlite:///x", holder="here:222:b", host="here", alive=bool)
    with pytest.raises(StandaloneRunning, match="pid 111 on host here"):
        living.take()
    assert first.renew()
    # pid 111 is gone: the next one takes over at once
    taker = DatabaseLock(
        store, "sqlite:///x", holder="here:333:c", host="here", alive=lambda pid: pid != 111
    )
    taker.take()
    assert not first.renew()  # the old holder learns it lost the lock
    # a holder of another host is waited for until its lock expires
    elsewhere = DatabaseLock(store, "sqlite:///x", holder="there:444:d", host="there", ttl=S)
    with pytest.raises(StandaloneRunning, match="pid 333 on host here"):
        elsewhere.take()
    taker.release()
    elsewhere.take()
    short = DatabaseLock(store, "sqlite:///x", holder="there:555:e", host="there", alive=bool)
    deadline = time.monotonic() + 10
    while True:  # the 1 s lease of 444 runs out on the database clock
        try:
            short.take()
            break
        except StandaloneRunning:
            assert time.monotonic() < deadline, "the lock never expired"
            time.sleep(0.2)
    assert short.held


def test_restart_delays_double_up_to_a_minute_and_start_over_after_a_long_run() -> None:
    policy = RestartPolicy()
    delays, previous = [], None
    for _ in range(9):
        previous = policy.delay(previous, uptime=2.0)
        delays.append(previous)
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert policy.delay(60.0, uptime=61.0) == 1.0  # it stayed up: start over
    with pytest.raises(ValueError):
        RestartPolicy(first=0)


def test_restarts_are_planned_once_per_exit_and_come_due() -> None:
    restarts = Restarts(RestartPolicy(first=1, factor=2, longest=4, settled=10))
    planned = restarts.exited("listener", uptime=3, now=100)
    assert (planned.due, planned.delay, planned.restart) == (101, 1, 1)
    assert restarts.exited("listener", uptime=3, now=100.5) is planned  # the same exit
    assert restarts.next_due() == 101
    assert restarts.due(100.9) == []
    assert [p.name for p in restarts.due(101)] == ["listener"]
    assert restarts.pending == {} and restarts.next_due() is None
    again = restarts.exited("listener", uptime=0.5, now=102)
    assert (again.delay, again.restart) == (2, 2)


def test_exits_are_told_by_code_or_signal() -> None:
    assert exit_text(1) == "exit code 1"
    assert exit_text(-9) == "killed by SIGKILL (signal 9)"
    assert exit_text(-15) == "killed by SIGTERM (signal 15)"
