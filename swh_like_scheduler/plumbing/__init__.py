"""Plumbing: what every daemon needs and no concern owns. The Celery app
factory (:mod:`.celery_factory`, which also keeps workers alive when their
Redis broker goes away: :mod:`.kombu_redis`), logging that says an outage
once (:mod:`.quietlog`, :mod:`.outage`), a lazily imported name
(:mod:`.lazy`) and the rule of which addresses an http callback may reach
(:mod:`.reach`).

It imports the domain only."""
