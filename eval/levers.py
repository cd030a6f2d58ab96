"""Levers for the questions the default misses, each cross-validated.

    .venv/bin/python eval/levers.py [--part encoders|parts|features|diversity|all]
                                    [--data PATH/locomo-dev.json]

Every figure is held out: the learned rankers are trained by eval/train_ranker.py's
machinery on the four dev sets (LoCoMo-dev, CAsT 2021, SciFact train, MADial-Bench-en)
and scored leaving one group out (a LoCoMo conversation, a CAsT conversation, a MADial
person; SciFact: its test claims) and leaving the whole data set out.

- ``encoders``: the default's pipeline with the packaged MiniLM (int8) or with MiniLM
  adapted to each data set's own posts (``[encoder.adapt]``, no labels), and its rankers
  with or without the ``dated`` post feature (a chat line naming a time); then with MiniLM
  fine-tuned on the other dev sets' labels (never the set it indexes), alone and then
  adapted (models trained on licensed data: measured, not shippable).
- ``parts``: with the adapted encoder, more parts whose scores the rankers read:
  ``windows`` (dense similarity to a turn with its next one, and to its whole session,
  as means of the lines' vectors: max-similarity over windows of turns, and session-level
  retrieval), and ``resolved dates`` (each post's relative times written out as dates in
  the turn's BM25 document: "we went camping last weekend" of 8 May 2023 also reads "the
  weekend before 8 May 2023"; a field of this script only, not of memkit).
- ``features``: on the default's candidates (LoCoMo-dev, leave one conversation out),
  ranker features read from the other candidates: the best first-stage score and number
  of candidates in the post's session (session-first), the neighbouring turns' scores
  (a window of three), and a gradient-boosted model instead of the logistic regression.
- ``diversity``: the default's held-out scores, the top 10 picked greedily with a penalty
  for a post next to (or in the same session as, or similar to) one already picked.

``features`` and ``diversity`` score LoCoMo-dev recall@10 (categories 1-4) from the
candidate tables; ``encoders`` and ``parts`` run every set as ``memkit eval`` asks it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl
import train_ranker as tr

from memkit.config import CONFIG_DIR
from memkit.datasets import data_root

CATS = ["single-hop", "multi-hop", "temporal", "open-domain"]


SUPERVISED = {
    "datasets": ["locomo/locomo-dev.json", "cast2021", "scifact:train", "madial-bench-en"]
}


def default(adapt: bool = True, supervised: bool = False) -> dict:
    """The default without its models; ``supervised``: its encoder first fine-tuned on the
    dev sets' labels except the set being indexed (the models eval/train_encoder.py --part
    lodo trains: the same pairs, so the same cached models)."""
    config = tr.unmodelled(str(CONFIG_DIR / "default.toml"))
    config["retriever"].pop("passage_model", None)
    if not adapt:
        config["encoder"].pop("adapt", None)
    if supervised:
        config["encoder"]["supervised"] = dict(SUPERVISED)
    return config


def cell(table: pl.DataFrame, metric: str) -> str:
    table = table.filter(pl.col("category").is_null() | (pl.col("category") != "adversarial"))
    return f"{table[metric].mean():.4f}"


def locomo_cells(table: pl.DataFrame) -> list[str]:
    table = table.filter(pl.col("category") != "adversarial")
    return [f"{table['recall@5'].mean():.4f}", f"{table['recall@10'].mean():.4f}"] + [
        f"{table.filter(pl.col('category') == c)['recall@10'].mean():.4f}" for c in CATS
    ]


def cv_row(
    label: str, devs: list[tr.DevSet], names: list[str], passage_names: list[str] | None = None
) -> str:
    """One table row: LoCoMo-dev leave one conversation out (R@5, R@10, per category),
    LoCoMo-dev leaving the data set out (R@10), then each other set's metric both ways."""
    res = tr.cross_validated(devs, names, passage_names)
    logo, lodo = res["locomo-dev"]
    cells = locomo_cells(logo) + [cell(lodo, "recall@10")]
    for dev in devs[1:]:
        a, b = res[dev.name]
        cells += [cell(a, dev.metric), cell(b, dev.metric)]
    print(f"  {label}: done", file=sys.stderr, flush=True)
    return f"| {label} | " + " | ".join(cells) + " |"


