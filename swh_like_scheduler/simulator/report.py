"""A comparison's report: a Markdown page a person reads, with its plots
(PNG, matplotlib) and the JSON beside it.

Plots: the share of tasks OK over simulated time per dispatch order (at
each load), the CDF of lateness at dispatch and at start per order, and
ERROR-hours against load per order (when several loads were simulated)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..domain.exceptions import InvalidInput
from .peaks import percent, span

#: the file names written in the report folder
PAGE, DATA = "report.md", "results.json"


def write_report(results: Mapping[str, Any], folder: Path) -> list[Path]:
    """Write the page, the JSON and the plots of ``results`` (see
    :func:`.compare.compare`) into ``folder`` (created); the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / DATA]
    (folder / DATA).write_text(dumps(results) + "\n", "utf-8")
    plots = _plots(results, folder)
    written.extend(plots)
    (folder / PAGE).write_text(page(results, [p.name for p in plots]), "utf-8")
    written.append(folder / PAGE)
    return written


def dumps(results: Mapping[str, Any]) -> str:
    """The results as JSON, keys sorted: the same results, the same bytes."""
    return json.dumps(results, sort_keys=True, indent=1)


def _load_label(load: float | None) -> str:
    return "as written" if load is None else f"{load:.0%}"


def by_load(results: Mapping[str, Any]) -> dict[float | None, list[Mapping[str, Any]]]:
    grouped: dict[float | None, list[Mapping[str, Any]]] = {}
    for run in results["runs"]:
        grouped.setdefault(run["load"], []).append(run)
    return grouped


def ratio_to(runs: Sequence[Mapping[str, Any]], baseline: str) -> dict[str, float | None]:
    """Each order's ERROR-hours over ``baseline``'s (None when the baseline
    has none: a ratio of nothing)."""
    base = next((r["error_hours"] for r in runs if r["order"] == baseline), None)
    return {r["order"]: (round(r["error_hours"] / base, 3) if base else None) for r in runs}


