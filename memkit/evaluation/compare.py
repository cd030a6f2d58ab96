"""Several configs on one dataset: one table, a paired significance test of each against a
named baseline (scipy: paired t-test by default, Wilcoxon, Fisher's randomisation test or
Tukey's HSD), the same test over all pairs with a Holm-Bonferroni correction
(``pairwise_table``), every metric per category with a seeded bootstrap 95% interval
(``category_table``), and plots.

ranx's ``compare`` (0.3.21, installed for the cross-checks) runs all pairs too, but offers
only student, fisher and tukey, applies no correction for the number of pairs and would
recompute the metrics with its own definitions; here the tests read memkit's per-query
scores (memkit.evaluation.metrics), so the table's means are the ones tested."""

from __future__ import annotations

import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from scipy import stats  # noqa: E402

from memkit.core.errors import ValidationError  # noqa: E402
from memkit.core.tables import Dataset  # noqa: E402
from memkit.evaluation.harness import EvalResult  # noqa: E402
from memkit.evaluation.metrics import METRICS, per_query  # noqa: E402

CURVE_KS = [1, 2, 3, 5, 10, 15, 20, 25, 30, 40, 50]
TABLE_METRICS = ("recall@5", "recall@10", "ndcg@10", "mrr@10")
# The tests --stat-test offers, as the tables' notes name them.
STAT_TESTS = {
    "student": "paired t-test",
    "wilcoxon": "Wilcoxon signed-rank test",
    "fisher": "Fisher's paired randomisation test",
    "permutation": "Fisher's paired randomisation test",
    "tukey": "Tukey's HSD",
}
RESAMPLES = 10_000  # sign flips of the randomisation test
BOOTSTRAP = 2_000  # resamples of a bootstrap interval


def headline_ids(result: EvalResult) -> list[str]:
    """The queries behind the headline figure (all but adversarial, where there are categories)."""
    t = result.per_query
    if "headline" in result.summary:
        t = t.filter((pl.col("category") != "adversarial") | pl.col("category").is_null())
    return t["query_id"].to_list()


def paired_test(a, b, stat_test: str = "student") -> float:
    """Two-sided p-value of a paired test on per-query scores (same queries, same order)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if np.allclose(a, b):
        return 1.0
    if stat_test == "tukey":
        return float(tukey_matrix([a, b])[0, 1])
    if stat_test == "student":
        return float(stats.ttest_rel(a, b).pvalue)
    if stat_test == "wilcoxon":
        return float(stats.wilcoxon(a, b).pvalue)
    if stat_test in ("permutation", "fisher"):  # sign flips of the paired differences
        res = stats.permutation_test(
            (a, b),
            lambda x, y: np.mean(x - y),
            permutation_type="samples",
            n_resamples=RESAMPLES,
            random_state=0,
        )
        return float(res.pvalue)
    raise ValidationError(
        "stat_test", f"expected one of {', '.join(STAT_TESTS)}, got {stat_test!r}"
    )


def tukey_matrix(groups: list) -> np.ndarray:
    """Tukey's HSD p-values of every pair of groups. Scores without any spread (every
    query scored alike, say recall@10 of 1 everywhere) leave scipy's statistic undefined:
    then groups with the same mean do not differ (p = 1) and any others do (p = 0)."""
    groups = [np.asarray(g, np.float64) for g in groups]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.array(stats.tukey_hsd(*groups).pvalue, np.float64)
    means = np.array([g.mean() for g in groups])
    same = np.isclose(means[:, None], means[None, :])
    return np.where(np.isnan(p), np.where(same, 1.0, 0.0), p)


def holm(p_values) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given: the i-th smallest times the
    number of hypotheses not yet rejected, kept monotone, at most 1."""
    p = np.asarray(list(p_values), np.float64)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def _headline_tables(results: list[EvalResult]) -> dict[str, pl.DataFrame]:
    """Each result's per-query scores over the headline queries, in one order."""
    ids = headline_ids(results[0])
    return {
        r.name: r.per_query.filter(pl.col("query_id").is_in(ids)).sort("query_id") for r in results
    }


