"""Which database and broker a daemon uses and where each came from
(:mod:`swh_like_scheduler.config.sources`), from real Celery apps and the
settings :func:`~swh_like_scheduler.config.settings.load_settings` builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import Celery

from swh_like_scheduler.config import settings as settings_module
from swh_like_scheduler.config.settings import BUILT_IN, load_settings
from swh_like_scheduler.config.sources import (
    CELERY_DEFAULT_BROKER,
    Chosen,
    choose_broker,
    choose_database,
    first_line,
    mask_url,
)
from swh_like_scheduler.domain.exceptions import InvalidInput

OURS = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def _no_user_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own configuration file never leaks into these tests."""
    monkeypatch.setattr(settings_module, "default_config_file", lambda: tmp_path / "absent.toml")
    monkeypatch.setattr(settings_module, "default_db_path", lambda: tmp_path / "default.sqlite")


def an_app(**conf: object) -> Celery:
    app = Celery("proj", set_as_current=False)
    app.conf.update(conf)
    return app


# -- mask_url -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://user:s3cret@broker:6379/0", "redis://user:***@broker:6379/0"),
        ("redis://:s3cret@broker:6379/0", "redis://:***@broker:6379/0"),
        ("postgresql://swh:p%40ss@db.example/sched", "postgresql://swh:***@db.example/sched"),
        ("amqp://u:pw@[::1]:5672//", "amqp://u:***@[::1]:5672//"),
        # no password: the URL as it is
        ("amqp://guest@localhost:5672//", "amqp://guest@localhost:5672//"),
        ("sqlite:////var/lib/swh/scheduler.sqlite", "sqlite:////var/lib/swh/scheduler.sqlite"),
        ("memory://", "memory://"),
        # Kombu's fail-over list: every broker's password is masked
        (
            "amqp://u:one@h1:5672//;amqp://u:two@h2:5672//",
            "amqp://u:***@h1:5672//;amqp://u:***@h2:5672//",
        ),
    ],
)
def test_mask_url_hides_passwords_only(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_mask_url_leaves_text_it_cannot_read() -> None:
    assert mask_url("http://[::1") == "http://[::1"  # urlsplit refuses it


def test_a_chosen_value_is_described_masked_with_its_source() -> None:
    chosen = Chosen("redis://u:pw@h/0", "--broker-url")
    assert chosen.describe() == "redis://u:***@h/0 (from --broker-url)"
    assert "pw" not in chosen.describe()


# -- load_settings: db_source / broker_source ---------------------------------


def test_nothing_given_is_the_built_in_database_and_no_broker(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.db_url == f"sqlite:///{tmp_path / 'default.sqlite'}"
    assert (settings.db_is_default, settings.db_source) == (True, BUILT_IN)
    assert (settings.broker_url, settings.broker_source) == (None, None)


def test_given_values_keep_the_source_they_came_with() -> None:
    settings = load_settings(
        db_url="sqlite:////tmp/x.sqlite",
        db_source="--db-url",
        broker_url="redis://b/1",
        broker_source="SWH_SCHEDULER_BROKER_URL",
    )
    assert (settings.db_url, settings.db_source, settings.db_is_default) == (
        "sqlite:////tmp/x.sqlite",
        "--db-url",
        False,
    )
    assert (settings.broker_url, settings.broker_source) == (
        "redis://b/1",
        "SWH_SCHEDULER_BROKER_URL",
    )
    unnamed = load_settings(db_url="sqlite:////tmp/y.sqlite", broker_url="redis://b/2")
    assert (unnamed.db_source, unnamed.broker_source) == ("the caller", "the caller")


def test_values_of_the_configuration_file_say_so(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[scheduler]\ndb_url = "postgresql://file/db"\nbroker_url = "redis://file/3"\n'
    )
    settings = load_settings(config_file=config)
    assert settings.db_url == "postgresql://file/db" and not settings.db_is_default
    assert settings.db_source == f"the configuration file {config} (db_url)"
    assert settings.broker_url == "redis://file/3"
    assert settings.broker_source == f"the configuration file {config} (broker_url)"
    # a value given beats the file's, and keeps its own source
    given = load_settings(
        config_file=config, db_url="sqlite:////tmp/z.sqlite", db_source="--db-url"
    )
    assert (given.db_url, given.db_source) == ("sqlite:////tmp/z.sqlite", "--db-url")
    assert given.broker_source == f"the configuration file {config} (broker_url)"


def test_the_default_configuration_file_is_named_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = tmp_path / "default-config.toml"
    default.write_text('db_url = "postgresql://default-file/db"\n')
    monkeypatch.setattr(settings_module, "default_config_file", lambda: default)
    settings = load_settings()
    assert settings.db_source == f"the configuration file {default} (db_url)"
    assert settings.broker_source is None


def test_db_source_and_broker_source_cannot_be_set_in_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('db_source = "--db-url"\n')
    with pytest.raises(InvalidInput, match="unknown setting 'db_source'"):
        load_settings(config_file=config)


# -- choose_database ------------------------------------------------------------


def test_the_apps_database_beats_the_environment_and_the_file(tmp_path: Path) -> None:
    app = an_app(swh_scheduler_db_url="postgresql://app/db")
    from_env = load_settings(db_url="postgresql://env/db", db_source="SWH_SCHEDULER_DB_URL")
    chosen = choose_database(from_env, app=app, app_spec="proj:app")
    assert chosen == Chosen("postgresql://app/db", "the swh_scheduler_db_url of the app proj:app")
    assert not chosen.default
    config = tmp_path / "config.toml"
    config.write_text('db_url = "postgresql://file/db"\n')
    from_file = load_settings(config_file=config)
    assert choose_database(from_file, app=app, app_spec="proj:app").url == "postgresql://app/db"
    built_in = load_settings()
    assert choose_database(built_in, app=app, app_spec="proj:app").url == "postgresql://app/db"


def test_the_db_url_flag_beats_the_app() -> None:
    app = an_app(swh_scheduler_db_url="postgresql://app/db")
    settings = load_settings(db_url="postgresql://flag/db", db_source="--db-url")
    assert choose_database(settings, app=app, app_spec="proj:app") == Chosen(
        "postgresql://flag/db", "--db-url"
    )


def test_an_app_without_a_database_setting_leaves_the_settings_one() -> None:
    for app in (an_app(), an_app(swh_scheduler_db_url=""), an_app(swh_scheduler_db_url=7)):
        settings = load_settings(db_url="postgresql://env/db", db_source="SWH_SCHEDULER_DB_URL")
        assert choose_database(settings, app=app, app_spec="proj:app") == Chosen(
            "postgresql://env/db", "SWH_SCHEDULER_DB_URL"
        )


def test_only_the_built_in_database_nobody_chose_is_a_default(tmp_path: Path) -> None:
    built_in = choose_database(load_settings())
    assert built_in.default and built_in.source == BUILT_IN
    assert built_in.url == f"sqlite:///{tmp_path / 'default.sqlite'}"
    given = choose_database(load_settings(db_url="sqlite:////x.sqlite", db_source="--db-url"))
    assert not given.default
    # the app's database is chosen, even where the settings held the default
    with_app = choose_database(
        load_settings(), app=an_app(swh_scheduler_db_url="sqlite:////app.sqlite"), app_spec="p:a"
    )
    assert not with_app.default


# -- choose_broker --------------------------------------------------------------


def test_the_broker_url_flag_beats_everything(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('broker_url = "redis://file/1"\n')
    settings = load_settings(config_file=config)
    chosen = choose_broker(
        settings,
        flag="redis://flag/2",
        flag_source="--broker-url",
        app=an_app(broker_url="redis://app/3"),
        app_spec="proj:app",
        built_in=OURS,
    )
    assert chosen == Chosen("redis://flag/2", "--broker-url")


def test_the_apps_broker_beats_the_environment_and_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('broker_url = "redis://file/1"\n')
    chosen = choose_broker(
        load_settings(config_file=config),
        flag="redis://env/2",
        flag_source="SWH_SCHEDULER_BROKER_URL",
        app=an_app(broker_url="redis://app/3"),
        app_spec="proj:app",
        built_in=OURS,
    )
    assert chosen == Chosen("redis://app/3", "the broker_url of the app proj:app")
    # Celery's own way: Celery(broker=...)
    app = Celery("proj", broker="amqp://u:pw@rabbit//", set_as_current=False)
    chosen = choose_broker(load_settings(), app=app, app_spec="proj:app", built_in=OURS)
    assert (chosen.url, chosen.default) == ("amqp://u:pw@rabbit//", False)


def test_celery_broker_url_is_the_apps_broker_celery_reads_it_first() -> None:
    app = an_app(broker_url="redis://app/3")
    chosen = choose_broker(
        load_settings(), app=app, app_spec="proj:app", celery_env="redis://celery-env/4"
    )
    assert chosen == Chosen(
        "redis://celery-env/4", "CELERY_BROKER_URL, which the app proj:app reads first"
    )
    # the flag still wins; without an app, the variable is not ours to read
    flagged = choose_broker(
        load_settings(),
        flag="redis://flag/1",
        flag_source="--broker-url",
        app=app,
        celery_env="redis://celery-env/4",
    )
    assert flagged.url == "redis://flag/1"
    assert choose_broker(load_settings(), celery_env="redis://x/1", built_in=OURS).url == OURS


def test_a_fail_over_list_of_the_app_is_its_broker() -> None:
    """Celery takes a list of URLs as broker_url (fail-over): the app does
    set a broker, it is not Celery's default."""
    app = an_app(broker_url=["amqp://u:pw@h1//", "amqp://u:pw@h2//"])
    chosen = choose_broker(load_settings(), app=app, app_spec="proj:app", built_in=OURS)
    assert chosen == Chosen(
        "amqp://u:pw@h1//;amqp://u:pw@h2//", "the broker_url of the app proj:app"
    )


def test_the_environment_beats_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('broker_url = "redis://file/1"\n')
    settings = load_settings(config_file=config)
    chosen = choose_broker(
        settings, flag="redis://env/2", flag_source="SWH_SCHEDULER_BROKER_URL", built_in=OURS
    )
    assert chosen == Chosen("redis://env/2", "SWH_SCHEDULER_BROKER_URL")
    # an app that sets no broker does not hide the environment's
    chosen = choose_broker(
        settings,
        flag="redis://env/2",
        flag_source="SWH_SCHEDULER_BROKER_URL",
        app=an_app(),
        app_spec="proj:app",
    )
    assert chosen == Chosen("redis://env/2", "SWH_SCHEDULER_BROKER_URL")
    unnamed = choose_broker(settings, flag="redis://given/4")
    assert unnamed == Chosen("redis://given/4", "the caller")


def test_the_file_beats_the_defaults(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('broker_url = "redis://file/1"\n')
    settings = load_settings(config_file=config)
    expected = Chosen("redis://file/1", f"the configuration file {config} (broker_url)")
    assert choose_broker(settings, built_in=OURS) == expected
    assert choose_broker(settings, app=an_app(), app_spec="proj:app") == expected


def test_an_app_that_sets_no_broker_gets_celerys_default_said_as_such() -> None:
    chosen = choose_broker(load_settings(), app=an_app(), app_spec="proj:app", built_in=OURS)
    assert chosen.url == CELERY_DEFAULT_BROKER
    assert chosen.default
    assert chosen.source == "Celery's default: the app proj:app sets no broker_url"


def test_no_app_and_nothing_given_is_our_built_in_default() -> None:
    chosen = choose_broker(load_settings(), built_in=OURS)
    assert chosen == Chosen(OURS, BUILT_IN, default=True)
    assert choose_broker(load_settings()) == Chosen(CELERY_DEFAULT_BROKER, BUILT_IN, default=True)


# -- first_line -------------------------------------------------------------------


def test_first_line_chosen_values_are_info() -> None:
    warn, text = first_line(
        "start-listener",
        Chosen("postgresql://swh:pw@db/sched", "--db-url"),
        Chosen("redis://:pw@b:6379/0", "the broker_url of the app proj:app"),
    )
    assert not warn
    assert text == (
        "start-listener: database postgresql://swh:***@db/sched (from --db-url); "
        "broker redis://:***@b:6379/0 (from the broker_url of the app proj:app)"
    )


def test_first_line_without_broker() -> None:
    warn, text = first_line("rpc-serve", Chosen("sqlite:////x.sqlite", "--db-url"), None)
    assert (warn, text) == (False, "rpc-serve: database sqlite:////x.sqlite (from --db-url)")


def test_first_line_warns_of_one_default_and_says_what_to_give() -> None:
    warn, text = first_line(
        "start-runner",
        Chosen("sqlite:////d.sqlite", "--db-url"),
        Chosen(OURS, BUILT_IN, default=True),
    )
    assert warn
    assert text == (
        "start-runner: database sqlite:////d.sqlite (from --db-url); broker "
        f"{OURS} (from {BUILT_IN}). Nobody chose the broker: it is a built-in default "
        "(give the broker: --app APP, --broker-url or SWH_SCHEDULER_BROKER_URL)"
    )


def test_first_line_warns_of_both_defaults() -> None:
    warn, text = first_line(
        "start-monitor",
        Chosen("sqlite:////d.sqlite", BUILT_IN, default=True),
        Chosen(OURS, BUILT_IN, default=True),
        hints={"database": "--db-url", "broker": "--broker-url"},
    )
    assert warn
    assert text.endswith(
        "Nobody chose the database nor the broker: they are built-in defaults "
        "(give the database: --db-url; the broker: --broker-url)"
    )


def test_first_line_of_a_database_only_daemon_warns_of_its_default() -> None:
    warn, text = first_line("journal-client", Chosen("sqlite:////d", BUILT_IN, True), None)
    assert warn and "Nobody chose the database: it is a built-in default" in text
    assert "broker" not in text
