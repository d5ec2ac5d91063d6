"""Alembic migrations of the scheduler schema (installed as ``swh_like_scheduler.sql``)."""
