"""The worker lease: one copy of a task at a time, time from the database.

* :mod:`.protocol` — the store's answers (:class:`LeaseGrant`, :class:`PingReply`,
  :class:`StealReport`); imported by the store, so this package's ``__init__``
  must stay free of Celery and store imports;
* :mod:`.task` — :class:`~.task.LeasedTask`, the Celery base class of task
  types that opt in (``@shared_task(base=LeasedTask, bind=True)``).
"""

from .protocol import LeaseGrant, PingAnswer, PingReply, Refusal, StealReport

__all__ = ["LeaseGrant", "PingAnswer", "PingReply", "Refusal", "StealReport"]
