"""Recording: what turns a run's outcome into its task's next state (the
policy applied through the store), shared by every part that hears how a run
ended: the listener, the worker's start guard, the monitor and the remote
store's server. It may import the domain, the policy and the store; the
parts that use it sit above it."""

from __future__ import annotations

from .outcome import APPLY_WIRE_NAME, TaskTypeCache, outcome_applier

__all__ = ["APPLY_WIRE_NAME", "TaskTypeCache", "outcome_applier"]
