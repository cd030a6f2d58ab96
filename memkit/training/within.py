"""Which sentence of a post the answer writer quotes, trained and reported leaving out each
article (``memkit train within``).

    memkit train within [--squad ../shared/training/squad2/dev-v2.0-half.json]
                        [--config NAME|FILE] [--c C] [--write]

The writer's selection model (``[answer.select]``, ``memkit train answers``) is trained on
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
Coefficients only: no text of SQuAD is kept. ``--write`` writes them into the file the
config's ``[answer.within]`` names (``model_file``: memkit/models/within/ for the default).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from memkit.answer.features import (
    SENTENCE_FEATURES,
    WITHIN_FEATURES,
    columns,
    sentence_features,
    within_features,
)
from memkit.config import load_config, resolve_config
from memkit.core.errors import ValidationError
from memkit.core.linear import fit_linear, linear_score
from memkit.core.text import Analyzer, sentences
from memkit.models.encoders import get_encoder
from memkit.training import write_tables
from memkit.training.reader import training_root


def squad_file() -> Path:
    """Half of SQuAD 2.0's dev set under the training data (memkit.training.reader's
    ``training_root``: ``$MEMKIT_TRAINING``, else ../shared/training)."""

    return training_root() / "squad2" / "dev-v2.0-half.json"


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


def run(args) -> int:
    """``memkit train within``: ``args`` as memkit/cli.py parses them (squad, config, c,
    write)."""

    path = resolve_config(args.config)
    squad = Path(args.squad) if args.squad else squad_file()
    if not squad.is_file():
        raise ValidationError("--squad", f"no such file: {squad}")
    spec = load_config(path)
    encoder = get_encoder(spec.get("encoder", {}).get("model", "minilm-int8"))
    rows = examples(squad, encoder, Analyzer())
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
        for file in write_tables(path, {"answer.within": model}):
            print(f"model written to {file}")
    return 0
