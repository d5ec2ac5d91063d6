"""``rpc-serve`` driven by swh-scheduler's own client (``/swh/``).

The reference's client (``swh-scheduler`` 3.6.0 and swh-core) runs in a
virtual environment of its own, never this one (its ``swh`` script would
replace ours): ``SWH_REFERENCE_VENV`` if set, else one made once in
``~/.cache/swh_like_scheduler/refvenv`` (pip, a minute or two; ``.ci/run``
makes it before the suite, and the test workers make it under a file
lock). Without it the tests skip, and fail under ``CI``. Each test writes
a script, runs it with that environment's python against a real
``swh scheduler rpc-serve`` (SQLite and PostgreSQL), and reads what the
client got back (class names and values) from the script's JSON.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgpack
import pytest
import services
from waiting import wait_until

from swh_like_scheduler.api.swh_methods import ENDPOINTS, UNSERVED

SWH = str(Path(sys.executable).with_name("swh"))
REFERENCE = "swh-scheduler==3.6.0"
VENV_ENV = "SWH_REFERENCE_VENV"
CACHED = Path.home() / ".cache" / "swh_like_scheduler" / "refvenv"
#: how long making the reference's environment may take (pip, from the index)
INSTALL_TIMEOUT = 900
RW = "swh-rpc-rw-secret-0123456789"
RO = "swh-rpc-ro-secret-0123456789"


def _has_client(venv: Path) -> bool:
    python = venv / "bin" / "python"
    if not python.exists():
        return False
    probe = [str(python), "-c", "import swh.scheduler.api.client"]
    return subprocess.run(probe, capture_output=True, timeout=120).returncode == 0


def _reference_python() -> str:
    """The python of an environment with the reference's client, made if need be."""
    given = os.environ.get(VENV_ENV)
    venv = Path(given) if given else CACHED
    if _has_client(venv):
        return str(venv / "bin" / "python")
    venv.parent.mkdir(parents=True, exist_ok=True)
    # one maker at a time (the suite's workers each ask for it)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _has_client(venv):
            _make(venv)
    if not _has_client(venv):
        raise services.ServiceUnavailable(f"{REFERENCE} installed in {venv} does not import")
    return str(venv / "bin" / "python")


def _make(venv: Path) -> None:
    try:
        subprocess.run(
            ["python3", "-m", "venv", "--clear", str(venv)], check=True, capture_output=True
        )
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", REFERENCE],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        raise services.ServiceUnavailable(
            f"no environment with {REFERENCE} ({error}; {detail.decode(errors='replace')[-500:]})"
        ) from None


@pytest.fixture(scope="session")
def reference_python() -> str:
    return services.require(REFERENCE, _reference_python)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[str]:
    """``rpc-serve`` with a read-write and a read-only token; its ``/swh/`` url."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    command = [SWH, "scheduler", "--db-url", db_url, "rpc-serve", "--port", str(port)]
    command += ["--tokens", f"{RW}:rw,{RO}:ro"]
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out, env=env)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(f"{url}/health").status_code in (200, 503)
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, 60, "the server to start")
        yield f"{url}/swh/"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


#: the script's start: the client with each token, and how results are shown
PRELUDE = """
import datetime, json, sys, uuid
from swh.scheduler import get_scheduler
from swh.scheduler.exc import SchedulerException, StaleData, UnknownPolicy
from swh.scheduler.model import (
    LastVisitStatus, ListedOrigin, OriginVisitStats, Task, TaskArguments, TaskType,
)

URL = sys.argv[1]
def client(token):
    headers = {} if token is None else {"Authorization": "Bearer " + token}
    return get_scheduler("remote", url=URL, session_kwargs={"headers": headers})

rw, ro, anonymous = client(sys.argv[2]), client(sys.argv[3]), client(None)
UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = datetime.datetime.now(UTC) + datetime.timedelta(hours=1)  # past first_seen
out = {}

def shown(value):
    if isinstance(value, list):
        return [shown(v) for v in value]
    if hasattr(value, "to_dict"):
        fields = {k: shown(v) for k, v in value.to_dict(recurse=False).items()}
        return {"class": type(value).__module__ + "." + type(value).__name__, **fields}
    if isinstance(value, (datetime.datetime, datetime.timedelta, uuid.UUID)):
        return {"class": type(value).__name__, "value": str(value)}
    if isinstance(value, bytes):
        return {"class": "bytes", "value": value.hex()}
    if hasattr(value, "value") and hasattr(value, "name"):  # an enum
        return {"class": type(value).__name__, "value": value.value}
    return value

