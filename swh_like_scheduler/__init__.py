"""swh_like_scheduler: a Celery task platform with a deadline-greedy scheduler."""

__version__ = "0.1.0"
