"""The report's figures, each a pure function from frames to an ``Image``: PNG bytes, and the
same drawing as PDF on demand (matplotlib's object-oriented API on the Agg canvas: no display,
no global pyplot state). The trials they draw come labelled and selected
(``reports.normalize.TrialView``): most take its comparable trials."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from record.schema import Metric
from reports.ablation import DEPTH_KEY, wiring_label
from reports.normalize import TrialView, recorded
from reports.outcomes import diverged
from stats.compare import mean_ci
from stats.routing import collapsed_sites
from trainers.measure.coordcheck_table import Axis, draw

if TYPE_CHECKING:
    from reports.lr_transfer import Drift

MAX_LINES = 10  # beyond this a line plot is unreadable; the tables carry the rest
MAX_PANELS = 8  # panels of one figure, likewise


def _figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (7, 4.2)) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


@dataclass(frozen=True)
class Image:
    """A drawn figure: its PNG, and a function saving the same drawing as a vector PDF (only a
    LaTeX report asks, so the other formats never render a figure twice)."""

    png: bytes
    pdf: Callable[[], bytes] = field(compare=False, repr=False)


def _png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _pdf(fig: Any) -> bytes:
    buffer = io.BytesIO()
    # No creation date: the same figure gives the same bytes, as its PNG does.
    fig.savefig(buffer, format="pdf", bbox_inches="tight", metadata={"CreationDate": None})
    return buffer.getvalue()


def _image(fig: Any) -> Image:
    return Image(_png(fig), lambda: _pdf(fig))


# Fewer seeds than this: a 95% t-interval is too wide to read (two seeds: t = 12.7 times the
# standard error, reaching the bottom of a log axis), so the band shows the seeds' range.
MIN_SEEDS_FOR_INTERVAL = 3


def _band(ax: Any, x: np.ndarray, groups: Sequence[np.ndarray], label: str) -> Any:
    """Mean line over seeds with a band: the 95% interval where every point has at least
    ``MIN_SEEDS_FOR_INTERVAL`` seeds, otherwise the seeds' range (min to max; none with one
    seed). ``spread_caption`` says which. Returns the line's colour."""
    stats = [mean_ci(list(g)) for g in groups]
    mean = np.array([s.mean for s in stats])
    (line,) = ax.plot(x, mean, marker=".", label=label)
    if min((len(g) for g in groups), default=0) >= MIN_SEEDS_FOR_INTERVAL:
        half = np.array([s.half_width for s in stats])
        low, high = mean - half, mean + half
    else:
        low = np.array([np.min(g) if len(g) else np.nan for g in groups])
        high = np.array([np.max(g) if len(g) else np.nan for g in groups])
    if np.isfinite(high - low).any() and np.nanmax(high - low) > 0:
        ax.fill_between(x, low, high, alpha=0.2, color=line.get_color())
    return line.get_color()


def spread_caption(done: pd.DataFrame) -> str:
    """What the figures' shaded bands are, from how many seeds each arm finished (``done``: the
    comparable trials)."""
    seeds = done.groupby("arm")["seed"].nunique() if len(done) else pd.Series(dtype=int)
    if seeds.empty or seeds.max() < 2:
        return "Lines: one seed per arm (no band)."
    if seeds.min() >= MIN_SEEDS_FOR_INTERVAL:
        return "Lines: mean over seeds; bands: 95% Student-t interval over seeds."
    return (
        "Lines: mean over seeds; bands: the range of the seeds (min to max) where an arm has "
        f"fewer than {MIN_SEEDS_FOR_INTERVAL} seeds (a 95% interval over two seeds would span "
        "most of the plot), the 95% Student-t interval where it has more."
    )


def loss_curves(done: pd.DataFrame, curves: pd.DataFrame) -> Image | None:
    """Each arm's validation loss over training, over its comparable trials ``done``."""
    fig = draw_loss_curves(done, curves)
    return None if fig is None else _image(fig)


