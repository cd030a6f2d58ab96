"""Linear models kept as plain numbers in a config table.

The learned re-ranker (``[retriever.model]``) and the answer writer's selection and
decline models (``[answer.select]``, ``[answer.decline]``) are logistic regressions on
standardised features: ``features``, ``coef``, ``mean``, ``scale`` and ``intercept``
(and, for a decision, a ``threshold`` on the score). A few dozen numbers in a JSON file
the config's table names (``model_file``, memkit/models/: memkit.config), read in as if
written in the table, so what eval measured is what the service serves.
``fit_linear`` trains one with scikit-learn (used by ``memkit train``: memkit/training/).
"""

from __future__ import annotations

import numpy as np

from memkit.core.errors import ValidationError

KEYS = ("features", "coef", "intercept", "mean", "scale")


def check_linear(model: dict, names: list[str], where: str, extra: tuple[str, ...] = ()) -> dict:
    """The model as plain lists and floats, or a ValidationError naming what is wrong."""
    need = set(KEYS) | set(extra)
    if not isinstance(model, dict) or set(model) != need:
        raise ValidationError(where, f"expected a table with exactly {sorted(need)}")
    n = len(model["features"])
    unknown = set(model["features"]) - set(names)
    if unknown:
        raise ValidationError(
            f"{where}.features", f"unknown feature(s) {sorted(unknown)}; known: {names}"
        )
    for key in ("coef", "mean", "scale"):
        if len(model[key]) != n:
            raise ValidationError(f"{where}.{key}", f"expected {n} numbers (one per feature)")
    if any(s <= 0 for s in model["scale"]):
        raise ValidationError(f"{where}.scale", "expected positive numbers")
    return {k: list(v) if isinstance(v, list) else float(v) for k, v in model.items()}


def linear_score(model: dict, x: np.ndarray) -> np.ndarray:
    """Scores of the rows of ``x`` (columns in ``model["features"]`` order)."""
    z = (x - np.asarray(model["mean"])) / np.asarray(model["scale"])
    return z @ np.asarray(model["coef"]) + model["intercept"]


def fit_linear(
    x: np.ndarray, y: np.ndarray, names: list[str], c: float = 1.0, weight: np.ndarray | None = None
) -> dict:
    """A logistic regression (scikit-learn) on standardised features, as a model table
    (``weight``: per-row sample weights)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    fitted = LogisticRegression(max_iter=5000, C=c).fit(
        (x - scaler.mean_) / scale, y, sample_weight=weight
    )
    return {
        "features": list(names),
        "coef": fitted.coef_[0].tolist(),
        "intercept": float(fitted.intercept_[0]),
        "mean": scaler.mean_.tolist(),
        "scale": scale.tolist(),
    }
