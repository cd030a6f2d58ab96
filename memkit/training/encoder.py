"""Teaching the encoder: pairs from labels, pairs from the content's own structure, one
small training loop, and models kept by what made them.

Pairs are a Polars frame ``anchor, positive, negative, kind`` (``negative`` may be null):

- :func:`supervised_pairs` (labels): every relevant (query, event) of a dataset's qrels,
  the query as asked and the event as a dense retriever indexes it (``doc_template``, by
  default the chat line "Speaker: text"); with ``hard_negatives``, a BM25 hit of the query
  that the qrels do not mark relevant.
- :func:`structure_pairs` (no labels): a post and the post before it in its session (a
  conversation's previous turn, a document's previous passage), a post and the post it
  replies to (a ``reply_to`` column), a document's title and its body (text written
  "Title\\n\\nBody"), a post and its block's title (a ``block_title`` column; only titles
  no other block shares, so "Feed" teaches nothing).

:func:`train` fine-tunes MiniLM (or a model trained before) with in-batch negatives: the
cross-entropy of scaled cosine similarities where each anchor's own positive is the answer
and the batch's other positives (and any hard negatives) are the wrong ones, i.e.
sentence-transformers' MultipleNegativesRankingLoss written out in a plain PyTorch loop
(AdamW, linear warm-up and decay). The loop is short enough to read, needs no `datasets`
or `accelerate` package, and is deterministic: seeded shuffling, sampling and dropout, so
the same pairs, settings and seed give the same model. A text that is another anchor's
positive too ("lol same", a question asked with two evidence turns) is never counted as
that anchor's wrong answer.

Models are saved in ``<cache dir>/models/minilm-ft-<hash>/`` where the hash covers the
base model, the pairs (SHA-256 of their text) and the settings: asking for the same
training again returns the saved model at once (eval's warm runs, the service's restarts),
and the model's own name keeps its vectors apart in the embedding cache. Models trained
on licensed data (LoCoMo, SciFact: non-commercial) stay in the user's cache: never commit
or ship one.

:class:`EncoderStage` is a pipeline config's ``[encoder]`` section: a starting model,
optionally fine-tuned on datasets' qrels (``[encoder.supervised]``; eval never trains on
the data set it scores) and then adapted to the corpus being indexed
(``[encoder.adapt]``; eval adapts on each data set's events, the service with
``memkit adapt``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import polars as pl
from tqdm.auto import tqdm

from memkit.config.model import EncoderSpec, FromSpec, TrainSettings, typed
from memkit.core.errors import ValidationError
from memkit.datasets import data_root, load_any
from memkit.models.encoders import (
    INT8,
    MINILM,
    TRAINED,
    float_name,
    load_sentence_transformer,
    models_dir,
    trained_model_path,
)
from memkit.retrieval import BM25Retriever
from memkit.retrieval.base import document_text
from memkit.retrieval.representation import add_context

TRAIN_VERSION = 2  # bump when the loop changes, so models trained by an older one are not reused
KINDS = ("neighbour", "reply", "title")
PAIRS_SCHEMA = {"anchor": pl.Utf8, "positive": pl.Utf8, "negative": pl.Utf8, "kind": pl.Utf8}


# -- settings (memkit.config.model.TrainSettings: each written once, with its bound) ------
SUPERVISED = TrainSettings(
    epochs=2
)  # labels: two passes (the settings of the first measurements)
# A corpus's own structure: pairs are many, so one pass over at most 3,000 of them, texts cut
# at 64 word pieces while training, learned both ways (a post and its neighbour have no
# direction). Chosen on LoCoMo-dev: memkit train encoder --report settings.
ADAPT = TrainSettings(epochs=1, max_length=64, symmetric=True)


# -- pairs ---------------------------------------------------------------------------------
def _pairs(frame: pl.DataFrame) -> pl.DataFrame:
    cols = [
        pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t).alias(c)
        for c, t in PAIRS_SCHEMA.items()
    ]
    return frame.select(cols).filter(
        (pl.col("anchor").str.strip_chars() != "") & (pl.col("positive").str.strip_chars() != "")
    )


def supervised_pairs(
    dataset, doc_template: str = "{line}", query_field: str = "text", hard_negatives: bool = False
) -> pl.DataFrame:
    """(query, relevant event) pairs from a dataset's qrels; see the module docstring."""
    docs = add_context(dataset.events)
    text_of = dict(zip(docs["event_id"].to_list(), document_text(docs, doc_template)))
    q = dataset.queries
    asked = (
        pl.coalesce(pl.col(query_field), pl.col("text"))
        if query_field in q.columns
        else pl.col("text")
    )
    q = q.select("query_id", asked.alias("anchor"), "floor_ids")
    rel = (
        dataset.qrels.filter(pl.col("relevance") > 0)
        .join(q, on="query_id")
        .filter(pl.col("event_id").is_in(list(text_of)))
        .with_columns(
            pl.col("event_id").replace_strict(text_of).alias("positive"),
            pl.lit("label").alias("kind"),
        )
    )
    if hard_negatives and rel.height:
        asked_q = q.filter(pl.col("query_id").is_in(rel["query_id"].unique().to_list())).rename(
            {"anchor": "text"}
        )
        run = BM25Retriever(doc_template=doc_template).fit(docs).search(asked_q, 20)
        wrong = (
            run.join(rel.select("query_id", "event_id"), on=["query_id", "event_id"], how="anti")
            .sort("query_id", "rank")
            .group_by("query_id", maintain_order=True)
            .agg("event_id")
        )
        wrong_of = dict(zip(wrong["query_id"].to_list(), wrong["event_id"].to_list()))
        negs = []
        for i, qid in zip(
            rel.select(pl.int_range(pl.len()).over("query_id"))[:, 0].to_list(),
            rel["query_id"].to_list(),
        ):
            ids = wrong_of.get(qid) or []
            negs.append(
                text_of[ids[i % len(ids)]] if ids else None
            )  # the query's i-th pair: its i-th miss
        rel = rel.with_columns(pl.Series("negative", negs, pl.Utf8))
    return _pairs(rel)


