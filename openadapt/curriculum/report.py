"""`openadapt report RUN_DIR` for a curriculum run: report.md and report.html with PNG plots of the windowed
solve rate per tier over time, the ECI timeline with its escalations, the reward components, and the held-out
evaluation at each tier. Everything is read from the run directory; nothing is recomputed."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from openadapt.curriculum.config import CONFIG_FILE, EVENTS_FILE, TIERS_FILE, TRAIN_DIR
from openadapt.curriculum.state import STATE_FILE, CurriculumError, CurriculumState, EventLog
from openadapt.kit.eci import TIERS
from openadapt.runfiles import read_jsonl

TIER_COLOURS = {1: "#1b9e77", 2: "#d95f02", 3: "#7570b3", 4: "#e7298a", 5: "#66a61e"}
MIN_POINTS = 2  # fewer rows draw no plot: the report says there is no data yet


def is_curriculum_run(run_dir: Path) -> bool:
    return (run_dir / CONFIG_FILE).exists()


def render_any_report(run_dir: Path) -> Path:
    """`openadapt report RUN_DIR`: the curriculum report for a curriculum run, else the training report."""
    from openadapt.training.report import render_report

    return render_curriculum_report(run_dir) if is_curriculum_run(run_dir) else render_report(run_dir)


def describe_event(event: dict[str, Any]) -> str:
    """One curriculum event (`events.jsonl`) in words, for the report and the command's progress lines."""
    e = event
    kind = e.get("event", "?")
    describe = _DESCRIPTIONS.get(kind)
    if describe is not None:
        try:
            return describe(e)
        except (KeyError, TypeError, ValueError):
            pass  # an event written by another version: fall back to its fields
    fields = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("at", "event", "step", "summary", "rule"))
    return f"{kind.replace('_', ' ')}" + (f": {fields}" if fields else "")


def _validation(e: dict[str, Any]) -> str:
    counts = (e.get("summary") or {}).get("counts") or {}
    found = ", ".join(f"{n} {status}" for status, n in counts.items())
    reused = f", reused {e['reused']}" if e.get("reused") else ""
    return f"ECI {e['target']} version validated: {e['verdict']}" + (f" ({found})" if found else "") + reused


_DESCRIPTIONS = {
    "started": lambda e: f"started on {e['source']} at ECI {e['tier']}",
    "designing": lambda e: "designing the first package for the task prompt",
    "validation": _validation,
    "resumed": lambda e: (f"resumed from {e['from_checkpoint']}" if e.get("from_checkpoint") else
                          "resumed from the start (no checkpoint yet)")
                         + f", {e.get('redone_steps', 0)} step(s) redone",
    "escalation_triggered": lambda e: (f"ECI {e['tier']} reached a windowed solve rate of "
                                       f"{e['windowed_solve_rate']:.2f} over {e['window']} episodes: escalating to "
                                       f"ECI {e['target']}"),
    "heldout_eval": lambda e: (f"held-out ECI {e['eci']} ({e['when']}): solve rate {e['solve_rate']:.2f} "
                               f"[{e['solve_rate_ci95'][0]:.2f}, {e['solve_rate_ci95'][1]:.2f}] on {e['episodes']} "
                               f"seeds, reward {e['mean_return']:.3f}"),
    "check": lambda e: (f"greedy check at ECI {e['eci']} (windowed {e['windowed_solve_rate']:.2f}): solve rate "
                        f"{e['solve_rate']:.2f} [{e['solve_rate_ci95'][0]:.2f}, {e['solve_rate_ci95'][1]:.2f}] on "
                        f"{e['episodes']} fresh seeds: " + ("passed" if e["passed"] else "not yet")),
    "escalated": lambda e: f"escalated ECI {e['tier']} -> {e['target']} (environment version v{e['version']})",
    "escalation_rejected": lambda e: (f"the ECI {e['target']} version was rejected (round {e['round']}): "
                                      f"{e['reason']}"),
    "collapse": lambda e: (f"collapse: ECI {e['tier']} replays at {e['replay_solve_rate']:.2f} while training ECI "
                           f"{e['current']}" + ("; stepping back" if e.get("step_back") else "")),
    "stopped": lambda e: f"stopped ({e['status']}): {e['reason']}",
}


def render_curriculum_report(run_dir: Path) -> Path:
    if not (run_dir / STATE_FILE).exists():
        raise CurriculumError(f"{run_dir} has no {STATE_FILE} yet: the run has not started training")
    state = CurriculumState.load(run_dir / STATE_FILE)
    events = EventLog(run_dir / EVENTS_FILE).read()
    tiers = read_jsonl(run_dir / TIERS_FILE)
    metrics_path = run_dir / TRAIN_DIR / "metrics.jsonl"
    metrics = read_jsonl(metrics_path)
    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    escalations = [e for e in events if e["event"] == "escalated"]
    images = [
        _plot_solve_rates(tiers, escalations, plots / "solve_rate_per_tier.png"),
        _plot_timeline(tiers, escalations, plots / "eci_timeline.png"),
        _plot_components(metrics, escalations, plots / "reward_components.png"),
    ]
    images = [p for p in images if p is not None]
    markdown = _markdown(run_dir, state, events, images)
    (run_dir / "report.md").write_text(markdown, encoding="utf-8")
    (run_dir / "report.html").write_text(_html(markdown, run_dir.name), encoding="utf-8")
    return run_dir / "report.md"


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=110)
    return plt, fig, ax


def _mark(ax, escalations: list[dict[str, Any]]) -> None:
    for e in escalations:
        ax.axvline(e["step"], color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"ECI {e['target']}", (e["step"], 1.0), textcoords="offset points", xytext=(2, -10),
                    fontsize=7, color="grey")


