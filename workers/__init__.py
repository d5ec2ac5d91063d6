"""Example task types, installed as ``swh_like_workers`` and registered through
the ``swh.workers`` entry-point group (see ``swh scheduler task-type register``).
"""