HEAD = (
    "| | LoCoMo R@5 | LoCoMo R@10 | "
    + " | ".join(f"R@10 {c}" for c in CATS)
    + " | LoCoMo R@10, set left out | CAsT MRR@10 | CAsT, set left out | SciFact nDCG@10 | "
    "SciFact, set left out | MADial R@10 | MADial, set left out |\n"
    "|---|" + "---:|" * 13
)


def part_encoders(data: str) -> None:
    print("\n### Encoder and the `dated` feature (rankers retrained each time)\n\n" + HEAD)
    for adapt in (False, True):
        devs = tr.dev_sets(default(adapt), data)
        names = devs[0].pipeline.retriever.feature_names()
        enc = "adapted to each set's posts" if adapt else "packaged MiniLM int8"
        print(
            cv_row(f"{enc}, without `dated`", devs, [n for n in names if n != "dated"]), flush=True
        )
        print(
            cv_row(f"{enc}, with `dated`" + (" (the default)" if adapt else ""), devs, names),
            flush=True,
        )
    for adapt in (False, True):  # labels of licensed data: measured, not shippable
        devs = tr.dev_sets(default(adapt, supervised=True), data)
        enc = "supervised on the other sets' labels" + (", then adapted" if adapt else "")
        print(
            cv_row(f"{enc}, with `dated`", devs, devs[0].pipeline.retriever.feature_names()),
            flush=True,
        )


def with_when(frame: pl.DataFrame) -> pl.DataFrame:
    """The events with ``when``: their relative times resolved against their own time."""
    from memkit.timeref import resolve

    def when(text, at):
        return " ".join(m.span.text for m in resolve(text, at)) if at is not None and text else ""

    return frame.with_columns(
        pl.Series("when", [when(t, c) for t, c in zip(frame["text"], frame["created_at"])], pl.Utf8)
    )


def part_parts(data: str) -> None:
    import memkit.representation as rep

    print(
        "\n### More parts for the rankers to read (adapted encoder, rankers retrained)\n\n" + HEAD
    )
    config = default()
    config["retriever"]["extra"] += [
        {"type": "dense", "doc_template": "{line}\n{next_lines}", "lines": "mean"},
        {"type": "dense", "doc_template": "{session_text}", "lines": "mean"},
    ]
    devs = tr.dev_sets(config, data)
    names = devs[0].pipeline.retriever.feature_names()
    print(
        cv_row("windows: dense over a turn and the next, and over its session", devs, names),
        flush=True,
    )
    windows = {
        f"part{i}{r}" for i in (7, 8) for r in ("", "_r")
    }  # the two new parts: nothing of a passage's own
    print(
        cv_row(
            "windows, the passage model without them",
            devs,
            names,
            [n for n in names if n not in windows],
        ),
        flush=True,
    )
    original = rep.add_context
    rep.add_context = lambda events, *a, **k: with_when(original(events, *a, **k))
    try:
        config = default()
        first = config["retriever"]["first"]["retrievers"][0]
        first["doc_template"] = first["doc_template"].replace("{date}. ", "{date}. {when} ")
        devs = tr.dev_sets(config, data)
        print(
            cv_row(
                "resolved dates in the turn's BM25 document",
                devs,
                devs[0].pipeline.retriever.feature_names(),
            ),
            flush=True,
        )
    finally:
        rep.add_context = original


# -- on the candidate tables -----------------------------------------------------------------
def laid_out(dev: tr.DevSet) -> pl.DataFrame:
    """The dev set's candidates with their post's session (block and day) and place in it."""
    docs = dev.pipeline.documents(dev.scored.events).with_row_index("_row")
    docs = docs.with_columns(pl.col("created_at").dt.date().alias("day")).sort(
        "block_id", "created_at", "_row"
    )
    docs = docs.with_columns(pl.int_range(pl.len()).over("block_id").alias("pos"))
    return dev.cand.join(
        docs.select("event_id", "block_id", "day", "pos"), on="event_id", how="left"
    )