def pairwise_table(
    results: list[EvalResult],
    metrics=TABLE_METRICS,
    stat_test: str = "student",
) -> pl.DataFrame:
    """Every pair of configs on each metric over the headline queries: one row per pair
    and metric with both means, the test's p-value and that p-value Holm-Bonferroni
    corrected over the pairs of the metric (Tukey's HSD, over all configs at once, is
    corrected already: both columns hold its p-value)."""
    if stat_test not in STAT_TESTS:
        raise ValidationError(
            "stat_test", f"expected one of {', '.join(STAT_TESTS)}, got {stat_test!r}"
        )
    tables = _headline_tables(results)
    names = [r.name for r in results]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    rows = []
    for m in metrics:
        if stat_test == "tukey":
            matrix = tukey_matrix([tables[n][m].to_numpy() for n in names])
            raw = [float(matrix[names.index(a), names.index(b)]) for a, b in pairs]
            adjusted = raw
        else:
            raw = [paired_test(tables[a][m], tables[b][m], stat_test) for a, b in pairs]
            adjusted = holm(raw)
        for (a, b), p, q in zip(pairs, raw, adjusted):
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "metric": m,
                    "mean_a": float(tables[a][m].mean()),
                    "mean_b": float(tables[b][m].mean()),
                    "p": p,
                    "p_adjusted": q,
                }
            )
    schema = {
        "a": pl.Utf8,
        "b": pl.Utf8,
        "metric": pl.Utf8,
        "mean_a": pl.Float64,
        "mean_b": pl.Float64,
        "p": pl.Float64,
        "p_adjusted": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _letter(i: int) -> str:
    """a, b, ..., z, then aa, ab, ...: a config's mark in the all-pairs table."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[i] if i < 26 else letters[i // 26 - 1] + letters[i % 26]


def pairwise_markdown(
    results: list[EvalResult],
    metrics=TABLE_METRICS,
    stat_test: str = "student",
    alpha: float = 0.05,
    in_sample=(),
) -> str:
    """The all-pairs table as ranx prints it: each config a letter, and after each mean
    the letters of the configs it is better than (corrected p below ``alpha``)."""
    table = pairwise_table(results, metrics, stat_test)
    names = [r.name for r in results]
    better: dict[tuple[str, str], list[str]] = {}
    for row in table.iter_rows(named=True):
        if row["p_adjusted"] < alpha and row["mean_a"] != row["mean_b"]:
            win, lose = (
                (row["a"], row["b"]) if row["mean_a"] > row["mean_b"] else (row["b"], row["a"])
            )
            better.setdefault((win, row["metric"]), []).append(_letter(names.index(lose)))
    tables = _headline_tables(results)
    lines = [
        "| | config | " + " | ".join(metrics) + " |",
        "|---|---|" + "---:|" * len(metrics),
    ]
    for i, name in enumerate(names):
        cells = []
        for m in metrics:
            beats = sorted(better.get((name, m), []), key=lambda x: (len(x), x))
            cells.append(f"{tables[name][m].mean():.4f}" + (f" {''.join(beats)}" if beats else ""))
        shown = f"{name}*" if name in in_sample else name
        lines.append(f"| {_letter(i)} | {shown} | " + " | ".join(cells) + " |")
    n_pairs = len(names) * (len(names) - 1) // 2
    how = (
        "Tukey's HSD over all configs at once"
        if stat_test == "tukey"
        else f"{STAT_TESTS[stat_test]}, Holm-Bonferroni-corrected over the {n_pairs} "
        f"pair{'' if n_pairs == 1 else 's'} of each metric"
    )
    return (
        f"All pairs ({how}): the letters after a figure are the configs it is better than "
        f"(p < {alpha}).\n\n" + "\n".join(lines) + "\n"
    )


def bootstrap_interval(
    values, seed: int = 0, resamples: int = BOOTSTRAP, level: float = 0.95
) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean: ``resamples`` draws with replacement
    from a generator seeded by ``seed``, so the same values give the same interval."""
    x = np.asarray(values, np.float64)
    if len(x) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def category_table(
    results: list[EvalResult],
    metrics=METRICS,
    seed: int = 0,
    resamples: int = BOOTSTRAP,
    level: float = 0.95,
) -> pl.DataFrame:
    """Every metric per category (and ``all``): one row per config, category and metric
    with the number of queries ``n``, the mean and a bootstrap ``level`` interval. The
    draws are seeded by ``seed`` and the category's name, so a rerun gives the same
    intervals and every config of one category is resampled over the same queries."""
    rows = []
    for r in results:
        t = r.per_query.sort("query_id")
        cats = sorted(c for c in t["category"].unique().to_list() if c is not None)
        groups = [("all", t)] + [(c, t.filter(pl.col("category") == c)) for c in cats]
        for cat, sub in groups:
            draw = seed * 1_000_003 + zlib.crc32(cat.encode())  # fixed per category
            for m in metrics:
                lo, hi = bootstrap_interval(sub[m], draw, resamples, level)
                rows.append(
                    {
                        "config": r.name,
                        "category": cat,
                        "n": sub.height,
                        "metric": m,
                        "mean": float(sub[m].mean()) if sub.height else float("nan"),
                        "low": lo,
                        "high": hi,
                    }
                )
    schema = {
        "config": pl.Utf8,
        "category": pl.Utf8,
        "n": pl.Int64,
        "metric": pl.Utf8,
        "mean": pl.Float64,
        "low": pl.Float64,
        "high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def category_markdown(table: pl.DataFrame, in_sample=(), level: float = 0.95) -> str:
    """``category_table`` as markdown: a row per config and category, n, and each metric's
    mean with its interval."""
    metrics = list(dict.fromkeys(table["metric"].to_list()))
    lines = [
        "| config | category | n | " + " | ".join(metrics) + " |",
        "|---|---|---:|" + "---:|" * len(metrics),
    ]
    keys = table.select("config", "category", "n").unique(maintain_order=True)
    cells = {
        (row["config"], row["category"], row["metric"]): row for row in table.iter_rows(named=True)
    }
    for config, category, n in keys.iter_rows():
        shown = f"{config}*" if config in in_sample else config
        values = []
        for m in metrics:
            c = cells[(config, category, m)]
            values.append(f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]")
        lines.append(f"| {shown} | {category} | {n} | " + " | ".join(values) + " |")
    return (
        f"By category, every metric: mean [{level:.0%} bootstrap interval, {BOOTSTRAP:,} "
        "seeded resamples of the category's queries]:\n\n" + "\n".join(lines) + "\n"
    )


def comparison_table(
    results: list[EvalResult],
    dataset: Dataset | None = None,
    baseline: str | None = None,
    metrics=("recall@5", "recall@10", "ndcg@10", "mrr@10"),
    stat_test: str = "student",
) -> pl.DataFrame:
    """One row per config: headline means, and the p-value of each metric against the baseline."""
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        raise ValidationError("config", f"config names must differ, got {names}")
    baseline = baseline or names[0]
    if baseline not in names:
        raise ValidationError("baseline", f"expected one of {names}, got {baseline!r}")
    tables = _headline_tables(results)
    base = tables[baseline]
    tukey = {}  # Tukey's HSD compares all configs at once: its p-value of each pair
    if stat_test == "tukey" and len(results) > 2:
        for m in metrics:
            tukey[m] = tukey_matrix([tables[n][m].to_numpy() for n in names])
    rows = []
    for r in results:
        t = tables[r.name]
        row = {"config": r.name, "queries": t.height}
        row.update({m: float(t[m].mean()) for m in metrics})
        for m in metrics:
            if r.name == baseline:
                row[f"p({m})"] = None
            elif m in tukey:
                row[f"p({m})"] = float(tukey[m][names.index(r.name), names.index(baseline)])
            else:
                row[f"p({m})"] = paired_test(t[m], base[m], stat_test)
        row["seconds"] = round(r.seconds, 1)
        row["stages"] = r.stages_label()  # what it does beyond its retriever
        rows.append(row)
    return pl.DataFrame(rows)


def to_markdown(
    table: pl.DataFrame, baseline: str, stat_test: str = "student", in_sample=()
) -> str:
    """``comparison_table`` as markdown; a config in ``in_sample`` is shown as ``name*``."""
    cols = table.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.iter_rows(named=True):
        cells = []
        for c in cols:
            v = row[c]
            if c == "config" and v in in_sample:
                v = f"{v}*"
            cells.append(
                "—"
                if v is None
                else f"{v:.4f}"
                if isinstance(v, float) and not c == "seconds"
                else str(v)
            )
        lines.append("| " + " | ".join(cells) + " |")
    test = STAT_TESTS.get(stat_test, stat_test)
    return "\n".join(lines) + f"\n\np-values: {test} against `{baseline}` over the same queries.\n"


def recall_curve(
    results: list[EvalResult], dataset: Dataset, path: str | Path, title: str = ""
) -> Path:
    fig, ax = plt.subplots(figsize=(6.5, 4))
    metrics = [f"recall@{k}" for k in CURVE_KS]
    for r in results:
        ids = headline_ids(r)
        table = per_query(
            r.run.filter(pl.col("query_id").is_in(ids)),
            dataset.qrels.filter(pl.col("query_id").is_in(ids)),
            metrics,
        )
        ax.plot(CURVE_KS, [table[m].mean() for m in metrics], marker="o", ms=3, label=r.name)
    ax.set_xlabel("k")
    ax.set_ylabel("recall@k")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{dataset.name}: recall@k")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def category_bars(
    results: list[EvalResult], path: str | Path, metric: str = "recall@10", title: str = ""
) -> Path | None:
    cats = sorted(
        {k.split(":", 1)[1] for r in results for k in r.summary if k.startswith("category:")}
    )
    if not cats:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        vals = [r.summary.get(f"category:{c}", {}).get(metric, 0.0) for c in cats]
        ax.bar([j + i * width for j in range(len(cats))], vals, width, label=r.name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cats))], cats, rotation=15)
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1)
    ax.set_title(title or f"{metric} by category")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
