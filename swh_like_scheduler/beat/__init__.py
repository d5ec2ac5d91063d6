"""The bridge from celery beat: reading a beat schedule (a
``beat_schedule`` mapping, django-celery-beat or RedBeat rows:
:mod:`.schedule`), importing it as tasks (:mod:`.importer`) with a report
of what changed (:mod:`.report`), and the ``celery beat -S swh`` scheduler
(:mod:`.scheduler`) that runs the runner inside beat and keeps the imported
schedule in step with the app's (:mod:`.sync`).

It sits above the runner, whose loop its scheduler drives."""