def draw_loss_curves(done: pd.DataFrame, curves: pd.DataFrame) -> Any:
    """``loss_curves``'s drawing (None where no curve was recorded): per arm the mean over
    seeds with its band, and each seed faintly beside it."""
    data = curves[curves.metric == Metric.VAL_LOSS].merge(done[["run_id", "arm"]], on="run_id")
    if data.empty:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    for arm, g in list(data.groupby("arm"))[:MAX_LINES]:
        steps = np.array(sorted(g["step"].unique()))
        color = _band(ax, steps + 1, [g[g.step == s]["value"].to_numpy() for s in steps], str(arm))
        _seed_lines(ax, g, color)
    ax.set(xlabel="training step", ylabel="validation loss (nats/token)")
    ax.set_title("validation loss per arm (mean over seeds)")
    ax.legend(fontsize=7)
    return fig


SEED_ALPHA = 0.5  # a seed's own line: visible over the band, fainter than the mean


def _seed_lines(ax: Any, curves: pd.DataFrame, color: Any) -> None:
    """Each seed's own curve, faint, in its arm's colour, where the arm has more than one: a
    reader judges the noise from the curves faster than from a table (``seed_lines_caption``)."""
    runs = list(curves.groupby("run_id"))
    if len(runs) < 2:
        return
    for _, run in runs:
        run = run.sort_values("step")
        ax.plot(run["step"] + 1, run["value"], color=color, alpha=SEED_ALPHA, lw=0.8)


def seed_lines_caption(done: pd.DataFrame) -> str:
    """What the loss curves' faint lines are, where an arm has more than one seed (``done``:
    the comparable trials)."""
    if not len(done) or done.groupby("arm")["seed"].nunique().max() < 2:
        return ""
    return " Faint lines: each seed of an arm with more than one."


def depth_scaling(view: TrialView) -> Image | None:
    """The depth-scaling figure; None where the trials span fewer than two depths."""
    fig = draw_depth_scaling(view)
    return None if fig is None else _image(fig)


def draw_depth_scaling(view: TrialView) -> Any:
    """The depth-scaling figure, one line per wiring: final validation loss against depth over
    the finished trials (left), and the fraction of each depth's trials that diverged (right;
    of the trials that trained to an outcome). At depth divergence is a result, and the left
    panel's means are over the survivors only."""
    ran = view.outcome
    if ran.empty or ran[DEPTH_KEY].nunique() < 2:
        return None
    ran = ran.assign(wiring=ran.apply(wiring_label, axis=1), diverged=diverged(ran))
    done = ran[ran.index.isin(view.comparable.index)]  # comparable trials trained to an outcome
    fig, axes = _figure(ncols=2, size=(13, 4.2))
    loss_ax, rate_ax = axes[0]
    for wiring, g in list(ran.groupby("wiring"))[:MAX_LINES]:
        depths = np.array(sorted(g[DEPTH_KEY].unique()))
        kept = done[done["wiring"] == wiring]
        losses = [kept[kept[DEPTH_KEY] == d][Metric.FINAL_VAL_LOSS].to_numpy() for d in depths]
        _band(loss_ax, depths, losses, str(wiring))
        rates = [g[g[DEPTH_KEY] == d]["diverged"].mean() for d in depths]
        rate_ax.plot(depths, rates, marker="o", label=str(wiring))
    loss_ax.set(ylabel="final validation loss (finished trials)")
    loss_ax.set_title("validation loss against depth (mean over seeds)")
    rate_ax.set(ylabel="fraction of trials diverged", ylim=(-0.05, 1.05))
    rate_ax.set_title("divergence against depth")
    for ax in (loss_ax, rate_ax):
        ax.set(xscale="log", xlabel="blocks (n_layers)")
        ax.set_xticks(sorted(ran[DEPTH_KEY].unique()))
        ax.get_xaxis().set_major_formatter(_plain_ticks())
        ax.get_xaxis().set_minor_formatter(_null_ticks())
    loss_ax.legend(fontsize=7)
    return fig


def lr_basin(stage: pd.DataFrame, param: str) -> Image | None:
    """A tuned grid's learning-rate stage, one line per arm (an arm per depth where depth is an
    axis): each value's final validation loss (mean over the stage's seeds; the seeds' range
    as a band) against the value on a log axis; the chosen value ringed. Stage trials that did
    not finish are left out (their value then has fewer points). None without a stage."""
    done = stage[stage["status"] == "finished"] if "status" in stage else stage
    if done.empty or Metric.FINAL_VAL_LOSS not in done:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    for arm, g in list(done.groupby("stage_arm"))[:MAX_LINES]:
        values = np.array(sorted(g["stage_value"].unique()))
        losses = [g[g["stage_value"] == v][Metric.FINAL_VAL_LOSS].to_numpy() for v in values]
        _band(ax, values, losses, str(arm))
        means = np.array([np.mean(x) for x in losses])
        ax.plot(values[np.argmin(means)], means.min(), "o", mfc="none", ms=10, color="black")
    ax.set(xscale="log", xlabel=param, ylabel="final validation loss (nats/token)")
    ax.set_title("learning-rate basin per arm (ringed: the value chosen)")
    ax.legend(fontsize=7)
    return _image(fig)


