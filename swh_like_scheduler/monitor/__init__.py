"""Monitor duties (DESIGN.md §4): run by one process at a time.

Today: the steal step of the lease protocol. :func:`monitor_tick` is one
pass over every duty and :func:`monitor_loop` repeats it; more duties
(re-publishing lost messages, expiring one-shots, retention) get a field in
:class:`MonitorReport` and a line in :func:`monitor_tick`.
"""

from .duties import MonitorReport, MonitorSettings, monitor_loop, monitor_tick

__all__ = ["MonitorReport", "MonitorSettings", "monitor_loop", "monitor_tick"]