def _save(plt, fig, ax, path: Path) -> Path:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _plot_solve_rates(rows: list[dict[str, Any]], escalations: list[dict[str, Any]], path: Path) -> Path | None:
    if len(rows) < MIN_POINTS:
        return None
    plt, fig, ax = _figure()
    for tier in TIERS:
        points = [(r["step"], r["windowed"][str(tier)]) for r in rows if str(tier) in r.get("windowed", {})]
        if points:
            ax.plot(*zip(*points, strict=True), label=f"ECI {tier}", color=TIER_COLOURS[tier], linewidth=1.4)
    ax.axhline(0.9, color="black", linewidth=0.8, linestyle="--", label="threshold")
    _mark(ax, escalations)
    ax.set(xlabel="optimizer step", ylabel="windowed solve rate", ylim=(-0.02, 1.05),
           title="Training solve rate per tier (binary solved, sampled episodes)")
    ax.legend(fontsize=7, loc="lower right")
    return _save(plt, fig, ax, path)


def _plot_timeline(rows: list[dict[str, Any]], escalations: list[dict[str, Any]], path: Path) -> Path | None:
    if len(rows) < MIN_POINTS:
        return None
    plt, fig, ax = _figure()
    ax.step([r["step"] for r in rows], [r["tier"] for r in rows], where="post", color="#333333")
    _mark(ax, escalations)
    ax.set(xlabel="optimizer step", ylabel="ECI", ylim=(0.5, 5.5), yticks=[1, 2, 3, 4, 5], title="ECI timeline")
    return _save(plt, fig, ax, path)


def _plot_components(rows: list[dict[str, Any]], escalations: list[dict[str, Any]], path: Path) -> Path | None:
    names = sorted({name for r in rows for name in (r.get("components") or {})})
    if len(rows) < MIN_POINTS:
        return None
    plt, fig, ax = _figure()
    steps = [r["step"] for r in rows]
    series = {"episode reward (mean)": [r["reward_mean"] for r in rows]}
    series.update({name: [(r.get("components") or {}).get(name, float("nan")) for r in rows] for name in names})
    for label, values in series.items():
        main = label.startswith("episode")
        ax.plot(steps, values, label=label, color="black" if main else None, linewidth=1.4 if main else 1)
    seen = [v for values in series.values() for v in values if v == v]  # NaN is a component a row lacks
    low, high = min(seen + [0.0]), max(seen + [1.0])  # 0 and 1 always in view: a flat line is not zoomed in on
    _mark(ax, escalations)
    ax.set(xlabel="optimizer step", ylabel="reward", ylim=(low - 0.05, high + 0.05),
           title="Shaped reward and its components (training batches)")
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    return _save(plt, fig, ax, path)


def _markdown(run_dir: Path, state: CurriculumState, events: list[dict[str, Any]], images: list[Path]) -> str:
    config = json.loads((run_dir / CONFIG_FILE).read_text())
    lines = [f"# Curriculum run `{run_dir.name}`", "",
             f"- source: `{state.source}`; model: `{config.get('model')}`",
             f"- status: **{state.status}** ({state.reason or 'running'})",
             f"- tier now: ECI {state.tier}; global step {state.global_step}; {state.episodes} training episodes; "
             f"{state.train_seconds / 60:.1f} min of run time",
             f"- rule: threshold {config['rule']['threshold']}, window {config['rule']['window']}, minimum "
             f"{config['rule']['min_episodes']} episodes, replay share {config['rule']['replay_share']}",
             f"- rejected escalation rounds: {state.rejected_escalations}", ""]
    lines += ["## Held-out evaluation", "",
              "Greedy decoding on held-out seeds (>= 1,000,000, never trained on). The solve rate is the binary "
              "`solved` outcome; the reward is reported apart.", "",
              "| step | ECI | when | episodes | solve rate | 95% CI | mean reward |", "|---|---|---|---|---|---|---|"]
    for e in state.evaluations:
        lines.append(f"| {e.step} | {e.eci} | {e.when} | {e.episodes} | {e.solve_rate:.3f} | "
                     f"{e.solve_rate_ci95[0]:.2f}-{e.solve_rate_ci95[1]:.2f} | {e.mean_return:.3f} |")
    if not state.evaluations:
        lines.append("| - | - | none yet | - | - | - | - |")
    lines += ["", "## Environment versions", "", "| version | ECI | from step | package | evidence |",
              "|---|---|---|---|---|"]
    for v in state.versions:
        lines.append(f"| v{v.version} | {v.eci} | {v.step} | `{v.ref}` | `{v.folder}/` |")
    lines += ["", "## Events", "", "| time | step | what happened |", "|---|---|---|"]
    for e in events:
        lines.append(f"| {e['at']} | {e['step']} | {describe_event(e).replace('|', '/')} |")
    lines += ["", "## Plots", ""]
    lines += [f"![{p.stem}](plots/{p.name})" for p in images] or [
        f"No plots yet: they are drawn once {MIN_POINTS} optimizer steps are logged (`{TIERS_FILE}`)."]
    return "\n".join(lines) + "\n"


def _html(markdown: str, title: str) -> str:
    """A dependency-free rendering: headings, bullet lists, tables and images."""
    body: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            head, *rest = rows
            body.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr>"
                        + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rest)
                        + "</table>")
            rows.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [html.escape(c.strip().strip("`")) for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<p>&bull; {html.escape(line[2:]).replace('`', '')}</p>")
        elif line.startswith("!["):
            src = line[line.index("(") + 1:-1]
            body.append(f'<p><img src="{html.escape(src)}" alt="{html.escape(src)}"></p>')
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    flush()
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