def lr_transfer_basins(
    stage: pd.DataFrame, by_family: dict[str, dict[int, str]], param: str
) -> Image | None:
    """CompleteP's Fig. 1 at a sweep's size: one panel per family (``by_family``: name -> depth
    -> the stage arm tuned there), final validation loss against ``param`` on a log axis, one
    line per depth, the chosen value ringed. None without a finished stage trial."""
    done = stage[stage["status"] == "finished"] if "status" in stage else stage
    if done.empty or Metric.FINAL_VAL_LOSS not in done or not by_family:
        return None
    shown = list(by_family.items())[:MAX_PANELS]
    ncols = min(len(shown), 2)
    nrows = -(-len(shown) // ncols)
    fig, axes = _figure(ncols, nrows, size=(6.5 * ncols, 4 * nrows))
    for ax, (family, arms) in zip(axes.flat, shown, strict=False):
        for depth, arm in arms.items():
            g = done[done["stage_arm"] == arm]
            if g.empty:
                continue
            values = np.array(sorted(g["stage_value"].unique()))
            losses = [g[g["stage_value"] == v][Metric.FINAL_VAL_LOSS].to_numpy() for v in values]
            _band(ax, values, losses, f"L={depth}")
            means = np.array([np.mean(x) for x in losses])
            ax.plot(values[np.argmin(means)], means.min(), "o", mfc="none", ms=9, color="black")
        ax.set(xscale="log", xlabel=param, ylabel="final validation loss (nats/token)")
        _grid_ticks(ax.xaxis, sorted(done["stage_value"].unique()))
        ax.set_title(family)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    fig.subplots_adjust(hspace=0.35)  # a row's x label clear of the next row's titles
    return _image(fig)


def _grid_ticks(axis: Any, values: Sequence[float]) -> None:
    """A log axis ticked at a learning-rate grid's values, labelled plainly (``0.0126``)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    axis.set_major_locator(FixedLocator(list(values)))
    axis.set_major_formatter(FixedFormatter([f"{v:.3g}" for v in values]))
    axis.set_minor_locator(NullLocator())


def lr_transfer_optima(
    drifts: Sequence[Drift], values: Sequence[float], param: str
) -> Image | None:
    """The optimum against depth, one line per family, both axes log: the refined estimates
    (open markers where the best is on the grid's edge), the fitted power law, and the grid's
    ``values`` as dotted lines (the choices the refinement lies between). None where no family
    has two depths."""
    shown = [d for d in drifts if len(d.optima) >= 2][:MAX_LINES]
    if not shown:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    for d in shown:
        depths = np.array(d.depths, dtype=float)
        estimates = np.array([o.estimate for o in d.optima])
        (line,) = ax.plot(depths, estimates, "o", label=f"{d.family} (slope {d.slope:+.2f})")
        edge = np.array([not o.bracketed for o in d.optima])
        ax.plot(depths[edge], estimates[edge], "o", mfc="white", color=line.get_color())
        centre = np.exp(np.mean(np.log(estimates)) - d.slope * np.mean(np.log(depths)))
        ax.plot(depths, centre * depths**d.slope, "-", color=line.get_color(), alpha=0.7)
    for value in values:
        ax.axhline(value, color="grey", linestyle=":", linewidth=0.8)
    ax.set(xscale="log", yscale="log", xlabel="blocks (n_layers)", ylabel=f"optimal {param}")
    _grid_ticks(ax.yaxis, values)
    depths_all = sorted({x for d in shown for x in d.depths})
    ax.set_xticks(depths_all)
    ax.get_xaxis().set_major_formatter(_plain_ticks())
    ax.get_xaxis().set_minor_formatter(_null_ticks())
    ax.set_title("optimal learning rate against depth (flat: it transfers)")
    ax.legend(fontsize=7)
    return _image(fig)


def _integer_ticks(ax: Any, y: bool = False) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if y:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _plain_ticks() -> Any:
    from matplotlib.ticker import ScalarFormatter

    formatter = ScalarFormatter()
    formatter.set_scientific(False)
    return formatter


def _null_ticks() -> Any:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def plain_log_labels(axis: Any) -> None:
    """Plain decimal tick labels on a log axis whose view spans less than a decade.

    Matplotlib labels such an axis at its minor ticks in scientific form (``2.225 × 10^0``): a
    loss axis from 2.2 to 2.3 then reads as powers of ten it never reaches. Within a decade a
    log axis is nearly linear, so evenly spaced ticks labelled as decimals read as they should.
    Axes spanning a decade or more keep their ``10^k`` labels."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

    low, high = sorted(axis.get_view_interval())
    if axis.get_scale() != "log" or not low > 0 or high / low >= 10:
        return
    axis.set_major_locator(MaxNLocator(nbins=5))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())


PROFILE_PANELS = (
    ("output_norm", "block output norm"),
    ("stream_norm", "stream norm entering the block"),
    ("grad_norm", "parameter-gradient norm"),
)


def deepest(trials: pd.DataFrame) -> pd.DataFrame:
    """The trials at the largest depth (profiles of different depths do not overlay)."""
    if trials.empty or DEPTH_KEY not in trials:
        return trials
    return trials[trials[DEPTH_KEY] == trials[DEPTH_KEY].max()]


def dilution_profiles(done: pd.DataFrame, profiles: pd.DataFrame) -> Image | None:
    """The per-layer picture (the AttnRes paper's Figure 5 shape): each arm's mean over seeds
    (its comparable trials ``done``) of output, stream and gradient norm against block index,
    at the deepest setting."""
    done = deepest(done)
    data = profiles.merge(done[["run_id", "arm"]], on="run_id")
    if data.empty:
        return None
    fig, axes = _figure(ncols=3, size=(14, 4.2))
    for ax, (column, title) in zip(axes[0], PROFILE_PANELS, strict=True):
        for arm, g in list(data.groupby("arm"))[:MAX_LINES]:
            blocks = np.array(sorted(g["block"].unique()))
            _band(ax, blocks, [g[g.block == b][column].to_numpy() for b in blocks], str(arm))
        ax.set(xlabel="block", yscale="log", title=title)
        plain_log_labels(ax.yaxis)
        _integer_ticks(ax)
    axes[0, 0].legend(fontsize=7)
    return _image(fig)


def collapsed_in_any_seed(
    g: pd.DataFrame,
    weights: Mapping[str, np.ndarray],
    top1: Mapping[str, np.ndarray],
    spread: Mapping[str, np.ndarray],
    collapsed: Mapping[str, np.ndarray] | None = None,
) -> Any:
    """(sites,) bool: the sites that collapsed (``stats.routing.collapsed_sites``) in at least
    one of the arm's trials ``g``, each at its own ``train.routing_alarm`` (the default where
    the record predates the field: ``reports.normalize.recorded``); a trial whose profile has
    no ``collapsed`` share (recorded before issue 50) by the averaged rule it was judged by."""
    out = np.zeros(len(weights[g["run_id"].iloc[0]]), dtype=bool)
    for _, row in g.iterrows():
        run = row["run_id"]
        if run not in top1 or run not in spread:
            continue
        threshold = float(recorded(row, ALARM_KEY))  # type: ignore[arg-type]
        share = (collapsed or {}).get(run)
        out |= collapsed_sites(top1[run], spread[run], weights[run], threshold, share)
    return out


ALARM_KEY = "train.routing_alarm"


def seed_mean(arrays: Mapping[str, np.ndarray], runs: Sequence[str]) -> np.ndarray:
    """The mean over ``runs`` of their (site x source) arrays, NaN where no run has a value."""
    with warnings.catch_warnings():  # sites with no such source are NaN in every seed
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.stack([arrays[r] for r in runs]), axis=0)