def structure_pairs(events: pl.DataFrame, kinds: Sequence[str] = KINDS) -> pl.DataFrame:
    """Pairs from the events alone (no labels); see the module docstring."""
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValidationError("kinds", f"expected some of {list(KINDS)}, got {bad[0]!r}")
    ev = add_context(events, before=1, after=0)
    out = []
    if "neighbour" in kinds:
        out.append(
            ev.filter(pl.col("prev_lines") != "").select(
                pl.col("prev_lines").alias("anchor"),
                pl.col("line").alias("positive"),
                pl.lit("neighbour").alias("kind"),
            )
        )
    if "reply" in kinds and "reply_to" in ev.columns:
        parents = ev.select(pl.col("event_id").alias("reply_to"), pl.col("line").alias("anchor"))
        out.append(
            ev.join(parents, on="reply_to").select(
                "anchor", pl.col("line").alias("positive"), pl.lit("reply").alias("kind")
            )
        )
    if "title" in kinds:
        halves = ev.filter(pl.col("text").str.contains("\n\n", literal=True))["text"].str.splitn(
            "\n\n", 2
        )
        out.append(
            halves.struct.unnest().select(
                pl.col("field_0").alias("anchor"),
                pl.col("field_1").alias("positive"),
                pl.lit("title").alias("kind"),
            )
        )
        if "block_title" in ev.columns:
            unique = (
                ev.select("block_id", "block_title")
                .unique()
                .group_by("block_title")
                .len()
                .filter(pl.col("len") == 1)
            )
            out.append(
                ev.filter(pl.col("block_title").is_in(unique["block_title"].to_list())).select(
                    pl.col("block_title").alias("anchor"),
                    pl.col("line").alias("positive"),
                    pl.lit("title").alias("kind"),
                )
            )
    return pl.concat([_pairs(f) for f in out]) if out else _pairs(pl.DataFrame(schema=PAIRS_SCHEMA))


