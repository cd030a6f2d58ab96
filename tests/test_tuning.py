"""Leave-one-group-out tuning (memkit/evaluation/tuning.py)."""

import polars as pl

from memkit.evaluation.tuning import cross_validate, simplex_grid


def test_simplex_grid():
    grid = simplex_grid(3, step=0.25, minimum=0.25)
    assert sorted(grid) == sorted([(0.5, 0.25, 0.25), (0.25, 0.5, 0.25), (0.25, 0.25, 0.5)])
    assert all(abs(sum(w) - 1) < 1e-9 for w in simplex_grid(3))


def test_each_group_is_scored_with_the_setting_chosen_on_the_others():
    # Held out x (or y), the others favour b (0.6 vs 0.5); held out z, they favour a.
    def table(scores):
        return pl.DataFrame(
            {"query_id": ["qx", "qy", "qz"], "group": ["x", "y", "z"], "recall@10": scores}
        )

    tables = {"a": table([0.9, 0.9, 0.1]), "b": table([0.2, 0.2, 1.0])}
    held, chosen = cross_validate(tables, "recall@10")
    assert dict(chosen) == {"x": "b", "y": "b", "z": "a"}
    assert held.sort("query_id")["recall@10"].to_list() == [
        0.2,
        0.2,
        0.1,
    ]  # never the in-sample best of a group