def depth_weight_heatmaps(
    done: pd.DataFrame,
    weights: Mapping[str, np.ndarray],
    top1: Mapping[str, np.ndarray] | None = None,
    spread: Mapping[str, np.ndarray] | None = None,
    importance: Mapping[str, np.ndarray] | None = None,
    collapsed: Mapping[str, np.ndarray] | None = None,
) -> list[tuple[str, Image, bool]]:
    """Per AttnRes arm (deepest setting), the mean depth-attention weights over its comparable
    trials' seeds (``done``), the pre-attention sites and the pre-MLP sites apart (the paper's
    Figure 8 shape). Site rows are in sublayer order with the output site last. A site that
    collapsed (``stats.routing``: most of its tokens read one source through a saturated
    softmax) in any seed is framed in red. Where every seed measured it, each source's causal importance
    (``source_importance``: the loss change when it is left out) is drawn below, site for site;
    each arm's figure comes with whether it was."""
    done = deepest(done)
    done = done[done["run_id"].isin(list(weights))]
    out = []
    for arm, g in done.groupby("arm"):
        runs = list(g["run_id"])
        framed = collapsed_in_any_seed(g, weights, top1 or {}, spread or {}, collapsed)
        panels = [(seed_mean(weights, runs), f"{arm}: depth weight", _linear(0.0, 1.0))]
        if importance is not None and measured_by_all(importance, runs):
            mean = seed_mean(importance, runs)
            panels.append((mean, "loss change without the source (nats)", _diverging(mean)))
        fig, axes = _figure(nrows=len(panels), ncols=2, size=(11, 4.2 * len(panels)))
        for row, (values, what, (cmap, norm)) in enumerate(panels):
            _site_panels(axes[row], values, what, cmap, norm, framed)
        fig.tight_layout()
        out.append((str(arm), _image(fig), len(panels) > 1))
    return out