def pairs_hash(pairs: pl.DataFrame) -> str:
    h = hashlib.sha256()
    for row in pairs.select("anchor", "positive", "negative").iter_rows():
        h.update("\x1f".join("" if v is None else v for v in row).encode() + b"\x1e")
    return h.hexdigest()


# -- training ------------------------------------------------------------------------------
def model_name(base: str, pairs: pl.DataFrame, settings: TrainSettings) -> str:
    """``minilm-ft-<hash>``: the base model, the pairs and the settings, hashed. A base
    with int8 weights (``minilm-int8``) trains its float model, and the trained model is
    served with int8 weights too (``minilm-ft-<hash>-int8``)."""
    key = json.dumps(
        {
            "base": float_name(base),
            "pairs": pairs_hash(pairs),
            "settings": settings.model_dump(),
            "version": TRAIN_VERSION,
        },
        sort_keys=True,
    )
    return (
        "minilm-ft-"
        + hashlib.sha256(key.encode()).hexdigest()[:12]
        + (INT8 if base.endswith(INT8) else "")
    )


def is_trained(name: str) -> bool:
    name = float_name(name)
    return name in ("minilm", MINILM) or (models_dir() / name / "memkit.json").exists()


def model_info(name: str) -> dict:
    """What ``memkit.json`` records of a trained model: base, pairs, settings, seconds."""
    return json.loads((trained_model_path(float_name(name)) / "memkit.json").read_text())


def train(
    pairs: pl.DataFrame,
    base: str = "minilm",
    settings: TrainSettings | None = None,
    sources: Sequence[str] = (),
    progress: bool | None = None,
    threads: int | None = None,
) -> str:
    """Fine-tune ``base`` on ``pairs``; returns the model's name (an encoder name). A model
    trained before with the same base, pairs and settings is returned without training.
    ``threads``: PyTorch threads while training (else ``$MEMKIT_TRAIN_THREADS``, else 1:
    on two cores that other processes share, two threads mostly wait for each other and a
    step took 3-5x longer than with one; on idle cores more threads are faster)."""
    settings = settings or TrainSettings()
    if pairs.height == 0:
        raise ValidationError("pairs", "nothing to learn from: no pairs")
    start = float_name(base)
    if (
        start not in ("minilm", MINILM)
        and not TRAINED.match(start)
        and not (Path(start) / "memkit.json").exists()
    ):
        raise ValidationError(
            "model", f"expected 'minilm' or a trained model's name (minilm-ft-...), got {base!r}"
        )
    name = model_name(base, pairs, settings)
    folder = models_dir() / float_name(name)
    if (folder / "memkit.json").exists():
        return name
    used = pairs
    if pairs.height > settings.max_pairs:  # a seeded sample, kept in its original order
        keep = np.sort(
            np.random.default_rng(settings.seed).choice(
                pairs.height, settings.max_pairs, replace=False
            )
        )
        used = pairs[keep]
    model = load_sentence_transformer(
        None if start in ("minilm", MINILM) else trained_model_path(start)
    )
    started = time.perf_counter()
    _fit(
        model, used, settings, progress, threads or int(os.environ.get("MEMKIT_TRAIN_THREADS", "1"))
    )
    seconds = time.perf_counter() - started
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp), create_model_card=False)
    kinds = used.group_by("kind").len().sort("kind")
    info = {
        "name": folder.name,
        "base": start,
        "pairs": pairs.height,
        "pairs_used": used.height,
        "pairs_sha256": pairs_hash(pairs),
        "kinds": dict(zip(kinds["kind"].to_list(), kinds["len"].to_list())),
        "hard_negatives": int(used["negative"].is_not_null().sum()),
        "settings": settings.model_dump(),
        "sources": list(sources),
        "train_seconds": round(seconds, 1),
        "version": TRAIN_VERSION,
    }
    (tmp / "memkit.json").write_text(json.dumps(info, indent=2))
    try:
        tmp.rename(folder)
    except OSError:  # another process saved the same model first: keep that one
        shutil.rmtree(tmp, ignore_errors=True)
    return name