def page(results: Mapping[str, Any], plots: Sequence[str]) -> str:
    """The Markdown page."""
    workload = results["workload"]
    lines = [
        f"# Simulation: {workload['name']}",
        "",
        workload.get("description") or "",
        "",
        f"{workload['tasks']:,} tasks over {workload['days']:g} simulated days from "
        f"{workload['start']}, seed {workload['seed']}. Workers: "
        + ", ".join(f"{t} {n}" for t, n in workload["workers"].items())
        + " as written, a load at the nominal rates of "
        + ", ".join(f"{t} {v:.0%}" for t, v in workload["natural_load"].items())
        + ".",
        "",
        (
            "The runner keeps a quarter of each queue's worker slots (at least one, none "
            "of a single slot) from runs that would hold a slot past the earliest deadline "
            "of a shorter task waiting on the queue."
            if results.get("keep_slots", True)
            else "The runner keeps no worker slot from long runs (--no-keep-slots)."
        ),
        "",
        "ERROR-hours and WARNING-hours: time summed over tasks, from every task's "
        "condition read every sample (as `swh scheduler task status` shows it). "
        "Lateness at dispatch: how long after its should_start_by a task was sent "
        "to the broker; at start: how long after it a worker started the run (the "
        "time in the queue counts; a run still queued at the end counts its wait "
        "so far). Both 0 when in time. Retries: runs that retry a failed one.",
        "",
    ]
    for load, runs in by_load(results).items():
        ratios = ratio_to(runs, "fifo")
        types = runs[0]["types"]
        peaks = runs[0].get("peak_overload") or {}
        lines += [
            _heading(load, types, runs[0].get("load_not_reached") or {}, peaks),
            "",
            *_peak_lines(peaks),
            *_limit_lines(runs[0].get("run_limits") or {}),
            *_queue_lines(runs[0].get("queue_bound") or {}),
            "Workers (load at the nominal rates): "
            + ", ".join(
                f"{name} {t['workers']} ({t['natural_load']:.0%})" for name, t in types.items()
            )
            + ".",
            "",
            "| order | ERROR-h | vs fifo | WARNING-h | OK share (mean / min) "
            "| late at dispatch | p50 / p99 at dispatch | late at start | p50 / p99 at start "
            "| dispatches | failed | retries | max queue |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in runs:
            ratio = ratios.get(run["order"])
            failed = sum(
                n for s, n in run["outcomes"].items() if s in ("failed", "permfailed", "timed_out")
            )
            lines.append(
                f"| {run['order']} | {run['error_hours']:,.1f} | "
                f"{'-' if ratio is None else f'{ratio:.2f}'} | {run['warning_hours']:,.1f} | "
                f"{run['ok_share_mean']:.1%} / {run['ok_share_min']:.1%} | "
                f"{run['dispatched_late']:,} | {_seconds(run['lateness_p50_s'])} / "
                f"{_seconds(run['lateness_p99_s'])} | {run['started_late']:,} | "
                f"{_seconds(run['start_lateness_p50_s'])} / "
                f"{_seconds(run['start_lateness_p99_s'])} | {run['dispatches']:,} | {failed:,} | "
                f"{run['retries']:,} | {run['queue_depth_max']:,} |"
            )
        lines += ["", *_busy_lines(runs), *_group_table(runs), *_interval_table(runs)]
    for name in plots:
        lines += [f"![{name}]({name})", ""]
    return "\n".join(lines)


def _heading(
    load: float | None,
    types: Mapping[str, Any],
    short: Mapping[str, float],
    peaks: Mapping[str, Any] | None = None,
) -> str:
    """A load's heading: the load asked, the types that did not reach it
    with the load they reached (never a load that was not simulated), and
    the types whose peak exceeds their workers."""
    over = f"; peak over the workers: {', '.join(peaks)}" if peaks else ""
    if load is None or not short:
        return f"## Load {_load_label(load)}{over}"
    reached = [name for name in types if name not in short]
    missed = ", ".join(f"{name} only {value:.0%}" for name, value in short.items())
    if not reached:
        return f"## Load {_load_label(load)} asked, not reached: {missed}{over}"
    return f"## Load {_load_label(load)} for {', '.join(reached)}; {missed}{over}"


def _peak_lines(peaks: Mapping[str, Any]) -> list[str]:
    """The types whose peak demand exceeds their workers (:mod:`.peaks`)."""
    if not peaks:
        return []
    lines = [
        "Peak over the workers (work falling due at once, from the workload's definition "
        "and mean runs, in one-minute steps; a mean load hides it):",
        "",
    ]
    for name, peak in peaks.items():
        drain = peak["drain_s"]
        lines.append(
            f"- {name}: {span(peak['due_worker_seconds'])} of work falls due from "
            f"{peak['window_start']} to {peak['window_end']}, "
            f"{peak['demand_workers']:,.1f} workers' worth against {peak['workers']} (mean "
            f"load {percent(peak['mean_load'])}); a run due then waits "
            f"{span(peak['delay_s'])} at best; "
            + ("not drained at the horizon's end" if drain is None else f"drained in {span(drain)}")
        )
    return [*lines, ""]


def _queue_lines(bound: Mapping[str, Any]) -> list[str]:
    """The types whose queue limit, not their workers, bounds their runs (:mod:`.pace`)."""
    if not bound:
        return []
    lines = [
        "Queue limits that bound the runs (a pass hands a queue at most its limit, and "
        "the runner sleeps its period after a pass that fills it):",
        "",
    ]
    for name, pace in bound.items():
        lines.append(
            f"- {name}: its tasks ask for {pace['runs_asked_per_s']:.2f} runs a second; a "
            f"queue limit of {pace['queue_limit']} hands over at most "
            f"{pace['runs_handed_per_s_max']:.2f}"
        )
    return [*lines, ""]


def _busy_lines(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per order, each type's busy share (its slots' running time over their time)."""
    cells = []
    for run in runs:
        shares = [
            f"{name} {t['busy_share']:.0%}"
            for name, t in run["types"].items()
            if t.get("busy_share") is not None
        ]
        if shares:
            cells.append(f"{run['order']}: {', '.join(shares)}")
    if not cells:
        return []
    return ["Workers busy (their slots' running time over their time): " + "; ".join(cells), ""]


def _limit_lines(limits: Mapping[str, Any]) -> list[str]:
    """What ``--load`` did to the types' max_allowed_duration (:mod:`.limits`)."""
    if not limits:
        return []
    lines = ["Runs lengthened by the load, and their max_allowed_duration:", ""]
    for name, limit in limits.items():
        written = span(limit["max_allowed_duration_s"])
        simulated = span(limit["simulated_max_allowed_duration_s"])
        what = (
            f"lengthened with them to {simulated}"
            if limit["scaled"]
            else f"kept at {written} (--keep-limits)"
        )
        lines.append(
            f"- {name}: runs x{limit['run_factor']:.2f}, max_allowed_duration {written} {what}; "
            f"runs over it {percent(limit['share_over_after'])} (as written "
            f"{percent(limit['share_over_before'])})"
        )
    return [*lines, ""]


def _group_table(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """ERROR-hours per task group (rows) and order (columns)."""
    groups = sorted({g for run in runs for g in run.get("groups", {})})
    if not groups:
        return []
    lines = [
        "ERROR-hours by task group:",
        "",
        "| group | " + " | ".join(run["order"] for run in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for group in groups:
        cells = [f"{run['groups'].get(group, {}).get('error_hours', 0):,.1f}" for run in runs]
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _interval_table(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per task group (rows) with an interval, the interval written, and
    per order the interval delivered, its stretch and (adaptive groups) the
    interval the rules scheduled."""
    groups = sorted(
        {
            g
            for run in runs
            for g, record in run.get("groups", {}).items()
            if record.get("interval_written_s") is not None
        }
    )
    if not groups:
        return []
    lines = [
        "Intervals by task group: as written (adaptive: at creation; periodic: the "
        "period; cron: the firings' spacing), and per order as delivered (the mean time "
        "between two good starts of a task), its stretch (delivered over written) and, "
        "for adaptive groups, the mean interval the interval rules scheduled, and for "
        "cron groups the firings whose window closed within the horizon that no run "
        "served (lost: the stretch counts only the tasks that ran twice) (-: no task of "
        "the group started well twice within the horizon):",
        "",
        "| group | written | " + " | ".join(run["order"] for run in runs) + " |",
        "|---|---|" + "---|" * len(runs),
    ]
    for group in groups:
        written = next(
            run["groups"][group]["interval_written_s"] for run in runs if group in run["groups"]
        )
        cells = [_interval_cell(run.get("groups", {}).get(group, {})) for run in runs]
        lines.append(f"| {group} | {span(written)} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _interval_cell(record: Mapping[str, Any]) -> str:
    delivered, stretch = record.get("interval_delivered_s"), record.get("stretch")
    scheduled = record.get("interval_scheduled_s")
    cell = "-" if delivered is None else f"{span(delivered)} (x{stretch:.2f})"
    if scheduled is not None:
        cell += f", scheduled {span(scheduled)}"
    owed = record.get("runs_owed")
    if owed:
        cell += f", {record.get('runs_lost', 0)} of {owed} firings lost"
    return cell


def _seconds(value: float) -> str:
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def require_plotting() -> None:
    """Refuse at once (before any simulation) when the plotting extra is
    not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InvalidInput(
            "report",
            "the plots need the 'plots' extra (matplotlib): "
            "pip install 'swh-like-scheduler[plots]'",
        ) from None


def _plots(results: Mapping[str, Any], folder: Path) -> list[Path]:
    require_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    grouped = by_load(results)
    for index, (load, runs) in enumerate(grouped.items()):
        figure, (ok_axes, error_axes) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
        for run in runs:
            hours = [point["hours"] for point in run["timeline"]]
            totals = [max(1, p["OK"] + p["WARNING"] + p["ERROR"]) for p in run["timeline"]]
            ok_axes.plot(
                hours,
                [p["OK"] / t for p, t in zip(run["timeline"], totals, strict=True)],
                label=run["order"],
            )
            error_axes.plot(
                hours,
                [p["ERROR"] / t for p, t in zip(run["timeline"], totals, strict=True)],
                label=run["order"],
            )
        ok_axes.set_ylabel("share of tasks OK")
        error_axes.set_ylabel("share of tasks in ERROR")
        error_axes.set_xlabel("simulated hours")
        ok_axes.set_title(f"{results['workload']['name']}: conditions at load {_load_label(load)}")
        ok_axes.legend()
        written.append(_save(figure, folder / f"conditions-{index}.png"))
        plt.close(figure)
        figure, axes = plt.subplots(figsize=(9, 4))
        for run in runs:
            for key, style, what in (
                ("lateness_cdf", "-", "at dispatch"),
                ("start_lateness_cdf", "--", "at start"),
            ):
                points = run.get(key) or []
                if points:
                    axes.plot(
                        [max(1.0, x) for x, _ in points],
                        [q for _, q in points],
                        style,
                        label=f"{run['order']} {what}",
                    )
        axes.set_xscale("log")
        axes.set_xlabel("lateness, seconds (1 s and less at the left edge)")
        axes.set_ylabel("share of runs")
        axes.set_title(f"lateness at dispatch and at start, load {_load_label(load)}")
        axes.legend()
        written.append(_save(figure, folder / f"lateness-{index}.png"))
        plt.close(figure)
    loads = [load for load in grouped if load is not None]
    if len(loads) > 1:
        figure, axes = plt.subplots(figsize=(9, 4))
        for order in results["orders"]:
            points = [
                (run["load"], run["error_hours"])
                for run in results["runs"]
                if run["order"] == order and run["load"] is not None
            ]
            axes.plot([x * 100 for x, _ in points], [y for _, y in points], marker="o", label=order)
        axes.set_xlabel("load, % of the workers' capacity")
        axes.set_ylabel("ERROR-hours")
        axes.set_title(f"{results['workload']['name']}: ERROR-hours against load")
        axes.legend()
        written.append(_save(figure, folder / "error-hours-by-load.png"))
        plt.close(figure)
    return written


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return path