def measured_by_all(arrays: Mapping[str, np.ndarray], runs: Sequence[str]) -> bool:
    """Whether every one of ``runs`` (at least one) recorded an array in ``arrays``: a mean
    over seeds is drawn or tabled only then, never over the seeds that happened to measure."""
    return bool(runs) and all(r in arrays for r in runs)


def _linear(low: float, high: float) -> tuple[str, Any]:
    from matplotlib.colors import Normalize

    return "viridis", Normalize(low, high)


def _diverging(values: np.ndarray) -> tuple[str, Any]:
    """Loss changes on one symmetric scale about zero, linear within 0.01 nats and logarithmic
    beyond: a few sources cost tenths of a nat, most thousandths, and both must show. The output
    site (not drawn) does not set the scale."""
    from matplotlib.colors import SymLogNorm

    drawn = values[:-1]
    top = float(np.nanmax(np.abs(drawn))) if np.isfinite(drawn).any() else 1.0
    top = max(top, 0.02)
    return "RdBu_r", SymLogNorm(linthresh=0.01, vmin=-top, vmax=top)


def _site_panels(
    axes: Any, values: np.ndarray, title: str, cmap: str, norm: Any, collapsed: np.ndarray
) -> None:
    """One (site x source) array as two heatmaps, pre-attention and pre-MLP sites, on one colour
    scale; rows are blocks 1..n (the output site, the last row, is left out)."""
    n_sites = values.shape[0] - 1
    for ax, start, part in ((axes[0], 0, "pre-attention"), (axes[1], 1, "pre-MLP")):
        rows = values[start:n_sites:2]
        extent = (-0.5, rows.shape[1] - 0.5, rows.shape[0] + 0.5, 0.5)
        image = ax.imshow(
            np.ma.masked_invalid(rows),
            aspect="auto",
            cmap=cmap,
            norm=norm,
            extent=extent,
            interpolation="nearest",
        )
        ax.set(xlabel="source (0 = embedding)", ylabel="layer")
        ax.set_title(f"{title}, {part} sites", fontsize=9)
        _frame_rows(ax, np.flatnonzero(collapsed[start:n_sites:2]), rows.shape[1])
        _integer_ticks(ax, y=True)
        ax.figure.colorbar(image, ax=ax)


def _frame_rows(ax: Any, rows: np.ndarray, width: int) -> None:
    """A red frame around each of the heatmap's ``rows`` (0-based; drawn at block row + 1)."""
    from matplotlib.patches import Rectangle

    for r in rows:
        frame = Rectangle((-0.5, r + 0.5), width, 1, fill=False, edgecolor="red", linewidth=2)
        ax.add_patch(frame)