def _fit(model, pairs: pl.DataFrame, s: TrainSettings, progress: bool | None, threads: int) -> None:
    """The loop: in-batch negatives, AdamW, linear warm-up and decay, seeded."""
    import torch
    import torch.nn.functional as F

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.manual_seed(s.seed)
    rng = np.random.default_rng(s.seed)
    anchors, positives = pairs["anchor"].to_list(), pairs["positive"].to_list()
    negatives = pairs["negative"].to_list()
    answers: dict[str, set] = {}  # anchor -> every positive it has: never one of its wrong answers
    asked: dict[str, set] = {}  # positive -> every anchor it answers
    for a, p in zip(anchors, positives):
        answers.setdefault(a, set()).add(p)
        asked.setdefault(p, set()).add(a)
    n = len(anchors)
    steps = s.epochs * math.ceil(n / s.batch_size)
    warm = max(1, round(s.warmup * steps))
    # The word-piece table is half of MiniLM's weights: a few thousand pairs touch few of
    # its rows, and leaving it as is makes a step a fifth cheaper on a CPU.
    words = model[0].auto_model.embeddings.word_embeddings.weight
    words.requires_grad_(False)
    opt = torch.optim.AdamW([w for w in model.parameters() if w.requires_grad], lr=s.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min((i + 1) / warm, max(0.0, (steps - i) / max(1, steps - warm)))
    )
    full_length = model.max_seq_length
    model.max_seq_length = s.max_length

    def embed(texts):
        return F.normalize(model(model.preprocess(texts))["sentence_embedding"], dim=-1)

    def masked(logits, rows, cands, allowed):
        """Logits with each row's other right answers (a shared text) taken out."""
        drop = torch.tensor(
            [[j != i and c in allowed[r] for j, c in enumerate(cands)] for i, r in enumerate(rows)]
        )
        return logits.masked_fill(drop, float("-inf"))

    model.train()
    try:
        with tqdm(total=steps, desc="training", unit="step", disable=progress is False) as bar:
            for _ in range(s.epochs):
                order = rng.permutation(n)
                for start in range(0, n, s.batch_size):
                    idx = order[start : start + s.batch_size]
                    a_txt, p_txt = [anchors[i] for i in idx], [positives[i] for i in idx]
                    n_txt = [negatives[i] for i in idx if negatives[i] is not None]
                    a, p = embed(a_txt), embed(p_txt)
                    cands, c_txt = (
                        (torch.cat([p, embed(n_txt)]), p_txt + n_txt) if n_txt else (p, p_txt)
                    )
                    target = torch.arange(len(idx))
                    loss = F.cross_entropy(
                        masked(a @ cands.T * s.scale, a_txt, c_txt, answers), target
                    )
                    if s.symmetric:
                        back = F.cross_entropy(
                            masked(p @ a.T * s.scale, p_txt, a_txt, asked), target
                        )
                        loss = (loss + back) / 2
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    sched.step()
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss.item():.3f}")
    finally:
        model.eval()
        words.requires_grad_(True)
        model.max_seq_length = full_length
        torch.set_num_threads(before)


# -- the [encoder] section of a pipeline ---------------------------------------------------
@lru_cache(maxsize=16)
def dataset_pairs(
    spec: str, template: str, query_field: str, hard_negatives: bool
) -> tuple[str, pl.DataFrame]:
    """(dataset name, its supervised pairs) for ``path[:split]``: a dataset folder, BEIR
    folder or LoCoMo file, as given or under the data root; ``split`` is a BEIR split
    (default ``train``: SciFact's test claims stay for scoring)."""

    path, _, split = spec.partition(":")
    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = data_root() / path
    ds = load_any(p, split or "train")
    return ds.name, supervised_pairs(ds, template, query_field, hard_negatives)


def _train_settings(section: Any, where: str, defaults: TrainSettings) -> TrainSettings | None:
    """A training section's ``TrainSettings``: the ones it set over ``defaults``."""
    if section is None:
        return None
    given = section.model_dump(exclude_unset=True, include=set(TrainSettings.model_fields))
    return TrainSettings.from_dict(given, f"encoder.{where}", defaults)


