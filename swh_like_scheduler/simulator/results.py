"""What a simulation measures, and its results as JSON.

* **ERROR-hours / WARNING-hours**: every ``sample_every`` of simulated time
  each live task's condition is read (the same summary as ``swh scheduler
  task status``); a task in ERROR at a sample counts ``sample_every`` of
  ERROR time. Summed over tasks, in hours.
* **Lateness at dispatch**: for every claimed task, the claim's instant
  minus its should_start_by (negative: early). Percentiles are of the
  positive part (0 for a task dispatched in time).
* **Lateness at start**: for every run, the instant a worker started it
  minus the should_start_by of its claim: the time it waited in the
  broker's queue counts. A run still queued at the end of the horizon
  counts with its wait until then (``queued_at_end`` of them).
* **Intervals, per task group**: the interval its tasks' schedules promise
  as written (adaptive: the interval they were created with, the group's
  or the type's default; periodic: the period; cron: the mean spacing of
  the firings; one-shot: none), the interval delivered (the mean time
  between two consecutive starts of a task's good runs, pooled over the
  group's tasks: the sum of those gaps over their number; a run's length
  counts, a failed run and its retries do not start a new gap), and
  ``stretch``, the delivered gaps over the intervals their tasks promised
  (delivered over written when the group's tasks share one). Adaptive
  groups also have the interval scheduled (the mean ``current_interval``
  of their tasks at the samples: where the interval rules, per task and
  capacity-aware, moved it). A task with fewer than two good starts in the
  horizon gives no gap (``intervals_delivered`` counts them). Per type,
  ``stretch`` pools the gaps of its groups the same way.
* **Cron work lost**, per cron group: ``runs_owed``, the firings whose
  window closed within the horizon, and ``runs_lost``, those no run
  served (:mod:`.firings`): beside the stretch, which counts only the
  tasks that ran twice.
* **Busy share**, per type: the seconds its worker slots spent running
  (whatever the type of the message they ran, within the horizon) over its
  slots times the horizon.
* Dispatches, run outcomes, retries (runs that retry a failed one, as the
  policy scheduled them: not the next run of a schedule after the retries
  were exhausted), queue depths at the samples, the share of tasks OK over
  time.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: the levels of a condition, in order
LEVELS = ("OK", "WARNING", "ERROR")
#: points of the lateness CDF kept in the results (for plots)
CDF_POINTS = 41


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of sorted ``values``, by linear
    interpolation between closest ranks; 0 for none."""
    if not values:
        return 0.0
    position = (len(values) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def _round(value: float, digits: int = 4) -> float:
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded


def _accrue(seconds: dict[str, float], levels: Mapping[str, int], every: float) -> None:
    """Add ``every`` seconds per task at each level to ``seconds``."""
    for level in LEVELS:
        seconds[level] += levels.get(level, 0) * every


def _level_hours(seconds: Mapping[str, float]) -> dict[str, float]:
    return {
        "error_hours": _round(seconds["ERROR"] / 3600, 3),
        "warning_hours": _round(seconds["WARNING"] / 3600, 3),
    }


@dataclass
class TypeRecord:
    """What happened to one task type."""

    workers: int
    natural_load: float
    lateness: list[float] = field(default_factory=list)
    #: lateness at start, runs still queued at the end included
    start_lateness: list[float] = field(default_factory=list)
    queued_at_end: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    level_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0.0))
    depth_max: int = 0
    depth_sum: int = 0
    #: seconds its worker slots spent running, within the horizon
    busy_seconds: float = 0.0
    #: ``[gaps' sum, their tasks' written intervals' sum, gaps]`` over its groups
    gaps: list[float] = field(default_factory=lambda: [0.0, 0.0, 0])

    def to_json(self, samples: int, horizon: float = 0.0) -> dict[str, Any]:
        late = sorted(max(0.0, x) for x in self.lateness)
        late_start = sorted(max(0.0, x) for x in self.start_lateness)
        return {
            "workers": self.workers,
            "natural_load": _round(self.natural_load),
            "dispatches": len(self.lateness),
            "outcomes": dict(sorted(self.outcomes.items())),
            "retries": self.retries,
            **_level_hours(self.level_seconds),
            "lateness_p50_s": _round(percentile(late, 50), 1),
            "lateness_p99_s": _round(percentile(late, 99), 1),
            "dispatched_late": sum(1 for x in self.lateness if x > 0),
            "start_lateness_p50_s": _round(percentile(late_start, 50), 1),
            "start_lateness_p99_s": _round(percentile(late_start, 99), 1),
            "started_late": sum(1 for x in self.start_lateness if x > 0),
            "queued_at_end": self.queued_at_end,
            "queue_depth_max": self.depth_max,
            "queue_depth_mean": _round(self.depth_sum / samples if samples else 0.0, 2),
            "busy_share": _round(self.busy_seconds / (self.workers * horizon))
            if self.workers and horizon
            else None,
            "stretch": _round(self.gaps[0] / self.gaps[1], 3) if self.gaps[1] else None,
        }