def raised(call):
    try:
        call()
    except Exception as error:
        return {"class": type(error).__module__ + "." + type(error).__name__,
                "message": str(error)}
    return None
"""


def _run(python: str, url: str, body: str, tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "client.py"
    script.write_text(PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n")
    done = subprocess.run(
        [python, str(script), url, RW, RO], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


MODEL = "swh.scheduler.model."


def test_listers_origins_stats_and_metrics_through_the_reference_client(
    reference_python: str, server: str, tmp_path: Path
) -> None:
    out = _run(
        reference_python,
        server,
        """
        lister = rw.get_or_create_lister(name="gitlab", instance_name="inria")
        out["lister"] = shown(lister)
        out["again"] = rw.get_or_create_lister(name="gitlab", instance_name="inria") == lister
        out["get"] = shown(ro.get_lister("gitlab", "inria"))
        out["missing"] = ro.get_lister("gitlab", "nowhere")
        out["by_id"] = [x.name for x in ro.get_listers_by_id([str(lister.id)])]
        out["listers"] = shown(ro.get_listers())
        updated = rw.update_lister(lister.evolve(current_state={"page": 3}))
        out["updated"] = shown(updated)
        out["stale"] = raised(lambda: rw.update_lister(lister.evolve(current_state={"p": 0})))
        rw.create_task_type(TaskType(type="load-git", description="git loader",
                                     backend_name="swh.loader.git.tasks.UpdateGitRepository"))
        origins = [ListedOrigin(lister_id=lister.id, url=f"https://forge.example/r{i}",
                                visit_type="git", last_update=NOW - datetime.timedelta(days=i),
                                extra_loader_arguments={"n": i})
                   for i in range(5)]
        out["recorded"] = shown(rw.record_listed_origins(origins))
        first = ro.get_listed_origins(lister_id=lister.id, limit=2)
        out["page1"] = shown(first.results)
        out["page1_class"] = type(first).__name__
        second = ro.get_listed_origins(lister_id=lister.id, limit=2,
                                       page_token=first.next_page_token)
        out["page2"] = [o.url for o in second.results]
        out["by_url"] = [o.url for o in ro.get_listed_origins(
            urls=["https://forge.example/r4"]).results]
        out["grabs"] = {}
        for policy in ("oldest_scheduled_first", "never_visited_oldest_update_first",
                       "stop_after_success", "deadline"):
            out["grabs"][policy] = [o.url for o in rw.grab_next_visits(
                "git", 2, policy, timestamp=LATER, dry_run=True)]
        out["first_visits"] = [o.url for o in rw.grab_next_visits(
            "git", 10, "first_visits_after_listing", lister_uuid=str(lister.id),
            timestamp=LATER, dry_run=True)]
        grabbed = rw.grab_next_visits("git", 2, "oldest_scheduled_first", timestamp=LATER,
                                      lister_name="gitlab", lister_instance_name="inria")
        out["grabbed"] = shown(grabbed)
        out["no_such_lister"] = rw.grab_next_visits("git", 2, "oldest_scheduled_first",
                                                    lister_name="nobody", timestamp=LATER)
        out["unknown_policy"] = raised(lambda: rw.grab_next_visits("git", 1, "fastest"))
        out["tablesample"] = raised(lambda: rw.grab_next_visits(
            "git", 1, "oldest_scheduled_first", tablesample=0.5))
        rw.origin_visit_stats_upsert([OriginVisitStats(
            url="https://forge.example/r1", visit_type="git", last_visit=NOW,
            last_successful=NOW, last_visit_status=LastVisitStatus.successful,
            last_snapshot=bytes(range(20)), next_visit_queue_position=86400 * 400,
            next_position_offset=5, successive_visits=2)])
        out["stats"] = shown(ro.origin_visit_stats_get(
            [("https://forge.example/r1", "git"), ("https://forge.example/none", "git")]))
        out["metrics_update"] = shown(rw.update_metrics(lister_id=lister.id, timestamp=NOW))
        out["metrics"] = shown(ro.get_metrics(lister_id=lister.id, visit_type="git"))
        out["visit_types"] = ro.get_visit_types_for_listed_origins(lister)
        out["positions_before"] = ro.visit_scheduler_queue_position_get()
        rw.visit_scheduler_queue_position_set("git", 86400 * 10)
        out["positions"] = ro.visit_scheduler_queue_position_get()
        out["set_read_only"] = raised(lambda: ro.visit_scheduler_queue_position_set("git", 0))
        out["set_bad"] = raised(lambda: rw.visit_scheduler_queue_position_set("git", "soon"))
        pending = rw.get_or_create_lister(name="cgit", first_visits_queue_prefix="cgit-first")
        rw.update_lister(pending.evolve(last_listing_finished_at=NOW))
        rw.get_or_create_lister(name="cgit", instance_name="other")
        out["with_first"] = [(x.name, x.first_visits_queue_prefix)
                             for x in ro.get_listers(with_first_visits_to_schedule=True)]
        out["two_instances"] = raised(lambda: rw.grab_next_visits(
            "git", 1, "oldest_scheduled_first", lister_name="cgit", timestamp=LATER))
        """,
        tmp_path,
    )
    lister = out["lister"]
    assert lister["class"] == MODEL + "Lister"
    assert lister["id"]["class"] == "UUID" and lister["created"]["class"] == "datetime"
    assert (lister["name"], lister["instance_name"], lister["current_state"]) == (
        "gitlab",
        "inria",
        {},
    )
    assert out["again"] is True and out["get"] == lister and out["missing"] is None
    assert out["by_id"] == ["gitlab"] and out["listers"] == [lister]
    assert out["updated"]["current_state"] == {"page": 3}
    assert out["updated"]["updated"] != lister["updated"]
    assert out["stale"]["class"] == "swh.scheduler.exc.StaleData"
    assert "read it again" in out["stale"]["message"]

    recorded = out["recorded"]
    assert [o["class"] for o in recorded] == [MODEL + "ListedOrigin"] * 5
    assert recorded[2]["extra_loader_arguments"] == {"n": 2}
    assert recorded[2]["lister_id"] == lister["id"] and recorded[2]["enabled"] is True
    assert recorded[0]["first_seen"]["class"] == "datetime"
    assert out["page1_class"] == "PagedResult"
    assert [o["url"] for o in out["page1"]] == [
        "https://forge.example/r0",
        "https://forge.example/r1",
    ]
    assert out["page2"] == ["https://forge.example/r2", "https://forge.example/r3"]
    assert out["by_url"] == ["https://forge.example/r4"]

    grabs = out["grabs"]
    assert all(len(urls) == 2 for urls in grabs.values()), grabs
    # the oldest forge date first: r4 is four days old
    assert grabs["never_visited_oldest_update_first"] == [
        "https://forge.example/r4",
        "https://forge.example/r3",
    ]
    assert sorted(out["first_visits"]) == [f"https://forge.example/r{i}" for i in range(5)]
    assert [o["class"] for o in out["grabbed"]] == [MODEL + "ListedOrigin"] * 2
    assert out["no_such_lister"] == []
    assert out["unknown_policy"]["class"] == "swh.scheduler.exc.UnknownPolicy"
    assert "'fastest' is not a policy" in out["unknown_policy"]["message"]
    assert out["tablesample"]["class"] == "swh.scheduler.exc.SchedulerException"
    assert "tablesample" in out["tablesample"]["message"]

    [stats] = out["stats"]
    assert stats["class"] == MODEL + "OriginVisitStats"
    assert stats["last_visit_status"] == {"class": "LastVisitStatus", "value": "successful"}
    assert stats["last_snapshot"] == {"class": "bytes", "value": bytes(range(20)).hex()}
    assert stats["next_visit_queue_position"] == 86400 * 400
    assert (stats["next_position_offset"], stats["successive_visits"]) == (5, 2)

    [metrics] = out["metrics_update"]
    assert metrics["class"] == MODEL + "SchedulerMetrics"
    assert (metrics["origins_known"], metrics["origins_enabled"]) == (5, 5)
    assert metrics["lister_id"] == lister["id"]
    assert out["metrics"] == out["metrics_update"]
    assert out["visit_types"] == ["git"]
    # no grab of origins_without_last_update yet: no position
    assert out["positions_before"] == {}
    assert out["positions"] == {"git": 86400 * 10}
    assert out["set_read_only"]["class"] == "swh.scheduler.exc.SchedulerException"
    assert out["set_bad"]["class"] == "swh.scheduler.exc.SchedulerException"
    assert "position" in out["set_bad"]["message"]
    assert out["with_first"] == [["cgit", "cgit-first"]]
    assert out["two_instances"]["class"] == "swh.scheduler.exc.SchedulerException"
    assert "lister_instance_name" in out["two_instances"]["message"]


def test_task_types_and_tasks_through_the_reference_client(
    reference_python: str, server: str, tmp_path: Path
) -> None:
    out = _run(
        reference_python,
        server,
        """
        day = datetime.timedelta(days=1)
        rw.create_task_type(TaskType(
            type="load-svn", description="svn loader", backend_name="swh.loader.svn.Load",
            default_interval=day, min_interval=day / 2, max_interval=day * 64,
            backoff_factor=2.0, num_retries=3, retry_delay=datetime.timedelta(minutes=10)))
        rw.create_task_type(TaskType(type="load-svn", description="again",
                                     backend_name="other"))  # the reference ignores it
        out["type"] = shown(ro.get_task_type("load-svn"))
        out["missing_type"] = ro.get_task_type("load-none")
        out["types"] = [t.type for t in ro.get_task_types()]
        created = rw.create_tasks([
            Task(type="load-svn", next_run=NOW,
                 arguments=TaskArguments(args=["a"], kwargs={"url": "svn://svn.example/a"})),
            Task(type="load-svn", next_run=NOW, policy="oneshot", priority="high",
                 arguments=TaskArguments(args=[], kwargs={"url": "svn://svn.example/b"})),
        ])
        out["created"] = shown(created)
        ids = [t.id for t in created]
        out["get"] = shown(ro.get_tasks(ids))
        out["search_type"] = [t.id for t in ro.search_tasks(task_type="load-svn")]
        out["search_oneshot"] = [t.id for t in ro.search_tasks(policy="oneshot")]
        out["search_high"] = [t.id for t in ro.search_tasks(priority=["high", "low"])]
        out["search_status"] = [t.id for t in ro.search_tasks(
            status="next_run_not_scheduled", limit=1)]
        out["search_id"] = [t.id for t in ro.search_tasks(task_id=ids[1])]
        out["search_after"] = [t.id for t in ro.search_tasks(
            after=NOW + datetime.timedelta(days=400))]
        rw.disable_tasks([ids[0]])
        out["disabled"] = [t.status for t in ro.search_tasks(status="disabled")]
        out["unknown_type"] = raised(lambda: rw.create_tasks([Task(
            type="load-none", next_run=NOW, arguments=TaskArguments(args=[], kwargs={}))]))
        out["runner"] = raised(lambda: rw.grab_ready_tasks("load-svn"))
        out["runs"] = raised(lambda: ro.get_task_runs([ids[0]]))
        out["read_only_writes"] = raised(lambda: ro.disable_tasks([ids[1]]))
        out["anonymous"] = raised(lambda: anonymous.get_task_types())
        out["too_large"] = raised(lambda: ro.search_tasks(limit=5000))
        out["long_ids"] = raised(lambda: ro.get_tasks(list(range(1, 2000))))
        out["huge_read_body"] = raised(lambda: ro.get_tasks(list(range(2**40, 2**40 + 300000))))
        """,
        tmp_path,
    )
    task_type = out["type"]
    assert task_type["class"] == MODEL + "TaskType"
    assert task_type["description"] == "svn loader"  # the second create left it
    assert task_type["default_interval"] == {"class": "timedelta", "value": "1 day, 0:00:00"}
    assert (task_type["backoff_factor"], task_type["num_retries"]) == (2.0, 3)
    assert task_type["retry_delay"]["value"] == "0:10:00"
    assert out["missing_type"] is None and out["types"] == ["load-svn"]

    recurring, oneshot = out["created"]
    assert recurring["class"] == oneshot["class"] == MODEL + "Task"
    assert recurring["arguments"]["class"] == MODEL + "TaskArguments"
    assert recurring["arguments"]["args"] == ["a"]
    assert recurring["arguments"]["kwargs"] == {"url": "svn://svn.example/a"}
    assert (recurring["policy"], recurring["status"]) == ("recurring", "next_run_not_scheduled")
    assert recurring["current_interval"]["value"] == "1 day, 0:00:00"
    assert (oneshot["policy"], oneshot["priority"]) == ("oneshot", "high")
    assert recurring["next_run"]["value"] == "2026-03-01 12:00:00+00:00"
    ids = [recurring["id"], oneshot["id"]]
    assert out["get"] == out["created"]
    assert out["search_type"] == ids
    assert out["search_oneshot"] == [ids[1]] and out["search_high"] == [ids[1]]
    assert out["search_status"] == [ids[0]] and out["search_id"] == [ids[1]]
    assert out["search_after"] == []
    assert out["disabled"] == ["disabled"]
    assert out["unknown_type"]["class"] == "swh.scheduler.exc.SchedulerException"
    assert "tasks[0].type" in out["unknown_type"]["message"]
    for name in ("runner", "runs"):
        assert out[name]["class"] == "swh.scheduler.exc.SchedulerException"
        assert "is not served by swh_like_scheduler" in out[name]["message"]
    assert out["read_only_writes"]["message"] == "this token may only read"
    assert "bearer token is required" in out["anonymous"]["message"]
    assert "limit" in out["too_large"]["message"]
    assert "task_ids: names at most 1,000 per call" in out["long_ids"]["message"]
    # a read takes the plain body limit (2 MB), refused before it is read
    assert out["huge_read_body"]["class"] == "swh.scheduler.exc.SchedulerException"
    assert "request body larger than" in out["huge_read_body"]["message"]


def test_every_method_of_the_interface_answers_and_none_is_a_404(
    reference_python: str, server: str, tmp_path: Path
) -> None:
    """Walked from the reference's own SchedulerInterface, so a method it
    adds cannot be forgotten: each path answers (served, or refused with the
    reference's exception), never the client's '404 not found'."""
    out = _run(
        reference_python,
        server,
        """
        from swh.scheduler.interface import SchedulerInterface
        out["paths"] = {}
        for name, method in vars(SchedulerInterface).items():
            path = getattr(method, "_endpoint_path", None)
            if path is None:
                continue
            answer = rw.session.post(URL + path, data=b"\\x80",
                                     headers={"content-type": "application/x-msgpack"})
            out["paths"][path] = [name, answer.status_code, answer.headers["content-type"]]
        """,
        tmp_path,
    )
    paths = out["paths"]
    # every method of the reference is served here or refused with why
    assert set(paths) == set(ENDPOINTS) | set(UNSERVED)
    for path, (name, status, kind) in paths.items():
        assert kind == "application/x-msgpack", (path, kind)
        if path in UNSERVED:
            assert (UNSERVED[path][0], status) == (name, 400), path
        else:  # an empty map: served (a read without arguments) or refused naming one
            assert ENDPOINTS[path].method == name, path
            assert status == 200 or (400 <= status < 500 and status != 404), (path, status)


def _post(url: str, body: bytes, token: str = RW) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-msgpack"}
    return httpx.post(url, content=body, headers=headers, timeout=30)


def _refusal(answer: httpx.Response) -> dict[str, Any]:
    assert answer.headers["content-type"] == "application/x-msgpack"
    found: dict[str, Any] = msgpack.unpackb(answer.content)
    assert found["module"] == "swh.scheduler.exc", found
    return found


def test_a_hostile_body_is_a_4xx_in_the_reference_s_form_and_writes_nothing(
    server: str,
) -> None:
    """No reference install needed: the bodies are made here. Each is
    refused with a 4xx the client re-raises as SchedulerException, and the
    lister it would have created is not there after."""
    create = f"{server}lister/get_or_create"
    far = msgpack.packb({"name": "x", "instance_name": msgpack.Timestamp(2**62, 0)})
    bodies = {
        "not msgpack": b"\xc1\xc1",
        "a date past any calendar": far,
        "an integer of 100 bytes": msgpack.packb(
            {"name": "x", "first_visits_queue_prefix": msgpack.ExtType(1, b"\x01" * 100)}
        ),
        "a 64-bit integer where a text goes": msgpack.packb({"name": 2**63 - 1}),
        "nesting 10,000 deep": b"\x81\xa4name" + b"\x91" * 10_000 + b"\xc0",
        "nesting 500 deep": b"\x81\xa4name" + b"\x91" * 500 + b"\xc0",
        "an unknown argument": msgpack.packb({"name": "x", "colour": "red"}),
        "a list, not a map": msgpack.packb(["x"]),
        "no name": msgpack.packb({}),
        "a NUL in the name": msgpack.packb({"name": "x\x00y"}),
    }
    for what, body in bodies.items():
        answer = _post(create, body)
        assert 400 <= answer.status_code < 500, (what, answer.status_code, answer.content)
        refused = _refusal(answer)
        assert refused["type"] == "SchedulerException", (what, refused)
        assert refused["args"] == [refused["message"]] and refused["message"], what
    listers = _post(f"{server}listers/get", msgpack.packb({}), RO)
    assert listers.status_code == 200 and msgpack.unpackb(listers.content) == []
    # JSON is not what the client sends: 415, in the client's form
    answer = httpx.post(
        create, json={"name": "x"}, headers={"Authorization": f"Bearer {RW}"}, timeout=30
    )
    assert answer.status_code == 415 and "application/x-msgpack" in _refusal(answer)["message"]
    # a path that is no method of the interface: a refusal, not the client's bare 404
    unknown = _refusal(_post(f"{server}task/explode", b""))
    assert "no method of swh-scheduler's SchedulerInterface" in unknown["message"]
