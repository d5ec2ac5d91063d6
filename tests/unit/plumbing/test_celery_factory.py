"""The platform's Celery app, layer over layer
(:mod:`swh_like_scheduler.plumbing.celery_factory`): the platform's module,
a conventional ``celeryconfig`` when importable, the environment, then the
caller's broker and overrides."""

from __future__ import annotations

import itertools
import math
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from swh_like_scheduler import celeryconfig
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.plumbing.celery_factory import (
    PLATFORM_CONFIG,
    environment_settings,
    make_app,
    module_settings,
)

_names = itertools.count()


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` for the test's own configuration modules
    (each with a name of its own; forgotten after the test)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("swhtestconf"):
            del sys.modules[name]


def write_module(folder: Path, text: str) -> str:
    name = f"swhtestconf_{next(_names)}"
    (folder / f"{name}.py").write_text(text)
    return name


def test_the_platform_settings_are_the_package_modules() -> None:
    assert PLATFORM_CONFIG == "swh_like_scheduler.celeryconfig"
    app = make_app(load_workers=False)
    conf = app.conf
    assert conf.broker_url == celeryconfig.broker_url == "redis://127.0.0.1:6379/0"
    assert (conf.task_acks_late, conf.worker_direct, conf.worker_send_task_events) == (
        True,
        True,
        True,
    )
    assert conf.worker_prefetch_multiplier == 1
    assert conf.get("swh_scheduler_lease_ping") == 10.0


def test_without_the_platform_module_celerys_defaults_stay() -> None:
    conf = make_app(config_module=None, load_workers=False).conf
    assert conf.get("broker_url") is None
    assert conf.task_acks_late is False
    assert conf.get("swh_scheduler_lease_ping") is None


def test_a_user_module_overrides_the_platform_and_keeps_the_rest(modules: Path) -> None:
    name = write_module(
        modules,
        "import os\n"
        "from datetime import timedelta\n"
        "broker_url = 'redis://user/5'\n"
        "task_acks_late = False\n"
        "_private = 'no'\n"
        "def helper():\n    return 1\n"
        "class Routes:\n    pass\n",
    )
    conf = make_app(user_module=name, load_workers=False).conf
    assert conf.broker_url == "redis://user/5"
    assert conf.task_acks_late is False
    assert conf.worker_direct is True  # the platform's, not overridden
    for absent in ("_private", "helper", "Routes", "os", "timedelta"):
        assert absent not in conf, absent


def test_a_missing_user_module_is_skipped(modules: Path) -> None:
    conf = make_app(user_module="swhtestconf_absent_module", load_workers=False).conf
    assert conf.broker_url == celeryconfig.broker_url


def test_a_user_module_that_fails_to_import_something_else_is_an_error(modules: Path) -> None:
    name = write_module(modules, "import swhtestconf_not_installed_either\nbroker_url = 'x'\n")
    with pytest.raises(ModuleNotFoundError) as info:
        make_app(user_module=name, load_workers=False)
    assert info.value.name == "swhtestconf_not_installed_either"
    broken = write_module(modules, "raise RuntimeError('a typo in the config')\n")
    with pytest.raises(RuntimeError, match="a typo in the config"):
        make_app(user_module=broken, load_workers=False)


def test_the_environment_beats_the_user_module(modules: Path) -> None:
    name = write_module(modules, "broker_url = 'redis://user/5'\nresult_backend = 'redis://r/1'\n")
    environ = {
        "SWH_SCHEDULER_BROKER_URL": "redis://env/6",
        "SWH_SCHEDULER_LEASE_PING": "2.5",
        "SWH_SCHEDULER_RESULT_BACKEND": "",  # empty: not given
        "CELERY_ACKS_LATE": "no",  # not ours: ignored
        "PATH": "/bin",
    }
    conf = make_app(user_module=name, environ=environ, load_workers=False).conf
    assert conf.broker_url == "redis://env/6"
    assert conf.result_backend == "redis://r/1"
    assert conf.get("swh_scheduler_lease_ping") == 2.5
    assert conf.task_acks_late is True


def test_the_broker_given_and_overrides_beat_the_environment() -> None:
    environ = {"SWH_SCHEDULER_BROKER_URL": "redis://env/6", "SWH_SCHEDULER_LEASE_PING": "3"}
    conf = make_app(environ=environ, broker_url="redis://given/7", load_workers=False).conf
    assert conf.broker_url == "redis://given/7"
    conf = make_app(
        environ=environ,
        broker_url="redis://given/7",
        load_workers=False,
        swh_scheduler_lease_ping=4.0,
        task_acks_late=False,
    ).conf
    assert conf.get("swh_scheduler_lease_ping") == 4.0
    assert conf.task_acks_late is False


def test_the_environment_is_read_only_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWH_SCHEDULER_BROKER_URL", "redis://process-env/9")
    assert make_app(load_workers=False).conf.broker_url == celeryconfig.broker_url


def test_environment_settings_reads_only_its_variables() -> None:
    assert environment_settings({}) == {}
    assert environment_settings(
        {
            "SWH_SCHEDULER_BROKER_URL": "amqp://b//",
            "SWH_SCHEDULER_RESULT_BACKEND": "redis://r/2",
            "SWH_SCHEDULER_LEASE_PING": "15",
            "SWH_SCHEDULER_DB_URL": "postgresql://db",
        }
    ) == {
        "broker_url": "amqp://b//",
        "result_backend": "redis://r/2",
        "swh_scheduler_lease_ping": 15.0,
    }


@pytest.mark.parametrize("value", ["ten", "10s", "0", "-1", "nan", "inf", "1e999"])
def test_a_bad_lease_ping_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        environment_settings({"SWH_SCHEDULER_LEASE_PING": value})
    assert info.value.field == "SWH_SCHEDULER_LEASE_PING"
    assert repr(value) in str(info.value)
    with pytest.raises(InvalidInput):
        make_app(environ={"SWH_SCHEDULER_LEASE_PING": value}, load_workers=False)


def test_a_small_lease_ping_is_taken() -> None:
    found = environment_settings({"SWH_SCHEDULER_LEASE_PING": "0.25"})
    assert found == {"swh_scheduler_lease_ping": 0.25}
    assert math.isfinite(found["swh_scheduler_lease_ping"])


def test_module_settings_are_its_public_plain_values() -> None:
    module = types.ModuleType("conf")
    module.broker_url = "redis://m/1"  # type: ignore[attr-defined]
    module.task_routes = {"a": {"queue": "q"}}  # type: ignore[attr-defined]
    module.result_backend = None  # type: ignore[attr-defined]
    module._hidden = 1  # type: ignore[attr-defined]
    module.sub = types  # type: ignore[attr-defined]
    module.Kind = int  # type: ignore[attr-defined]
    module.make = lambda: 1  # type: ignore[attr-defined]
    assert module_settings(module) == {
        "broker_url": "redis://m/1",
        "task_routes": {"a": {"queue": "q"}},
        "result_backend": None,
    }
    platform = module_settings(celeryconfig)
    assert platform["broker_url"] == "redis://127.0.0.1:6379/0"
    assert platform["swh_scheduler_lease_ping"] == 10.0
