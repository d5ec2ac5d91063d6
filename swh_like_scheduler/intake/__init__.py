"""Intake: user input turned into domain values before anything is stored.
Tasks built from JSON, CSV or the command line (:mod:`.builders`,
:mod:`.argcheck`, :mod:`.importer`), jobs by key (:mod:`.jobs`), and edits:
which fields may change (:mod:`.editing`) and the task after an edit, its
times computed again by the policy (:mod:`.edit`).

It may import the domain, the plumbing and the policy; the store and every
face above it use it."""