@dataclass
class Recorder:
    """Collects a simulation's measurements as it runs."""

    start: datetime
    sample_every: float
    types: dict[str, TypeRecord]
    #: the simulated seconds (for the busy shares)
    horizon: float = 0.0
    timeline: list[dict[str, Any]] = field(default_factory=list)
    #: simulated events handled: claims, run starts and ends, listener
    #: batches, runner passes, samples
    events: Counter[str] = field(default_factory=Counter)
    #: per task group (the workload's ``[[tasks]]``), seconds spent at each level
    groups: dict[str, dict[str, float]] = field(default_factory=dict)
    #: per task group, seconds spent in ERROR by cause (:data:`.watch.CAUSES`)
    causes: dict[str, dict[str, float]] = field(default_factory=dict)
    #: per task group, ``[sum, tasks]`` of its recurring tasks' written intervals
    written: dict[str, list[float]] = field(default_factory=dict)
    #: per task group, ``[gaps' sum, their tasks' written intervals' sum,
    #: gaps]`` between consecutive good starts
    gaps: dict[str, list[float]] = field(default_factory=dict)
    #: per task group, ``[sum, readings]`` of its adaptive tasks' current
    #: interval at the samples
    scheduled: dict[str, list[float]] = field(default_factory=dict)
    #: per cron group, ``(firings owed, firings lost)`` (:mod:`.firings`)
    cron_work: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: per type, ``[hours, OK, WARNING, ERROR]`` at each sample, given in the
    #: results (``timeline_by_type``) only when asked (a forecast reads it)
    type_timeline: dict[str, list[list[float]]] = field(default_factory=dict)
    by_type: bool = False
    #: the reading taken at the horizon itself (:meth:`close`), overall and
    #: per type, in the timelines' forms; ``None``: none was taken
    at_horizon: dict[str, Any] | None = None
    at_horizon_by_type: dict[str, list[float]] = field(default_factory=dict)

    def promised(self, group: str, interval: float | None) -> None:
        """A task of ``group`` whose schedule promises ``interval`` seconds
        between runs (None: a one-shot)."""
        if interval is not None:
            sums = self.written.setdefault(group, [0.0, 0])
            sums[0] += interval
            sums[1] += 1

    def visited(
        self, group: str, gap: float, interval: float | None, task_type: str | None = None
    ) -> None:
        """A good run of a task of ``group`` (of ``task_type``) started
        ``gap`` seconds after its previous good start; its schedule
        promised ``interval``."""
        if interval is not None:
            sums = self.gaps.setdefault(group, [0.0, 0.0, 0])
            sums[0] += gap
            sums[1] += interval
            sums[2] += 1
            if task_type is not None:
                pooled = self.types[task_type].gaps
                pooled[0] += gap
                pooled[1] += interval
                pooled[2] += 1

    def busy(self, task_type: str, seconds: float) -> None:
        """A worker slot of ``task_type`` runs for ``seconds`` (within the horizon)."""
        self.types[task_type].busy_seconds += max(0.0, seconds)

    def claimed(self, task_type: str, now: datetime, deadlines: Sequence[datetime]) -> None:
        record = self.types[task_type]
        record.lateness.extend((now - d).total_seconds() for d in deadlines)
        self.events["dispatch"] += len(deadlines)

    def started(self, task_type: str, lateness: float, *, queued: bool = False) -> None:
        """A run started ``lateness`` seconds after its should_start_by (or,
        ``queued``, is still waiting at the end, that long after it)."""
        record = self.types[task_type]
        record.start_lateness.append(lateness)
        record.queued_at_end += int(queued)

    def ended(self, task_type: str, status: str, retry: bool) -> None:
        record = self.types[task_type]
        record.outcomes[status] += 1
        record.retries += int(retry)
        self.events["run"] += 1

    def sample(
        self,
        now: datetime,
        counts: Mapping[str, Mapping[str, int]],
        depths: Mapping[str, int],
        groups: Mapping[str, Mapping[str, int]] | None = None,
        causes: Mapping[str, Mapping[str, int]] | None = None,
        intervals: Mapping[str, tuple[float, int]] | None = None,
    ) -> None:
        """One reading of every task's condition (``{type: {level: n}}``,
        ``{group: {level: n}}`` and ``{group: {cause of ERROR: n}}``) and of
        every type's queue depth; its levels count for the time until the
        next sample. ``intervals``: ``{group: (sum of its adaptive tasks'
        current intervals, tasks)}``."""
        for name, (total, tasks) in (intervals or {}).items():
            sums = self.scheduled.setdefault(name, [0.0, 0])
            sums[0] += total
            sums[1] += tasks
        for name, levels in (groups or {}).items():
            _accrue(
                self.groups.setdefault(name, dict.fromkeys(LEVELS, 0.0)), levels, self.sample_every
            )
        for name, counted in (causes or {}).items():
            seconds = self.causes.setdefault(name, {})
            for cause, tasks in counted.items():
                seconds[cause] = seconds.get(cause, 0.0) + tasks * self.sample_every
        totals: Counter[str] = Counter()
        hours = (now - self.start).total_seconds() / 3600
        for name, record in self.types.items():
            levels = counts.get(name, {})
            if self.by_type:
                reading = [_round(hours, 3), *(levels.get(level, 0) for level in LEVELS)]
                self.type_timeline.setdefault(name, []).append(reading)
            _accrue(record.level_seconds, levels, self.sample_every)
            totals.update({level: levels.get(level, 0) for level in LEVELS})
            depth = depths.get(name, 0)
            record.depth_max = max(record.depth_max, depth)
            record.depth_sum += depth
        self.timeline.append(
            {"hours": _round(hours, 3), **{level: totals[level] for level in LEVELS}}
        )
        self.events["sample"] += 1

    def close(self, now: datetime, counts: Mapping[str, Mapping[str, int]]) -> None:
        """The conditions read once more at the horizon itself, ``now``
        (``{type: {level: n}}``): what a forecast says "at the horizon" is.
        The regular samples stand each for the time until the next, so the
        last of them is read one ``sample_every`` before the horizon; this
        reading counts no time (no level-hours, no queue depth, no sample)."""
        hours = _round((now - self.start).total_seconds() / 3600, 3)
        totals: Counter[str] = Counter()
        for name in self.types:
            levels = counts.get(name, {})
            self.at_horizon_by_type[name] = [hours, *(levels.get(lv, 0) for lv in LEVELS)]
            totals.update({level: levels.get(level, 0) for level in LEVELS})
        self.at_horizon = {"hours": hours, **{level: totals[level] for level in LEVELS}}

    def _intervals(self, group: str) -> dict[str, Any]:
        """The group's intervals written, scheduled and delivered, and its
        stretch (None where there is none to measure)."""

        def mean(sums: list[float] | None) -> float | None:
            return _round(sums[0] / sums[-1], 1) if sums and sums[-1] else None

        gaps = self.gaps.get(group)
        owed, lost = self.cron_work.get(group, (None, None))
        return {
            "runs_owed": owed,
            "runs_lost": lost,
            "interval_written_s": mean(self.written.get(group)),
            "interval_scheduled_s": mean(self.scheduled.get(group)),
            "interval_delivered_s": mean(gaps),
            "intervals_delivered": int(gaps[2]) if gaps else 0,
            "stretch": _round(gaps[0] / gaps[1], 3) if gaps and gaps[1] else None,
        }

    def _cause_hours(self, group: str) -> dict[str, float]:
        return _cause_hours_of(self.causes.get(group, {}))

    def to_json(self) -> dict[str, Any]:
        samples = len(self.timeline)
        per_type = {
            name: r.to_json(samples, self.horizon) for name, r in sorted(self.types.items())
        }
        lateness = sorted(x for r in self.types.values() for x in r.lateness)
        positive = [max(0.0, x) for x in lateness]
        at_start = sorted(max(0.0, x) for r in self.types.values() for x in r.start_lateness)
        outcomes: Counter[str] = Counter()
        for record in self.types.values():
            outcomes.update(record.outcomes)
        shares = [t["OK"] / total for t in self.timeline if (total := sum(t[lv] for lv in LEVELS))]
        return {
            "error_hours": _round(sum(t["error_hours"] for t in per_type.values()), 3),
            "warning_hours": _round(sum(t["warning_hours"] for t in per_type.values()), 3),
            "ok_share_mean": _round(sum(shares) / len(shares) if shares else 1.0),
            "ok_share_min": _round(min(shares, default=1.0)),
            "dispatches": len(lateness),
            "dispatched_late": sum(1 for x in lateness if x > 0),
            "lateness_p50_s": _round(percentile(positive, 50), 1),
            "lateness_p99_s": _round(percentile(positive, 99), 1),
            "lateness_cdf": _cdf(positive),
            "start_lateness_p50_s": _round(percentile(at_start, 50), 1),
            "start_lateness_p99_s": _round(percentile(at_start, 99), 1),
            "started_late": sum(1 for x in at_start if x > 0),
            "queued_at_end": sum(r.queued_at_end for r in self.types.values()),
            "start_lateness_cdf": _cdf(at_start),
            "outcomes": dict(sorted(outcomes.items())),
            "retries": sum(r.retries for r in self.types.values()),
            "queue_depth_max": max((r.depth_max for r in self.types.values()), default=0),
            "events": dict(sorted(self.events.items())),
            "types": per_type,
            "groups": {
                name: {
                    **_level_hours(self.groups.get(name, dict.fromkeys(LEVELS, 0.0))),
                    "error_hours_by_cause": self._cause_hours(name),
                    **self._intervals(name),
                }
                for name in sorted({*self.groups, *self.written})
            },
            "timeline": self.timeline,
            **({"timeline_by_type": self.type_timeline} if self.by_type else {}),
            **(
                {"at_horizon": self.at_horizon, "at_horizon_by_type": self.at_horizon_by_type}
                if self.at_horizon is not None
                else {}
            ),
        }


def _cause_hours_of(seconds: Mapping[str, float]) -> dict[str, float]:
    return {cause: _round(s / 3600, 3) for cause, s in sorted(seconds.items())}


def _cdf(sorted_values: Sequence[float]) -> list[list[float]]:
    """``[[seconds, share of values <= seconds], ...]`` at the quantiles."""
    if not sorted_values:
        return []
    points = []
    for i in range(CDF_POINTS):
        q = i / (CDF_POINTS - 1)
        points.append([_round(percentile(sorted_values, q * 100), 1), _round(q)])
    return points
