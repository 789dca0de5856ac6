"""`openadapt report RUN_DIR`: `report.md` and `report.html` with PNG plots (`plots/`) of a run's reward and
solve-rate curves, from `config.json`, `metrics.jsonl`, `summary.json` and (curriculum runs) `events.jsonl`.

The page is a list of `Section`s built from a `RunData`; a curriculum report adds its own sections with
`render_report(run_dir, extra_sections=[...])`, and escalation events in `events.jsonl` (rows with `step` and
`kind`, optionally `eci`) are drawn on the curves and listed.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from openadapt.errors import UsageError
from openadapt.training.rundir import RunDir


class RunData(BaseModel):
    path: Path
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    summary: dict[str, Any] | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def load(cls, run_dir: Path | str) -> RunData:
        run = RunDir(run_dir)
        if not run.config_path.exists():
            raise UsageError(f"{run_dir}: not a training run directory (no config.json)")
        events_path = run.path / "events.jsonl"
        events = [json.loads(line) for line in events_path.read_text().splitlines() if line.strip()] \
            if events_path.exists() else []
        return cls(path=run.path, config=json.loads(run.config_path.read_text()), metrics=run.metrics(),
                   summary=run.summary(), events=events)


class Section(BaseModel):
    title: str
    markdown: str
    html: str


SectionBuilder = Callable[[RunData], Section | None]


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _window(n: int) -> int:
    return max(1, min(20, n // 10))


MIN_POINTS = 2  # fewer steps than this draw no curve: "no data yet", not a dot zoomed into noise
MIN_SPAN = 0.2  # the least y-range a reward axis shows when the package's range is unknown


def reward_axis(data: RunData, values: Sequence[float]) -> tuple[float, float]:
    """The reward axis: the package's declared reward range (so a flat line reads as flat), widened to the data;
    else the data with at least MIN_SPAN around it."""
    low, high = min(values), max(values)
    declared = _declared_reward_range(str(data.config.get("package", "")))
    if declared is not None:
        low, high = min(low, declared[0]), max(high, declared[1])
    elif high - low < MIN_SPAN:
        middle = (high + low) / 2
        low, high = middle - MIN_SPAN / 2, middle + MIN_SPAN / 2
    pad = 0.05 * (high - low)
    return low - pad, high + pad


def _declared_reward_range(package: str) -> tuple[float, float] | None:
    from openadapt.envpkg.loader import resolve

    try:
        low, high = resolve(package).manifest.openadapt.reward_range
    except Exception:  # noqa: BLE001 - the package moved or is gone: the data decide the axis
        return None
    return float(low), float(high)


def plot_curves(data: RunData) -> dict[str, Path]:
    """plots/reward.png and plots/solve_rate.png (raw per step, and a moving average) in the run directory;
    nothing while the run has fewer than MIN_POINTS steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = data.metrics
    if len(rows) < MIN_POINTS:
        return {}
    steps = [r["step"] for r in rows]
    w = _window(len(rows))
    files: dict[str, Path] = {}
    plots = (("reward", "reward_mean", "episode reward (sampled)", "Training reward per optimizer step"),
             ("solve_rate", "solve_rate", "solve rate (sampled)", "Sampled solve rate per optimizer step"))
    for name, key, label, title in plots:
        values = [r[key] for r in rows]
        fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
        ax.plot(steps, values, color="#9db4d6", linewidth=0.8, marker="." if len(rows) < 30 else None,
                label=f"{label}, per step")
        if w > 1:
            ax.plot(steps, smooth(values, w), color="#1f4e99", linewidth=2, label=f"moving average over {w} steps")
        if name == "reward":
            low = [v - r.get("reward_std", 0.0) for v, r in zip(values, rows, strict=True)]
            high = [v + r.get("reward_std", 0.0) for v, r in zip(values, rows, strict=True)]
            ax.fill_between(steps, low, high, color="#9db4d6", alpha=0.25, linewidth=0, label="+- one std")
            ax.set_ylim(*reward_axis(data, [*low, *high]))
        summary = data.summary or {}
        if name == "solve_rate":
            for which, colour in (("before", "#b03030"), ("after", "#2a8a2a")):
                report = summary.get(which)
                for tier in (report or {}).get("tiers", []):
                    ax.axhline(tier["solve_rate"], color=colour, linestyle="--", linewidth=1,
                               label=f"held-out {which}, ECI {tier['eci']}: {tier['solve_rate']:.2f}")
            ax.set_ylim(-0.02, 1.02)
        for event in data.events:
            if "step" in event:
                ax.axvline(event["step"], color="#888888", linestyle=":", linewidth=1)
                ax.annotate(f"{event.get('kind', 'event')}" + (f" ECI {event['eci']}" if "eci" in event else ""),
                            (event["step"], ax.get_ylim()[1]), fontsize=7, rotation=90, va="top", ha="right")
        ax.set_title(f"{title} ({data.path.name})", fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        folder = data.path / "plots"
        folder.mkdir(exist_ok=True)
        path = folder / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        files[name] = path
    return files


def _table(headers: list[str], rows: list[list[str]]) -> tuple[str, str]:
    md = "| " + " | ".join(headers) + " |\n|" + "---|" * len(headers) + "\n"
    md += "".join("| " + " | ".join(r) + " |\n" for r in rows)
    ht = "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"
    ht += "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>"
    return md, ht


def run_state(data: RunData) -> str:
    """How the run stands: completed, interrupted, stopped early, running (a process holds it), or stopped
    without finishing (no process holds it: killed, or it crashed)."""
    stopped = (data.summary or {}).get("stopped")
    if stopped in (None, "running"):
        return "running" if _held(data.path) else "not running: killed or crashed before it finished"
    return str(stopped)


def _held(folder: Path) -> bool:
    """Whether a live process holds the run directory's lock (the lock is only probed, never taken)."""
    import fcntl

    try:
        with open(folder / ".lock", "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def overview_section(data: RunData) -> Section:
    c, s = data.config, data.summary or {}
    done = max([r.get("step", 0) for r in data.metrics] + [s.get("global_step") or 0])
    per_step = s.get("seconds_per_step_median")
    if per_step is None and data.metrics:
        per_step = statistics.median(r.get("seconds_per_step", 0.0) for r in data.metrics)
    timing = f"{s['train_seconds']} s" if s.get("train_seconds") is not None else "-"
    rows = [["package", str(c.get("package"))], ["model", f"{c.get('model')} ({s.get('model_kind', '?')})"],
            ["ECI", ", ".join(map(str, c.get("eci", [])))],
            ["steps", f"{done} of {c.get('steps')} ({run_state(data)})"],
            ["batch", f"{c.get('prompts_per_step')} groups x {c.get('num_generations')} generations, "
                      f"max {c.get('max_turns')} turns, {c.get('max_completion_length')} tokens per turn"],
            ["learning rate", str(c.get("lr"))], ["reward", str(c.get("reward"))], ["KL beta", str(c.get("beta"))],
            ["train time", timing + (f"; median {per_step:.2f} s/step" if per_step is not None else "")]]
    if s.get("warmup"):
        w = s["warmup"]
        rows.append(["format warm-up", f"{w['steps']} steps on random actions, loss {w['first_loss']} -> "
                                       f"{w['final_loss']}, {w['seconds']} s"])
    if s.get("warm_start"):
        w, src = s["warm_start"], s["warm_start"]["source"]
        tiers = ", ".join(f"ECI {t}: {n}" for t, n in src.get("per_tier", {}).items())
        rows.append(["warm start", f"{src['solved']} solved {src['policy']} episodes of {src['played']} ({tiers}; "
                                   f"{w['turns']} turns), {w['steps']} steps, loss {w['first_loss']} -> "
                                   f"{w['final_loss']}, {w['seconds']} s; held-out 'before' is after it"])
    md, ht = _table(["", ""], rows)
    return Section(title="Run", markdown=md, html=ht)


def heldout_section(data: RunData) -> Section | None:
    s = data.summary or {}
    rows = []
    for which in ("before", "after"):
        report = s.get(which)
        for t in (report or {}).get("tiers", []):
            lo, hi = t["solve_rate_ci95"]
            rows.append([which, str(t["eci"]), str(t["episodes"]), f"{t['solve_rate']:.3f}", f"{lo:.3f}-{hi:.3f}",
                         f"{t['mean_return']:.3f}"])
    if not rows:
        return None
    md, ht = _table(["model", "ECI", "held-out seeds", "solve rate", "95% CI (Wilson)", "mean return"], rows)
    note = ("Greedy decoding on seeds from 1,000,000 up, which training never draws. 'before' is the model GRPO "
            "started from (tiny: after the format warm-up on random actions).")
    return Section(title="Held-out evaluation", markdown=md + "\n" + note + "\n", html=ht + f"<p>{note}</p>")


def curves_section(data: RunData) -> Section | None:
    files = plot_curves(data)
    rows = data.metrics
    if not files:
        text = (f"No curves yet: {len(rows)} optimizer step(s) recorded; they are drawn from {MIN_POINTS} steps "
                "on. Run `openadapt report` again later.")
        return Section(title="Curves", markdown=text + "\n", html=f"<p>{html.escape(text)}</p>")
    tail = rows[-10:]
    text = (f"{len(rows)} steps; last 10 steps: reward {statistics.fmean(r['reward_mean'] for r in tail):.3f}, "
            f"sampled solve rate {statistics.fmean(r['solve_rate'] for r in tail):.3f}.")
    md = text + "\n\n" + "".join(f"![{name}](plots/{path.name})\n\n" for name, path in files.items())
    ht = f"<p>{html.escape(text)}</p>" + "".join(f'<img src="plots/{path.name}" alt="{name}">'
                                                 for name, path in files.items())
    return Section(title="Curves", markdown=md, html=ht)


def events_section(data: RunData) -> Section | None:
    if not data.events:
        return None
    keys = sorted({k for e in data.events for k in e})
    md, ht = _table(keys, [[str(e.get(k, "")) for k in keys] for e in data.events])
    return Section(title="Events", markdown=md, html=ht)


DEFAULT_SECTIONS: tuple[SectionBuilder, ...] = (overview_section, heldout_section, curves_section, events_section)


def render_report(run_dir: Path | str, extra_sections: Sequence[SectionBuilder] = ()) -> Path:
    """Write `report.md`, `report.html` and the PNG plots into the run directory; returns report.md's path."""
    data = RunData.load(run_dir)
    sections = [s for build in (*DEFAULT_SECTIONS, *extra_sections) if (s := build(data)) is not None]
    title = f"Training report: {data.path.name}"
    md = f"# {title}\n\n" + "".join(f"## {s.title}\n\n{s.markdown}\n" for s in sections)
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}img{max-width:100%}")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            + "".join(f"<h2>{html.escape(s.title)}</h2>{s.html}" for s in sections) + "</body></html>")
    (data.path / "report.md").write_text(md)
    (data.path / "report.html").write_text(page)
    return data.path / "report.md"
