"""One score: the probability that an item answers the question.

A pipeline's retriever ranks by a score of its own (the learned re-ranker's log-odds,
BM25's sum, a cosine). With a calibration the pipeline turns it into a probability of
relevance, ``p = 1 / (1 + exp(-(a * score + b)))`` (Platt scaling), fitted on questions
held out from the ranker's training (``memkit train ranker --calibration`` reports it
leaving one data set out, and writes ``[calibration]``'s file with ``--write``). A pipeline whose
retriever is the learned re-ranker and that names no ``[calibration]`` uses the ranker's
own logistic output (``a = 1, b = 0``): measured held out on five data sets, it is as well
calibrated as any Platt scaling fitted leaving the set out, better on three
(eval/RESULTS.md), so the served default has no ``[calibration]``. Without either, scores
stay on the retriever's scale.

Follow-ups fuse the rankings of the question as asked and with the topic carried as a
weighted mean of their probabilities (memkit.pipeline), so the score means the same on
every turn; the gate (nothing found), the cut-off (items below ``min_score`` are not
returned) and the answer writer's decline read it.

``brier`` and ``reliability`` measure how well probabilities match outcomes (the eval
harness reports them per data set; notebooks/06_calibration.ipynb draws the diagram).
"""

from __future__ import annotations

import numpy as np

from memkit.config.model import CalibrationSpec, FromSpec, typed


class Calibration(FromSpec):
    """``p = 1 / (1 + exp(-(a * score + b)))``; ``a`` and ``b`` are ``CalibrationSpec``'s."""

    spec, section = CalibrationSpec, "calibration"

    @classmethod
    def from_config(cls, spec: "CalibrationSpec | dict | None") -> "Calibration | None":
        """From a ``[calibration]`` typed spec (memkit.config.model), or its dict checked
        into one first; None: no calibration."""
        return None if spec is None else cls.checked(typed("calibration", spec))

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.params() == self.params()

    def __hash__(self) -> int:
        return hash(tuple(self.params().items()))

    def __call__(self, scores) -> np.ndarray:
        z = self.a * np.asarray(scores, dtype=float) + self.b
        return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))

    @classmethod
    def fit(cls, scores, labels) -> "Calibration":
        """Platt scaling: a one-feature logistic regression of the labels on the scores."""
        from sklearn.linear_model import LogisticRegression

        x = np.asarray(scores, dtype=float).reshape(-1, 1)
        y = np.asarray(labels, dtype=int)
        if len(set(y.tolist())) < 2:
            raise ValueError("calibration needs both relevant and non-relevant examples")
        model = LogisticRegression(C=1e4, max_iter=1000).fit(x, y)
        return cls(a=round(float(model.coef_[0, 0]), 6), b=round(float(model.intercept_[0]), 6))


def brier(p, y) -> float:
    """Mean squared difference of probabilities and 0/1 outcomes (0 is perfect)."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    return float(np.mean((p - y) ** 2)) if len(p) else float("nan")


def reliability(p, y, bins: int = 10) -> list[dict]:
    """Per probability bin: how many items, their mean predicted probability and the
    share that were relevant (a calibrated score has the two equal)."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        out.append(
            {
                "bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}",
                "n": int(m.sum()),
                "predicted": float(p[m].mean()) if m.any() else float("nan"),
                "observed": float(y[m].mean()) if m.any() else float("nan"),
            }
        )
    return out


def expected_calibration_error(p, y, bins: int = 10) -> float:
    """The bins' |predicted - observed|, weighted by how many items each holds."""
    rows = reliability(p, y, bins)
    n = sum(r["n"] for r in rows)
    return (
        float(sum(r["n"] * abs(r["predicted"] - r["observed"]) for r in rows if r["n"]) / n)
        if n
        else float("nan")
    )
