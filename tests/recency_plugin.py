"""A retriever registered from outside memkit, as a user's plugin module registers one
(``memkit eval --plugin tests.recency_plugin``, tests/test_eval_cli.py): it ranks the
events posted before the time of asking, the most recent first, so it reads the ``now``
the pipeline gives a retriever."""

from __future__ import annotations

import json

import numpy as np

from memkit.retrieval import Retriever, register
from memkit.retrieval.base import top_k

ASKED_AT: list = []  # every time of asking a search was given, in order (the tests read it)


@register  # {"type": "recency-test"} in a config, once this module is imported
class RecencyRetriever(Retriever):
    """Events posted before the question was asked, newest first (score 1 / (1 + age in
    days)); without a time of asking, newest first from the newest event."""

    type_name, match_type = "recency-test", "keyword"

    def __init__(self, horizon_days: float = 3650.0):
        super().__init__()
        self.horizon_days = horizon_days
        self._reset()

    def _reset(self):
        self.posted = []  # seconds since the epoch per catalog position (nan: undated)

    def _index(self, events, positions):
        self.posted += [
            np.nan if t is None else t.timestamp() for t in events["created_at"].to_list()
        ]

    def _unindex(self, positions):
        pass  # the catalog hides removed events

    def _search_batch(self, texts, k, masks, scopes=None, now=None):
        ASKED_AT.extend(now)
        posted = np.array(self.posted, np.float64)
        hits = []
        for when, mask in zip(now, masks):
            ref = when.timestamp() if when is not None else np.nanmax(posted)
            days = (ref - posted) / 86400.0
            ok = ~np.isnan(days) & (days >= 0) & (days <= self.horizon_days)
            score = np.where(ok, 1.0 / (1.0 + np.where(ok, days, 0.0)), 0.0)
            hits.append(top_k(score, mask, k, positive_only=True))
        return hits

    def _save_state(self, folder):
        (folder / "posted.json").write_text(json.dumps(self.posted))

    def _load_state(self, folder):
        self.posted = json.loads((folder / "posted.json").read_text())
