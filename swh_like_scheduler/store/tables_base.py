"""What every table of the schema shares: the metadata and its naming
convention, the time type, and the column helpers (:mod:`.tables`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Timezone-aware datetimes, always handed back in UTC.

    PostgreSQL stores ``timestamptz``; SQLite stores UTC text with fixed-width
    microseconds, so text order is time order and indexes stay usable.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given where an aware one is required")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def bind_processor(self, dialect: sa.Dialect) -> Any:
        """On SQLite, the checks above and the text in one step: the same
        text as SQLAlchemy's ``DateTime`` (fixed-width microseconds),
        without its ``%`` formatting of a dict per value (a simulation binds
        millions of them)."""
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)
        check = self.process_bind_param

        def process(value: datetime | None) -> str | None:
            utc = check(value, dialect)
            return None if utc is None else utc.isoformat(" ", "microseconds")

        return process

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        """On SQLite, our own text read with ``datetime.fromisoformat``;
        anything else through SQLAlchemy's parser. Elsewhere, a value the
        driver gives in UTC already is taken as it is (one call per value,
        not SQLAlchemy's two)."""
        aware = self.process_result_value
        if dialect.name != "sqlite":
            driver = self.impl_instance.dialect_impl(dialect).result_processor(dialect, coltype)
            if driver is not None:  # (psycopg's: none)
                return super().result_processor(dialect, coltype)

            def given(value: Any) -> datetime | None:
                # psycopg hands back UTC itself on the store's sessions (their
                # time zone is UTC): those are taken as they are
                if value is None or value.tzinfo is UTC:
                    return value
                return aware(value, dialect)

            return given
        slow = super().result_processor(dialect, coltype)

        def process(value: Any) -> datetime | None:
            if value.__class__ is str:
                try:
                    return aware(datetime.fromisoformat(value), dialect)
                except ValueError:
                    pass
            return slow(value) if slow is not None else value

        return process


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _bytewise(text: sa.String) -> sa.types.TypeEngine[str]:
    """A text column of digests or UUIDs, compared byte by byte ("C"
    collation) on PostgreSQL, whatever the database's collation: the same
    equality, without ``strcoll`` in every index comparison."""
    return text.with_variant(type(text)(text.length, collation="C"), "postgresql")


def _bigint_pk() -> sa.types.TypeEngine[int]:
    # SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _enum_values(enum: Any) -> list[str]:
    return [member.value for member in enum]
