"""The runner: claims ready tasks by deadline and publishes them to Celery."""

from .dispatch import PassReport, TypePass, tick

__all__ = ["PassReport", "TypePass", "tick"]
