"""Tables (papa.tables) and figures (papa.plots) on synthetic probe results."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from papa import plots, tables

MODELS = ["bert-base", "roberta-base"]
TASKS = ["sst2", "cola"]
SEEDS = [0, 1, 2]
FRACTIONS = [1.0, 0.5, 0.125, 0.0625, 0.0]
EPOCHS = [0, 1]
METRICS = ["accuracy", "mcc"]
MAIN = {"sst2": "accuracy", "cola": "mcc"}
N_HEADS = 144
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def final_score(model: str, task: str, fraction: float, seed: int, metric: str, selection: str = "lambda") -> float:
    """Deterministic synthetic final-epoch score: higher with more dynamic heads."""
    base = 0.9 if model == "roberta-base" else 0.8
    base -= 0.3 if task == "cola" else 0.0
    base -= 0.05 if metric == "mcc" else 0.0
    base -= {"lambda": 0.0, "reversed": 0.04, "random": 0.02}[selection] * (1 - fraction)
    return base - 0.15 * (1 - fraction) + 0.01 * (seed - 1)


def run_frame(model, task, fraction, seed, selection="lambda", constants="average") -> pd.DataFrame:
    rows = []
    for epoch in EPOCHS:
        for metric in METRICS:
            final = final_score(model, task, fraction, seed, metric, selection)
            # Earlier epochs are much worse: a summary that used them would be visibly off.
            score = final if epoch == EPOCHS[-1] else final - 0.5
            rows.append(dict(model=model, task=task, constants=constants, selection=selection,
                             fraction_dynamic=fraction, n_dynamic=round(fraction * N_HEADS), seed=seed,
                             epoch=epoch, metric=metric, score=score, train_loss=1.0 / (epoch + 1)))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frames():
    out = [run_frame(m, t, f, s) for m in MODELS for t in TASKS for f in FRACTIONS for s in SEEDS]
    # Selection-order runs (Fig. 5) for one model/task.
    out += [run_frame("roberta-base", "sst2", f, s, selection=sel)
            for sel in ["reversed", "random"] for f in FRACTIONS for s in SEEDS]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(out))
    return [out[i] for i in order]  # unordered input: the table must sort it


@pytest.fixture(scope="module")
def probe(frames):
    return tables.probe_table(frames)


@pytest.fixture(scope="module")
def summary(probe):
    return tables.summary_table(probe, main_metric=MAIN)


def lambdas_frame(model="roberta-base", task="sst2", layers=4, heads=6, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lam = rng.random(layers * heads)
    rank = np.empty(layers * heads, dtype=int)
    rank[np.argsort(lam, kind="stable")] = np.arange(layers * heads)
    layer, head = np.divmod(np.arange(layers * heads), heads)
    return pd.DataFrame(dict(model=model, task=task, constants="average", layer=layer, head=head,
                             **{"lambda": lam}, rank=rank))


# --------------------------------------------------------------------------- probe_table


def test_probe_table_sorted_typed_and_keeps_extras(frames, probe):
    n_runs = len(MODELS) * len(TASKS) * len(FRACTIONS) * len(SEEDS) + 2 * len(FRACTIONS) * len(SEEDS)
    assert len(probe) == n_runs * len(EPOCHS) * len(METRICS)
    assert list(probe.columns[:10]) == list(tables.PROBE_COLUMNS)
    assert "train_loss" in probe.columns
    assert list(probe.index) == list(range(len(probe)))
    assert probe["fraction_dynamic"].dtype == np.float64
    for c in ["n_dynamic", "seed", "epoch"]:
        assert probe[c].dtype == np.int64
    assert probe["score"].dtype == np.float64
    assert pd.api.types.is_string_dtype(probe["model"])
    # Deterministic: any input order gives the same table; fraction descending within a run group.
    again = tables.probe_table(list(reversed(frames)))
    pd.testing.assert_frame_equal(probe, again)
    g = probe[(probe.model == "bert-base") & (probe.task == "cola") & (probe.selection == "lambda")]
    assert list(g["fraction_dynamic"].drop_duplicates()) == sorted(FRACTIONS, reverse=True)
    assert probe.loc[0, "model"] == "bert-base" and probe.loc[0, "fraction_dynamic"] == 1.0


def test_probe_table_validation(frames):
    with pytest.raises(ValueError, match="empty"):
        tables.probe_table([])
    with pytest.raises(ValueError, match="'n_dynamic'"):
        tables.probe_table([frames[0].drop(columns="n_dynamic")])
    with pytest.raises(ValueError, match="same key"):
        tables.probe_table([frames[0], frames[0]])
    bad = frames[0].copy()
    bad["seed"] = 0.5
    with pytest.raises(ValueError, match="'seed'.*non-integer"):
        tables.probe_table([bad])


# --------------------------------------------------------------------------- summary_table


def test_summary_uses_final_epoch_only(summary):
    assert len(summary) == (len(MODELS) * len(TASKS) * len(FRACTIONS) + 2 * len(FRACTIONS)) * len(METRICS)
    assert (summary["n_seeds"] == 3).all()
    for _, row in summary.sample(20, random_state=0).iterrows():
        expected = np.mean([final_score(row.model, row.task, row.fraction_dynamic, s, row.metric, row.selection)
                            for s in SEEDS])
        assert row["mean"] == pytest.approx(expected, abs=1e-12)


def test_summary_takes_max_epoch_per_run_even_if_runs_differ():
    f1 = run_frame("m", "sst2", 1.0, 0)
    f2 = run_frame("m", "sst2", 1.0, 1)
    f2 = pd.concat([f2, f2[f2.epoch == 1].assign(epoch=2, score=0.123)], ignore_index=True)
    s = tables.summary_table(tables.probe_table([f1, f2]))
    row = s[s.metric == "accuracy"].iloc[0]
    assert row["mean"] == pytest.approx((final_score("m", "sst2", 1.0, 0, "accuracy") + 0.123) / 2)


def test_summary_mean_and_ci_by_hand():
    rows = [dict(model="m", task="t", constants="average", selection="lambda", fraction_dynamic=1.0, n_dynamic=12,
                 seed=s, epoch=e, metric="accuracy", score=(x if e == 3 else 0.0))
            for s, x in zip([0, 1, 2], [0.8, 0.9, 1.0]) for e in [0, 3]]
    s = tables.summary_table(tables.probe_table([pd.DataFrame(rows)]))
    assert len(s) == 1
    row = s.iloc[0]
    assert row["n_seeds"] == 3 and row["n_dynamic"] == 12
    assert row["mean"] == pytest.approx(0.9)
    assert row["std"] == pytest.approx(0.1)
    ci = 4.302653 * 0.1 / math.sqrt(3)
    assert row["ci95"] == pytest.approx(ci, rel=1e-6)
    assert row["ci_low"] == pytest.approx(0.9 - ci, rel=1e-6)
    assert row["ci_high"] == pytest.approx(0.9 + ci, rel=1e-6)
    assert row["baseline"] == pytest.approx(0.9) and row["relative_drop"] == pytest.approx(0.0)
    assert bool(row["is_main"])


def test_t_critical_fallback_table_matches_scipy():
    for df in [1, 2, 5, 29, 30]:
        assert tables.t_critical(df, use_scipy=False) == pytest.approx(tables.t_critical(df), abs=1e-6)
    for df in [35, 50, 100, 1000]:
        assert tables.t_critical(df, use_scipy=False) == pytest.approx(tables.t_critical(df), abs=2e-3)
    assert math.isnan(tables.t_critical(0))


def test_summary_single_seed_has_nan_spread():
    s = tables.summary_table(tables.probe_table([run_frame("m", "sst2", 0.5, 0)]))
    assert (s["n_seeds"] == 1).all()
    assert s["std"].isna().all() and s["ci95"].isna().all() and s["ci_low"].isna().all()
    # No fraction-1 row for this model/task: no baseline, no relative drop.
    assert s["baseline"].isna().all() and s["relative_drop"].isna().all()


def test_summary_relative_drop_and_main_metric(summary):
    sel = summary[(summary.model == "roberta-base") & (summary.task == "sst2") & (summary.selection == "lambda")
                  & (summary.metric == "accuracy")].set_index("fraction_dynamic")
    base = sel.loc[1.0, "mean"]
    assert (sel["baseline"] == base).all()
    for f in FRACTIONS:
        assert sel.loc[f, "relative_drop"] == pytest.approx((base - sel.loc[f, "mean"]) / base)
    assert sel.loc[1.0, "relative_drop"] == 0.0
    assert sel.loc[0.0, "relative_drop"] == pytest.approx(0.15 / base)
    # The baseline is per selection: 'reversed' uses its own fraction-1 row.
    rev = summary[(summary.selection == "reversed") & (summary.metric == "accuracy")].set_index("fraction_dynamic")
    assert rev.loc[0.0, "relative_drop"] == pytest.approx((base - rev.loc[0.0, "mean"]) / base)
    # is_main follows the per-task mapping.
    for task, metric in MAIN.items():
        part = summary[summary.task == task]
        assert (part["is_main"] == (part["metric"] == metric)).all()
    assert tables.summary_table(tables.probe_table([run_frame("m", "sst2", 1.0, 0)]))["is_main"].all()
    assert list(summary.columns) == tables.SUMMARY_COLUMNS


def test_summary_baseline_zero_or_shared():
    f = pd.concat([run_frame("m", "t", 1.0, 0), run_frame("m", "t", 0.0, 0)], ignore_index=True)
    f.loc[f.fraction_dynamic == 1.0, "score"] = 0.0
    s = tables.summary_table(tables.probe_table([f]))
    assert s["relative_drop"].isna().all()
    g = pd.concat([run_frame("m", "t", 1.0, 0), run_frame("m", "t", 0.0, 0, selection="random")])
    strict = tables.summary_table(tables.probe_table([g]))
    shared = tables.summary_table(tables.probe_table([g]), share_baseline=True)
    rnd = lambda s: s[(s.selection == "random") & (s.metric == "accuracy")].iloc[0]  # noqa: E731
    assert math.isnan(rnd(strict)["baseline"])
    assert rnd(shared)["baseline"] == pytest.approx(final_score("m", "t", 1.0, 0, "accuracy"))


def test_summary_missing_column_named(probe):
    with pytest.raises(ValueError, match="'score'"):
        tables.summary_table(probe.drop(columns="score"))
    with pytest.raises(ValueError, match="'epoch'"):
        tables.summary_table(probe.drop(columns="epoch"))


# --------------------------------------------------------------------------- lambdas_table


def test_lambdas_table_concat_sort_validate():
    a, b = lambdas_frame("roberta-base", "sst2"), lambdas_frame("bert-base", "cola", seed=1)
    lam = tables.lambdas_table([a.sample(frac=1, random_state=0), b])
    assert list(lam.columns) == list(tables.LAMBDAS_COLUMNS)
    assert len(lam) == len(a) + len(b)
    assert lam.iloc[0]["model"] == "bert-base"
    assert list(lam[lam.model == "roberta-base"][["layer", "head"]].itertuples(index=False, name=None)) == [
        (layer, head) for layer in range(4) for head in range(6)]
    assert lam["layer"].dtype == np.int64 and lam["lambda"].dtype == np.float64
    with pytest.raises(ValueError, match="'rank'"):
        tables.lambdas_table([a.drop(columns="rank")])
    with pytest.raises(ValueError, match="'lambda'"):
        tables.lambdas_table([a, b.drop(columns="lambda")])
    with pytest.raises(ValueError, match="empty"):
        tables.lambdas_table([])
    with pytest.raises(ValueError, match="same key"):
        tables.lambdas_table([a, a])
    bad = a.copy()
    bad.loc[0, "rank"] = bad.loc[1, "rank"]
    with pytest.raises(ValueError, match="permutation"):
        tables.lambdas_table([bad])


# --------------------------------------------------------------------------- plots


def assert_written(paths, stem: Path):
    assert sorted(paths) == sorted([str(stem.with_suffix(".png")), str(stem.with_suffix(".svg"))])
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    assert png.stat().st_size > 1024 and svg.stat().st_size > 1024
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert b"<svg" in svg.read_bytes()[:2000]
    assert not [p for p in stem.parent.iterdir() if p.name.endswith(".tmp")], "temporary file left behind"


@pytest.fixture(scope="module")
def plot_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("plots")


def test_plot_fraction_curves(summary, plot_dir):
    stem = plot_dir / "fig2"
    assert_written(plots.plot_fraction_curves(summary, stem), stem)
    stem = plot_dir / "sub" / "fig2_all_metrics"  # creates the folder; several metrics per task
    assert_written(plots.plot_fraction_curves(summary[summary.task == "sst2"], stem, main_only=False), stem)
    with pytest.raises(ValueError, match="'ci_low'"):
        plots.plot_fraction_curves(summary.drop(columns="ci_low"), plot_dir / "x")


def test_plot_selection_orders(summary, plot_dir):
    stem = plot_dir / "fig5"
    assert_written(plots.plot_selection_orders(summary, stem, task="sst2"), stem)
    with pytest.raises(ValueError, match="nothing to plot"):
        plots.plot_selection_orders(summary, plot_dir / "x", task="nope")


def test_plot_models_compared(summary, plot_dir):
    stem = plot_dir / "fig3"
    assert_written(plots.plot_models_compared(summary, str(stem)), stem)


def test_plot_lambda_heatmap(plot_dir):
    stem = plot_dir / "lambdas"
    lam = tables.lambdas_table([lambdas_frame()])
    assert_written(plots.plot_lambda_heatmap(lam, stem), stem)
    two = tables.lambdas_table([lambdas_frame(), lambdas_frame("bert-base")])
    with pytest.raises(ValueError, match="one \\(model, task"):
        plots.plot_lambda_heatmap(two, plot_dir / "x")


def synthetic_constants(layers=3, heads=4, n=24) -> np.ndarray:
    rng = np.random.default_rng(0)
    c = rng.random((layers, heads, n, n)) * 0.1
    c[1, 2] += np.eye(n) * 5  # diagonal head
    c[2, 0, :, 0] += 3.0  # [CLS] head
    c[2, 0, :, n - 1] += 3.0  # final [SEP]
    c[0, 3] = 1.0  # uniform: most spread
    c[0, 1] = np.eye(n)  # also diagonal but with zero entropy
    c /= c.sum(-1, keepdims=True)
    return c


def test_representative_heads():
    picked = plots.representative_heads(synthetic_constants())
    assert [(layer, head) for layer, head, _ in picked] == [(0, 1), (2, 0), (0, 3)]
    assert [why for *_, why in picked] == ["diagonal", "[CLS]/[SEP]", "spread"]
    with pytest.raises(ValueError, match="shape"):
        plots.representative_heads(np.zeros((2, 3, 4)))


def test_plot_constant_heads(plot_dir):
    c = synthetic_constants()
    stem = plot_dir / "fig4"
    assert_written(plots.plot_constant_heads(c, stem, title="synthetic constants"), stem)
    stem = plot_dir / "fig4_chosen.svg"  # a suffix on the stem is tolerated
    assert_written(plots.plot_constant_heads(c, stem, heads=[(1, 2), (2, 0)]), stem.with_suffix(""))
    with pytest.raises(ValueError, match="outside"):
        plots.plot_constant_heads(c, plot_dir / "x", heads=[(9, 0)])


def test_fraction_label():
    assert [plots.fraction_label(f) for f in [0, 0.0625, 0.125, 0.5, 1.0]] == ["0", "1/16", "1/8", "1/2", "1"]
