"""Several configs on one dataset: one table, a paired significance test of each against a
named baseline (scipy: paired t-test by default, Wilcoxon or a randomisation test), and plots."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from scipy import stats  # noqa: E402

from memkit.errors import ValidationError  # noqa: E402
from memkit.evaluation.harness import EvalResult  # noqa: E402
from memkit.evaluation.metrics import per_query  # noqa: E402
from memkit.tables import Dataset  # noqa: E402

CURVE_KS = [1, 2, 3, 5, 10, 15, 20, 25, 30, 40, 50]


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
    if stat_test == "student":
        return float(stats.ttest_rel(a, b).pvalue)
    if stat_test == "wilcoxon":
        return float(stats.wilcoxon(a, b).pvalue)
    if stat_test == "permutation":  # Fisher's randomisation test, sign flips of the differences
        res = stats.permutation_test(
            (a, b),
            lambda x, y: np.mean(x - y),
            permutation_type="samples",
            n_resamples=10_000,
            random_state=0,
        )
        return float(res.pvalue)
    raise ValidationError(
        "stat_test", f"expected student, wilcoxon or permutation, got {stat_test!r}"
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
    ids = headline_ids(results[0])
    tables = {
        r.name: r.per_query.filter(pl.col("query_id").is_in(ids)).sort("query_id") for r in results
    }
    base = tables[baseline]
    rows = []
    for r in results:
        t = tables[r.name]
        row = {"config": r.name, "queries": t.height}
        row.update({m: float(t[m].mean()) for m in metrics})
        for m in metrics:
            row[f"p({m})"] = None if r.name == baseline else paired_test(t[m], base[m], stat_test)
        row["seconds"] = round(r.seconds, 1)
        rows.append(row)
    return pl.DataFrame(rows)


def to_markdown(table: pl.DataFrame, baseline: str, stat_test: str = "student") -> str:
    cols = table.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.iter_rows(named=True):
        cells = []
        for c in cols:
            v = row[c]
            cells.append(
                "—"
                if v is None
                else f"{v:.4f}"
                if isinstance(v, float) and not c == "seconds"
                else str(v)
            )
        lines.append("| " + " | ".join(cells) + " |")
    test = {
        "student": "paired t-test",
        "wilcoxon": "Wilcoxon signed-rank test",
        "permutation": "paired randomisation test",
    }.get(stat_test, stat_test)
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
