"""The policy engine: pure functions of (task, task type, now).

No I/O, no clock reads (``now`` is always passed in), randomness injected.
The runner, listener, API, CLI and simulator all call these functions.

* :mod:`.times` — zones, wall-time resolution (DST rule), effective durations;
* :mod:`.cron` — DST-correct cron firings;
* :mod:`.blackout` — blackout windows;
* :mod:`.retry` — retry delays, retry position, retry budget;
* :mod:`.schedule` — can_start_by / should_start_by and what moved them;
* :mod:`.catchup` — missed firings: run the latest once, or skip them;
* :mod:`.expiry` — when a one-shot with a ``max_delay`` may expire;
* :mod:`.condition` — OK / WARNING / ERROR with a reason code;
* :mod:`.cooldown` — a periodic task whose cooldown makes every run late;
* :mod:`.outcome` — the task after a run's outcome;
* :mod:`.capacity` — adaptive intervals within the type's capacity;
* :mod:`.validate` — creation-time rules and a new task's initial state;
* :mod:`.explain` — "why is my task not running?";
* :mod:`.runstate` — which state a task's run is in; why an action changed nothing;
* :mod:`.workers` — the main processes seen under one worker name: restart or duplicate.
"""

from .blackout import blackout_at, blackout_end, covers_whole_day, leave_blackouts, window_at
from .capacity import adapt_interval, clamp_interval, next_interval, pressure
from .catchup import MissedFirings, after_skip, catch_up_of, missed_firings
from .condition import (
    REASON_LEVEL,
    Condition,
    ConditionReport,
    Reason,
    condition,
    level_holds_until,
)
from .cooldown import CooldownShortfall, cooldown_shortfall
from .cron import cron_times, default_cron_max_duration, next_cron_time, shortest_cron_gap
from .expiry import claimable_from, may_expire
from .explain import Explanation, explain
from .outcome import (
    EWMA_ALPHA,
    FAILED_STATUSES,
    GOOD_STATUSES,
    NEUTRAL_STATUSES,
    Outcome,
    already_applied,
    apply_outcome,
    classify_result,
    ewma,
)
from .retry import (
    RandomSource,
    RetryState,
    SupportsRandom,
    budget_period,
    check_retry_budget,
    retry_base_delay,
    retry_delay,
    retry_state,
    worst_case_retry_sum,
)
from .runstate import RunPhase, RunState, run_state, why_unchanged
from .schedule import (
    Adjustment,
    AdjustmentKind,
    StartTimes,
    compute_start_times,
    interval_of,
    start_times,
)
from .times import (
    effective_average,
    is_real_wall_time,
    local_to_utc,
    max_allowed_duration,
    max_expected_duration,
    reference_start,
)
from .validate import (
    PERIODIC_WINDOW,
    default_cooldown,
    followed_cooldown,
    prepare_new_task,
    run_time_basis,
    validate_task,
    with_default_cooldown,
)

__all__ = [
    "EWMA_ALPHA",
    "FAILED_STATUSES",
    "GOOD_STATUSES",
    "NEUTRAL_STATUSES",
    "PERIODIC_WINDOW",
    "REASON_LEVEL",
    "Adjustment",
    "AdjustmentKind",
    "Condition",
    "ConditionReport",
    "CooldownShortfall",
    "Explanation",
    "MissedFirings",
    "Outcome",
    "RandomSource",
    "Reason",
    "RetryState",
    "RunPhase",
    "RunState",
    "StartTimes",
    "SupportsRandom",
    "adapt_interval",
    "after_skip",
    "already_applied",
    "apply_outcome",
    "blackout_at",
    "blackout_end",
    "budget_period",
    "catch_up_of",
    "check_retry_budget",
    "claimable_from",
    "clamp_interval",
    "classify_result",
    "compute_start_times",
    "condition",
    "cooldown_shortfall",
    "covers_whole_day",
    "cron_times",
    "default_cooldown",
    "default_cron_max_duration",
    "effective_average",
    "ewma",
    "explain",
    "followed_cooldown",
    "interval_of",
    "is_real_wall_time",
    "leave_blackouts",
    "level_holds_until",
    "local_to_utc",
    "max_allowed_duration",
    "max_expected_duration",
    "may_expire",
    "missed_firings",
    "next_cron_time",
    "next_interval",
    "prepare_new_task",
    "pressure",
    "reference_start",
    "retry_base_delay",
    "retry_delay",
    "retry_state",
    "run_state",
    "run_time_basis",
    "shortest_cron_gap",
    "start_times",
    "validate_task",
    "why_unchanged",
    "window_at",
    "with_default_cooldown",
    "worst_case_retry_sum",
]
