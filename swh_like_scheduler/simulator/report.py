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

from ..exceptions import InvalidInput

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
        lines += [
            _heading(load, types, runs[0].get("load_not_reached") or {}),
            "",
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
        lines += ["", *_group_table(runs)]
    for name in plots:
        lines += [f"![{name}]({name})", ""]
    return "\n".join(lines)


def _heading(load: float | None, types: Mapping[str, Any], short: Mapping[str, float]) -> str:
    """A load's heading: the load asked, and the types that did not reach it
    with the load they reached (never a load that was not simulated)."""
    if load is None or not short:
        return f"## Load {_load_label(load)}"
    reached = [name for name in types if name not in short]
    missed = ", ".join(f"{name} only {value:.0%}" for name, value in short.items())
    if not reached:
        return f"## Load {_load_label(load)} asked, not reached: {missed}"
    return f"## Load {_load_label(load)} for {', '.join(reached)}; {missed}"


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