def with_context_features(cand: pl.DataFrame) -> pl.DataFrame:
    session = ["query_id", "block_id", "day"]
    cand = cand.with_columns(
        pl.col("fused").max().over(session).alias("session_best"),
        pl.len().over(session).cast(pl.Float64).log1p().alias("session_count"),
    )
    for d in (-1, 1):  # the candidates one turn before and after, if they are candidates
        nb = cand.select(
            "query_id",
            "block_id",
            (pl.col("pos") - d).alias("pos"),
            pl.col("part1").alias(f"_dense{d}"),
            pl.col("fused").alias(f"_fused{d}"),
        )
        cand = cand.join(nb, on=["query_id", "block_id", "pos"], how="left")
    return cand.with_columns(
        pl.max_horizontal(pl.col("_dense-1").fill_null(0), pl.col("_dense1").fill_null(0)).alias(
            "window_dense"
        ),
        pl.max_horizontal(pl.col("_fused-1").fill_null(0), pl.col("_fused1").fill_null(0)).alias(
            "window_fused"
        ),
    ).with_columns(pl.col(c).fill_null(0.0) for c in ("session_best", "session_count"))


def held_out_scores(
    devs: list[tr.DevSet],
    cands: list[pl.DataFrame],
    names: list[str],
    gbdt: bool = False,
    whole_set: bool = False,
) -> np.ndarray:
    """LoCoMo-dev's candidates scored by models trained without their conversation (with
    ``whole_set``: without any of LoCoMo-dev, on the other sets only)."""
    loc, others = cands[0], cands[1:]
    scores = np.zeros(loc.height)
    for g in sorted(loc["group"].unique().to_list()):
        mine = [] if whole_set else [loc.filter(pl.col("group") != g)]
        train = pl.concat([c.select(*names, "y", "chat", "group") for c in [*mine, *others]])
        rows = (loc["group"] == g).to_numpy()
        if gbdt:
            from sklearn.ensemble import HistGradientBoostingClassifier

            chat = train.filter(pl.col("chat"))
            model = HistGradientBoostingClassifier(
                max_iter=200, learning_rate=0.05, max_leaf_nodes=15, random_state=0
            )
            model.fit(chat.select(names).to_numpy(), chat["y"].to_numpy())
            scores[rows] = model.predict_proba(
                loc.filter(pl.Series(rows)).select(names).to_numpy()
            )[:, 1]
        else:
            scores[rows] = tr.logits(
                loc.filter(pl.Series(rows)), tr.fit_models([train], names), names
            )
    return scores


def recall_row(
    label: str, dev: tr.DevSet, picked: dict[str, list[str]], *more: dict[str, list[str]]
) -> str:
    """LoCoMo-dev recall@10 of each question's picked top 10, categories 1-4 and each (and
    of each of ``more`` pickings, categories 1-4)."""
    rel = dev.scored.qrels.filter(pl.col("relevance") > 0).group_by("query_id").agg("event_id")
    rel = dict(zip(rel["query_id"].to_list(), rel["event_id"].to_list()))
    q = dev.scored.queries.filter(
        (pl.col("category") != "adversarial") & pl.col("query_id").is_in(list(rel))
    )

    def recall(top):
        return {
            qid: len(set(rel[qid]) & set(top.get(qid, []))) / len(rel[qid])
            for qid in q["query_id"].to_list()
        }

    r = recall(picked)
    cat = dict(zip(q["query_id"].to_list(), q["category"].to_list()))
    cells = [f"{np.mean(list(r.values())):.4f}"] + [
        f"{np.mean([v for k, v in r.items() if cat[k] == c]):.4f}" for c in CATS
    ]
    cells += [f"{np.mean(list(recall(other).values())):.4f}" for other in more]
    return f"| {label} | " + " | ".join(cells) + " |"


def top10(cand: pl.DataFrame, scores: np.ndarray) -> dict[str, list[str]]:
    t = (
        cand.select("query_id", "event_id")
        .with_columns(pl.Series("score", scores))
        .sort(["query_id", "score"], descending=[False, True])
        .group_by("query_id", maintain_order=True)
        .head(10)
    )
    return {qid: part["event_id"].to_list() for (qid,), part in t.group_by(["query_id"])}


FEATURE_HEAD = "| | R@10 1-4 | " + " | ".join(f"R@10 {c}" for c in CATS) + " |\n|---|" + "---:|" * 5


