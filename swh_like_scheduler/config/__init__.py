"""The settings: one object read from a file, the environment
(``SWH_SCHEDULER_*``) and the command line, checked field by field
(:mod:`.settings`). The configuration reference of the documentation is
generated from it.

It may import the domain, the plumbing and the origin visits' policy (the
visit cooldowns are settings)."""