def pareto(
    trials: pd.DataFrame, keys: Sequence[str], front: Sequence[int], labels: Sequence[str]
) -> Image | None:
    """Two objectives against each other, the Pareto front joined up."""
    if len(keys) != 2 or trials.empty:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    x, y = trials[keys[0]].to_numpy(float), trials[keys[1]].to_numpy(float)
    ax.scatter(x, y, s=14, alpha=0.6, label="trials")
    order = sorted(front, key=lambda i: x[i])
    ax.plot(x[order], y[order], color="C3", marker="o", label="Pareto front")
    ax.set(xlabel=labels[0], ylabel=labels[1], title="multi-objective search")
    ax.legend(fontsize=7)
    return _image(fig)


def draw_compute_fits(
    points: dict[str, tuple[np.ndarray, np.ndarray]], fits: dict[str, Callable[[Any], Any]]
) -> Any:
    """The matplotlib figure of ``compute_fits`` (for a test to read its axes)."""
    fig, axes = _figure()
    ax = axes[0, 0]
    for name, (c, loss) in points.items():
        (line,) = ax.plot(c, loss, "o", ms=4, label=name)
        if name in fits:
            grid = np.geomspace(c.min(), c.max(), 50)
            ax.plot(grid, fits[name](grid), color=line.get_color(), lw=1)
    ax.set(xscale="log", yscale="log", xlabel="training FLOPs", ylabel="final validation loss")
    ax.set_title("loss against compute, fitted L = A * C^-alpha")
    ax.legend(fontsize=7)
    plain_log_labels(ax.yaxis)
    return fig


def compute_fits(
    points: dict[str, tuple[np.ndarray, np.ndarray]], fits: dict[str, Callable[[Any], Any]]
) -> Image | None:
    """Loss against training compute per wiring, with each fitted power law."""
    if not points:
        return None
    return _image(draw_compute_fits(points, fits))


def draw_iso_flop(curves: dict[tuple[float, str], dict[int, np.ndarray]]) -> Any:
    """The matplotlib figure of ``iso_flop``: final loss against depth, one line per (FLOP budget,
    wiring), a colour per budget and a line style per wiring, mean with a 95% band over seeds."""
    fig, axes = _figure()
    ax = axes[0, 0]
    budgets = sorted({b for b, _ in curves})
    wirings = sorted({w for _, w in curves})
    colors = {b: f"C{i}" for i, b in enumerate(budgets)}
    styles = {w: ("-", "--", ":", "-.")[i % 4] for i, w in enumerate(wirings)}
    for (budget, wiring), by_depth in sorted(curves.items()):
        depths = np.asarray(sorted(by_depth), dtype=float)
        stats = [mean_ci(list(by_depth[int(d)])) for d in depths]
        mean = np.array([s.mean for s in stats])
        half = np.array([s.half_width for s in stats])
        color, style = colors[budget], styles[wiring]
        ax.plot(depths, mean, style, marker=".", color=color, label=f"{budget:.3g} FLOPs, {wiring}")
        if np.isfinite(half).any():
            ax.fill_between(depths, mean - half, mean + half, alpha=0.15, color=color)
    ax.set(xscale="log", xlabel="n_layers (Transformer blocks)", ylabel="final validation loss")
    ax.xaxis.set_major_formatter(_plain_ticks())
    ax.xaxis.set_minor_formatter(_null_ticks())
    ax.set_xticks(sorted({d for c in curves.values() for d in c}))
    ax.set_title("iso-FLOP curves: loss against depth at each training budget")
    ax.legend(fontsize=7, handlelength=3)
    return fig


def iso_flop(curves: dict[tuple[float, str], dict[int, np.ndarray]]) -> Image | None:
    """Loss against depth per FLOP budget and wiring; None when there is nothing to draw or more
    lines than a plot can show (the table carries them)."""
    if not curves or len(curves) > MAX_LINES:
        return None
    return _image(draw_iso_flop(curves))


def coordcheck(table: Sequence[Mapping[str, float]], axis: Axis, title: str) -> Image:
    """A recorded coord check's figure (``trainers.measure.coordcheck_table.draw``: the one drawing
    ``nas coordcheck`` writes too)."""
    return _image(draw(table, axis, title))