def part_features(devs: list[tr.DevSet]) -> None:
    names = devs[0].pipeline.retriever.feature_names()
    cands = [with_context_features(laid_out(d)) for d in devs]
    session, window = ["session_best", "session_count"], ["window_dense", "window_fused"]
    print(
        "\n### Ranker features from the other candidates (LoCoMo-dev, leave one conversation out; "
        "last column: leave the data set out)\n\n"
        + FEATURE_HEAD.replace(" |\n|", " | R@10 1-4, set left out |\n|")
        + "---:|"
    )
    for label, extra, gbdt in (
        ("the default's features", [], False),
        ("+ session: best score, candidates", session, False),
        ("+ window: neighbours' dense and fused scores", window, False),
        ("+ both", session + window, False),
        ("gradient boosting, the default's features", [], True),
        ("gradient boosting, + both", session + window, True),
    ):
        logo = top10(cands[0], held_out_scores(devs, cands, names + extra, gbdt))
        lodo = top10(cands[0], held_out_scores(devs, cands, names + extra, gbdt, whole_set=True))
        print(recall_row(label, devs[0], logo, lodo), flush=True)


def diversify(eids: list[str], s: np.ndarray, near, penalty: float, k: int = 10) -> list[str]:
    """Greedy top ``k``: each pick lowers the scores of the candidates ``near`` it."""
    left = list(np.argsort(-s, kind="stable")[:50])
    adj, out = s.astype(float).copy(), []
    while len(out) < k and left:
        best = max(left, key=lambda i: adj[i])
        out.append(best)
        left.remove(best)
        for i in left:
            adj[i] -= penalty * near(eids[i], eids[best])
    return [eids[i] for i in out]


def part_diversity(devs: list[tr.DevSet]) -> None:
    names = devs[0].pipeline.retriever.feature_names()
    cands = [laid_out(d) for d in devs]
    loc = cands[0].with_columns(pl.Series("s", held_out_scores(devs, cands, names)))
    place = {
        e: (b, d, p)
        for e, b, d, p in loc.select("event_id", "block_id", "day", "pos").unique().iter_rows()
    }
    dense = devs[0].pipeline.retriever.first.retrievers[1]
    vec = {e: dense.vectors[i] for i, e in enumerate(dense.catalog.event_ids)}
    rules = {
        "next to a pick (same session, one turn away)": lambda a, b: float(
            place[a][:2] == place[b][:2] and abs(place[a][2] - place[b][2]) <= 1
        ),
        "in a pick's session": lambda a, b: float(place[a][:2] == place[b][:2]),
        "similar to a pick (cosine over 0.5)": lambda a, b: max(0.0, float(vec[a] @ vec[b]) - 0.5),
    }
    per = {
        qid: (part["event_id"].to_list(), part["s"].to_numpy())
        for (qid,), part in loc.group_by(["query_id"])
    }
    print(
        "\n### Diversity in the top 10 (LoCoMo-dev, the default's held-out scores)\n\n"
        + FEATURE_HEAD
    )
    print(
        recall_row(
            "no penalty",
            devs[0],
            {q: diversify(e, s, rules["in a pick's session"], 0.0) for q, (e, s) in per.items()},
        )
    )
    for label, near in rules.items():
        for penalty in (0.5, 1.0, 2.0):
            picked = {q: diversify(e, s, near, penalty) for q, (e, s) in per.items()}
            print(recall_row(f"{label}, penalty {penalty}", devs[0], picked), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--part", default="all", choices=["encoders", "parts", "features", "diversity", "all"]
    )
    ap.add_argument("--data", default=str(data_root() / "locomo" / "locomo-dev.json"))
    args = ap.parse_args(argv)
    if not Path(args.data).exists():
        print(f"{args.data}: not found (give --data or set MEMKIT_DATA)", file=sys.stderr)
        return 2
    if args.part in ("encoders", "all"):
        part_encoders(args.data)
    if args.part in ("parts", "all"):
        part_parts(args.data)
    if args.part in ("features", "diversity", "all"):
        devs = tr.dev_sets(default(), args.data)
        if args.part in ("features", "all"):
            part_features(devs)
        if args.part in ("diversity", "all"):
            part_diversity(devs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
