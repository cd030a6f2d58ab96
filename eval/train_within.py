"""Train which sentence of a post the answer writer quotes; report it leaving out each article.

    .venv/bin/python eval/train_within.py [--squad ../shared/training/squad2/dev-v2.0-half.json]
        [--config memkit/configs/default.toml] [--write]

The writer's selection model (``[answer.select]``, eval/train_answers.py) is trained on
LoCoMo, whose labels say which *post* answers a question, never which sentence: every
sentence of an evidence post is a positive. It chooses posts well, but inside a blog post
it learned nothing about the sentences: it quoted "Freya's wedding in Whitby. After the
flood we held it at ..." for "Who taught the guests to ceilidh?" over the post's "Lena
taught half the guests to ceilidh", which holds all three of the question's words.

``[answer.within]`` is a logistic regression on ``WITHIN_FEATURES``
(memkit/answer/features.py) choosing the quoted sentence among the quotable ones of the
post the selection model chose. It is trained on SQuAD 2.0's answerable questions (CC BY-SA
4.0, ``../shared/training/squad2``): a question, the sentences of its Wikipedia paragraph
(encoded on their own, as the writer encodes a long post's), positive the one holding the
answer. Reported left out one article at a time (16 articles), as the share of questions
whose answering sentence is chosen, beside choosing by cosine alone and by the selection
model; the conversation suites, which it never read, are the test (`memkit eval`).
Coefficients only: no text of SQuAD is kept.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from memkit.answer.base import sentences
from memkit.answer.features import (
    SENTENCE_FEATURES,
    WITHIN_FEATURES,
    columns,
    sentence_features,
    within_features,
)
from memkit.config import load_config
from memkit.encoders import get_encoder
from memkit.linear import fit_linear, linear_score, toml_table
from memkit.text import Analyzer

SQUAD = Path(__file__).resolve().parents[2] / "shared/training/squad2/dev-v2.0-half.json"
MARK_START = "# [answer.within] is written by eval/train_within.py --write"
MARK_END = "# (end of the within-post model)"


def examples(path: Path, encoder, analyzer: Analyzer):
    """(article, within features, select features, quotable, label) per answerable question
    whose paragraph has two or more sentences."""
    data = json.loads(path.read_text())["data"]
    out = []
    for article, doc in enumerate(data):
        for para in doc["paragraphs"]:
            text = para["context"]
            parts = sentences(text)
            if len(parts) < 2:
                continue
            starts, at = [], 0
            for s in parts:
                at = text.find(s, at)
                starts.append(at)
                at += len(s)
            qas = [q for q in para["qas"] if not q.get("is_impossible") and q["answers"]]
            if not qas:
                continue
            svec = encoder.encode(parts)
            qvec = encoder.encode([q["question"] for q in qas])
            item = {"text": text}
            rows = [(0, item, s) for s in parts]
            for q, v in zip(qas, qvec):
                a = q["answers"][0]["answer_start"]
                label = np.array(
                    [st <= a < st + len(s) for st, s in zip(starts, parts)], dtype=float
                )
                if label.sum() != 1:
                    continue  # the answer starts between two sentences
                c = sentence_features(q["question"], rows, svec @ v, set(), set(), analyzer)
                out.append((article, within_features(c), c.x, c.quotable, label))
    return out


def accuracy(rows, score) -> float:
    """The share of questions whose answering sentence scores best among the quotable."""
    hits = []
    for _, w, x, ok, y in rows:
        s = np.where(ok, score(w, x), -np.inf)
        hits.append(float(y[int(np.argmax(s))]))
    return float(np.mean(hits))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squad", type=Path, default=SQUAD)
    ap.add_argument("--config", default="memkit/configs/default.toml")
    ap.add_argument("--c", type=float, default=1.0, help="inverse regularisation strength")
    ap.add_argument("--write", action="store_true", help="put the model into --config")
    args = ap.parse_args(argv)

    spec = load_config(args.config)
    encoder = get_encoder(spec.get("encoder", {}).get("model", "minilm-int8"))
    rows = examples(args.squad, encoder, Analyzer())
    articles = sorted({r[0] for r in rows})
    print(f"{len(rows)} answerable SQuAD questions over {len(articles)} articles")
    select = spec.get("answer", {}).get("select")

    def fit(train) -> dict:
        x = np.concatenate([w[ok] for _, w, _, ok, _ in train])
        y = np.concatenate([lab[ok] for *_, ok, lab in train])
        return fit_linear(x, y, WITHIN_FEATURES, c=args.c)

    held = {"cosine": [], "selection model": [], "within model": []}
    for a in articles:
        test = [r for r in rows if r[0] == a]
        model = fit([r for r in rows if r[0] != a])
        held["cosine"].append(accuracy(test, lambda w, x: x[:, 0]) * len(test))
        if select is not None:
            held["selection model"].append(
                accuracy(
                    test, lambda w, x: linear_score(select, columns(x, select, SENTENCE_FEATURES))
                )
                * len(test)
            )
        held["within model"].append(
            accuracy(test, lambda w, x, m=model: linear_score(m, w)) * len(test)
        )
    print("answering sentence chosen, each article left out in turn:")
    for name, hits in held.items():
        if hits:
            print(f"  {name:16s} {sum(hits) / len(rows):.3f}")
    model = fit(rows)
    print("trained on all:", {f: round(c, 3) for f, c in zip(WITHIN_FEATURES, model["coef"])})
    if args.write:
        block = f"{MARK_START}\n{toml_table('answer.within', model)}{MARK_END}"
        text = Path(args.config).read_text()
        if MARK_START not in text:
            raise SystemExit(f"{args.config}: put the line {MARK_START!r} (and {MARK_END!r}) in it")
        before, rest = text.split(MARK_START, 1)
        Path(args.config).write_text(before + block + rest.split(MARK_END, 1)[1])
        print(f"wrote [answer.within] into {args.config}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