class EncoderStage(FromSpec):
    """A pipeline's ``[encoder]`` section. All its dense parts (and the answer writer)
    use the model it resolves to::

        [encoder]
        model = "minilm"                 # the start: "minilm" or a trained model (minilm-ft-...)
        [encoder.supervised]             # optional: fine-tune on datasets' qrels first
        datasets = ["locomo/locomo-dev.json", "cast2021", "scifact:train"]   # under $MEMKIT_DATA
        epochs = 2                       # and any other TrainSettings
        hard_negatives = false
        [encoder.adapt]                  # optional: then adapt to the corpus being indexed
        kinds = ["neighbour", "reply", "title"]
        epochs = 1

    ``resolve(events, hold_out)`` returns the encoder's name, training what is not in the
    cache yet: supervised on every listed dataset except one named ``hold_out`` (eval
    passes the data set it scores, so a score never comes from its own labels), then
    adapted on ``events``.
    """

    spec = EncoderSpec
    section = "encoder"

    def _built(self) -> None:
        """Each training section's settings: those it wrote over its defaults."""
        self.supervised_settings = _train_settings(self.supervised, "supervised", SUPERVISED)
        self.adapt_settings = _train_settings(self.adapt, "adapt", ADAPT)

    @classmethod
    def from_config(cls, spec: "EncoderSpec | dict | None") -> "EncoderStage | None":
        """From an ``[encoder]`` typed spec (memkit.config.model), or its dict checked into
        one first; None: no encoder stage."""
        return None if spec is None else cls.checked(typed("encoder", spec))

    def params(self) -> dict:
        def show(section, settings, always=()):
            if section is None:
                return None
            own = section.model_dump(exclude_unset=True, exclude=set(TrainSettings.model_fields))
            return {
                **own,
                **{k: getattr(section, k) for k in always if k not in own},
                **settings.model_dump(),
            }

        return {
            "model": self.model,
            "supervised": show(self.supervised, self.supervised_settings),
            "adapt": show(self.adapt, self.adapt_settings, always=("kinds",)),
        }

    def supervised_pairs(self, hold_out: str | None = None) -> tuple[list[str], pl.DataFrame]:
        """(dataset names used, their pairs), leaving out a dataset named ``hold_out``."""
        sup = self.supervised
        names, frames = [], []
        for spec in sup.datasets:
            name, pairs = dataset_pairs(spec, sup.doc_template, sup.query_field, sup.hard_negatives)
            if name != hold_out:
                names.append(name)
                frames.append(pairs)
        return names, pl.concat(frames) if frames else _pairs(pl.DataFrame(schema=PAIRS_SCHEMA))

    def resolve(
        self,
        events: pl.DataFrame | None = None,
        hold_out: str | None = None,
        allow_training: bool = True,
        threads: int | None = None,
    ) -> str:
        """The encoder's name; see the class docstring. ``allow_training=False`` raises
        instead of training a model that is not in the cache (the service's query path)."""
        name = self.model
        if self.supervised is not None:
            sources, pairs = self.supervised_pairs(hold_out)
            if pairs.height:
                name = self._train(
                    pairs, name, self.supervised_settings, sources, allow_training, threads
                )
        if self.adapt is not None and events is not None and events.height:
            pairs = structure_pairs(events, self.adapt.kinds)
            if pairs.height:
                name = self._train(
                    pairs, name, self.adapt_settings, ["events"], allow_training, threads
                )
        return name

    @staticmethod
    def _train(pairs, base, settings, sources, allow_training, threads) -> str:
        wanted = model_name(base, pairs, settings)
        if not allow_training and not is_trained(wanted):
            raise ValidationError(
                "encoder",
                f"model {wanted} is not trained yet: run `memkit adapt` (or an eval "
                "with this config) where the data is",
            )
        return train(pairs, base, settings, sources, threads=threads)
