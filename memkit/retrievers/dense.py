"""Dense retrieval: cosine similarity of sentence embeddings.

Vectors live in one float32 matrix (rows = catalog positions). Below ``exact_below``
alive events a search is an exact matrix product; at or above it, an HNSW graph (usearch)
answers unfiltered and loosely filtered queries. usearch has no filter predicate, so a
filtered HNSW search asks for more neighbours than ``k`` (scaled by how much the filter
admits) and widens until ``k`` admitted ones are found; a filter that admits few events
(``exact_share``) goes straight to an exact product over just those rows, which is both
exact and faster than the graph.

A search scoped to floors is always the exact product over the rows it admits: which of a
floor's events an HNSW graph reaches depends on every other node in it, so an
approximate answer would change with other people's (even private) posts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from usearch.index import Index

from memkit.encoders import Encoder, encode_documents, get_encoder
from memkit.retrievers.base import Retriever, document_text, top_k
from memkit.retrievers.registry import register

LINES = (
    "whole",
    "mean",
)  # how a document of several lines is encoded (DenseRetriever.document_vectors)


@register
class DenseRetriever(Retriever):
    match_type = "semantic"
    type_name = "dense"

    def __init__(
        self,
        encoder: str | Encoder = "minilm",
        doc_template: str = "{text}",
        exact_below: int = 50_000,
        exact_share: float = 0.05,
        oversample: float = 3.0,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 512,
        lines: str = "whole",
    ):
        super().__init__()
        if lines not in LINES:
            from memkit.errors import ValidationError

            raise ValidationError("lines", f"expected one of {', '.join(LINES)}, got {lines!r}")
        self.encoder = encoder
        self.doc_template = doc_template
        self.lines = lines
        self.exact_below = exact_below
        self.exact_share = exact_share
        self.oversample = oversample
        self.connectivity = connectivity
        self.expansion_add = expansion_add
        self.expansion_search = expansion_search
        self._reset()

    def get_params(self) -> dict:
        """The constructor's arguments; ``lines`` only when not the default, so a saved
        retriever.json is the same as before ``lines`` existed."""
        params = super().get_params()
        if params["lines"] == "whole":
            del params["lines"]
        return params

    @property
    def text_encoder(self) -> Encoder:
        """The model behind ``encoder`` (a name, resolved here, or an Encoder itself)."""
        return get_encoder(self.encoder) if isinstance(self.encoder, str) else self.encoder

    def _reset(self) -> None:
        self._buffer: np.ndarray | None = None  # rows [0, _rows) hold vectors
        self._rows = 0
        self._hnsw: Index | None = None
        self._hnsw_size = 0  # positions [0, _hnsw_size) are in the graph

    @property
    def vectors(self) -> np.ndarray:
        """One row per catalog position (a view of the buffer: a search holding it keeps
        reading the rows it had while later ones are appended)."""
        if self._buffer is None:
            return np.zeros((0, self.text_encoder.dim), np.float32)
        return self._buffer[: self._rows]

    def _index(self, events: pl.DataFrame, positions: np.ndarray) -> None:
        self.add_vectors(self.document_vectors(document_text(events, self.doc_template)))

    def precompute(self, events: pl.DataFrame) -> None:
        self.document_vectors(document_text(events, self.doc_template))

    def document_vectors(self, texts: list[str]) -> np.ndarray:
        """The documents' vectors. ``lines = "whole"``: each document encoded as one text.
        ``lines = "mean"``: a document of several lines (``"{prev_lines}\\n{line}"``) is the
        mean of its lines' vectors weighted by their words, normalised: each line is
        encoded on its own, once, and shared by every document holding it (a chat line is
        the previous line of the next post's document, and a ``"{line}"`` part's own
        document), so a new post costs the model one line, not a line and a document."""
        if self.lines == "whole":
            return encode_documents(self.text_encoder, texts)
        split = [[ln.strip() for ln in t.split("\n") if ln.strip()] or [t.strip()] for t in texts]
        unique = list(dict.fromkeys(ln for ls in split for ln in ls))
        vecs = encode_documents(self.text_encoder, unique)
        at = {ln: i for i, ln in enumerate(unique)}
        out = np.zeros((len(texts), self.text_encoder.dim), np.float32)
        for i, ls in enumerate(split):
            if len(ls) == 1:
                out[i] = vecs[at[ls[0]]]
                continue
            w = np.array([max(len(ln.split()), 1) for ln in ls], np.float32)
            v = (vecs[[at[ln] for ln in ls]] * w[:, None]).sum(axis=0)
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out

    def warm(self) -> None:
        if self.uses_hnsw():
            self._graph()

    def add_vectors(self, vecs: np.ndarray) -> None:
        """Append precomputed (normalised) vectors for the positions just appended. The
        buffer grows by half again when full, so appending costs each vector a copy or
        two in all, not a copy of the whole matrix per add."""
        need = self._rows + len(vecs)
        if self._buffer is None or need > len(self._buffer):
            size = 0 if self._buffer is None else len(self._buffer)
            grown = np.zeros((max(need, size * 3 // 2, 1024), vecs.shape[1]), np.float32)
            grown[: self._rows] = self.vectors
            self._buffer = grown
        self._buffer[self._rows : need] = vecs
        self._rows = need

    def _unindex(self, positions: np.ndarray) -> None:
        if self._hnsw is not None:
            graph = positions[positions < self._hnsw_size]
            if len(graph):
                self._hnsw.remove(graph.astype(np.uint64))

    def uses_hnsw(self) -> bool:
        return self.catalog.n_alive >= self.exact_below

    def _graph(self) -> Index:
        """The HNSW graph, brought up to date with every alive position."""
        n = len(self.catalog)
        if self._hnsw is None:
            self._hnsw = Index(
                ndim=self.text_encoder.dim,
                metric="cos",
                dtype="f32",
                connectivity=self.connectivity,
                expansion_add=self.expansion_add,
                expansion_search=self.expansion_search,
            )
        if self._hnsw_size < n:
            new = np.arange(self._hnsw_size, n)
            new = new[self.catalog.alive[new]]
            if len(new):
                self._hnsw.add(new.astype(np.uint64), self.vectors[new])
            self._hnsw_size = n
        return self._hnsw

    def _search_batch(self, texts, k, masks, scopes=None):
        q = self.text_encoder.encode(texts)
        return self.search_vectors(q, k, masks, scopes)

    def search_vectors(
        self, q: np.ndarray, k: int, masks: list[np.ndarray], scopes: list | None = None
    ):
        """Search with query vectors already computed (one row per query)."""
        V = self.vectors
        n_alive = self.catalog.n_alive
        scoped = [s is not None for s in scopes] if scopes is not None else [False] * len(q)
        out: list = [None] * len(q)
        # id(mask) -> (rows, their scores for every query): queries with one filter share
        # one gather
        gathered = {}
        for i, mask in enumerate(masks):
            rows = self.catalog.rows(
                mask
            )  # found once per filter and shared (memkit/retrievers/base.py)
            if not (scoped[i] or not self.uses_hnsw() or len(rows) <= self.exact_share * n_alive):
                out[i] = self._hnsw_one(q[i], k, mask, len(rows))
            elif scoped[i] or len(rows) < 0.5 * len(mask):  # a product over only the admitted rows
                if id(mask) not in gathered:
                    same = [j for j, m in enumerate(masks) if m is mask]
                    gathered[id(mask)] = rows, dict(zip(same, (V[rows] @ q[same].T).T))
                idx, sc = top_k(gathered[id(mask)][1][i], None, k)
                out[i] = (rows[idx], sc)
            else:
                out[i] = top_k(V @ q[i], mask, k)
        return out

    def _hnsw_one(self, qv: np.ndarray, k: int, mask: np.ndarray, admitted: int):
        """Ask the graph for more neighbours than ``k`` (scaled by the filter's share) and
        widen until ``k`` admitted ones come back. A search that would need the whole graph
        is answered by the exact product instead: it is cheaper then, and HNSW does not
        promise to reach every node, so it could return fewer than ``k``."""
        graph = self._graph()
        share = admitted / max(1, len(graph))
        want = int(np.ceil(k / max(share, 1e-9) * self.oversample)) + 10
        while want < len(graph):
            m = graph.search(qv, want)
            keys = np.asarray(m.keys, np.int64)
            keep = mask[keys]
            if keep.sum() >= k:
                keys, dist = keys[keep][:k], np.asarray(m.distances)[keep][:k]
                return keys, (1.0 - dist).astype(np.float64)
            want *= 4
        rows = self.catalog.rows(mask)
        idx, sc = top_k(self.vectors[rows] @ qv, None, k)
        return rows[idx], sc

    def similarity(self, text: str, event_ids: list[str]) -> np.ndarray:
        """Cosine similarity of one query to indexed events (by id)."""
        q = self.text_encoder.encode([text])[0]
        rows = np.array([self.catalog.position[e] for e in event_ids], np.int64)
        return self.vectors[rows] @ q if len(rows) else np.zeros(0, np.float32)

    def _save_state(self, folder: Path) -> None:
        np.save(folder / "vectors.npy", self.vectors)
        if self.uses_hnsw():
            self._graph().save(str(folder / "hnsw.usearch"))

    def _load_state(self, folder: Path) -> None:
        self._buffer = np.load(folder / "vectors.npy")
        self._rows = len(self._buffer)
        if (folder / "hnsw.usearch").exists():
            self._hnsw = Index.restore(str(folder / "hnsw.usearch"))
            self._hnsw_size = len(self.catalog)
