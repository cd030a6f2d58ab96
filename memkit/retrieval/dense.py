"""Dense retrieval: cosine similarity of sentence embeddings.

Vectors live in one float32 matrix (rows = catalog positions). Below ``exact_below``
alive events a search is an exact matrix product; at or above it, an HNSW graph (usearch)
answers unfiltered and loosely filtered queries. usearch has no filter predicate, so a
filtered HNSW search asks for more neighbours than ``k`` (scaled by how much the filter
admits) and widens until ``k`` admitted ones are found; a filter that admits few events
(``exact_share``) goes straight to an exact product over just those rows, which is both
exact and faster than the graph.

A post longer than the encoder's window (``passages = "best"``: over ``long_words`` words;
MiniLM reads 256 word pieces, about 190 words) is also encoded in parts: runs of whole
sentences of at most ``passage_words`` words. Its score is the best of its whole vector and
its parts' (the part that answers is scored, not only the first 256 word pieces), so a
blog post or an assistant's long answer is found by the passage that holds it. Parts live
in a second matrix with the position they belong to; every search scans the admitted
posts' parts exactly (they are few beside the posts) and merges them into the top k.

A search scoped to floors is always the exact product over the rows it admits: which of a
floor's events an HNSW graph reaches depends on every other node in it, so an
approximate answer would change with other people's (even private) posts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from usearch.index import Index

from memkit.config.model import DenseSpec
from memkit.core.text import chunks
from memkit.models.encoders import Encoder, encode_documents, get_encoder
from memkit.retrieval.base import Retriever, document_text, top_k
from memkit.retrieval.registry import register


@register
class DenseRetriever(Retriever):
    match_type = "semantic"
    type_name = "dense"
    spec = DenseSpec

    def _built(self) -> None:
        self._reset()

    def get_params(self) -> dict:
        """The constructor's arguments; ``lines`` only when not the default, so a saved
        retriever.json is the same as before ``lines`` existed."""
        params = super().get_params()
        for name, default in (
            ("lines", "whole"),
            ("passages", "whole"),
            ("long_words", 180),
            ("passage_words", 120),
        ):
            if params[name] == default:
                del params[name]
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
        self._parts: np.ndarray | None = None  # rows [0, _n_parts) hold long posts' parts
        self._part_of = np.zeros(0, np.int64)  # the catalog position each part belongs to
        self._n_parts = 0

    @property
    def vectors(self) -> np.ndarray:
        """One row per catalog position (a view of the buffer: a search holding it keeps
        reading the rows it had while later ones are appended)."""
        if self._buffer is None:
            return np.zeros((0, self.text_encoder.dim), np.float32)
        return self._buffer[: self._rows]

    def _index(self, events: pl.DataFrame, positions: np.ndarray) -> None:
        texts = document_text(events, self.doc_template)
        self.add_vectors(self.document_vectors(texts))
        owners, parts = self._long_parts(texts)
        if parts:
            self._add_parts(
                encode_documents(self.text_encoder, parts), np.asarray(positions)[owners]
            )

    def precompute(self, events: pl.DataFrame) -> None:
        texts = document_text(events, self.doc_template)
        self.document_vectors(texts)
        parts = self._long_parts(texts)[1]
        if parts:
            encode_documents(self.text_encoder, parts)

    def _long_parts(self, texts: list[str]) -> tuple[list[int], list[str]]:
        """The parts of the texts longer than the encoder's window (``passages = "best"``):
        for each part, the index of its text, and the part."""
        owners: list[int] = []
        parts: list[str] = []
        if self.passages == "whole":
            return owners, parts
        for i, text in enumerate(texts):
            if len(text.split()) > self.long_words:
                for part in chunks(text, self.passage_words):
                    owners.append(i)
                    parts.append(part)
        return owners, parts

    def _add_parts(self, vecs: np.ndarray, owners: np.ndarray) -> None:
        need = self._n_parts + len(vecs)
        if self._parts is None or need > len(self._parts):
            size = 0 if self._parts is None else len(self._parts)
            grown = np.zeros((max(need, size * 3 // 2, 256), vecs.shape[1]), np.float32)
            grown[: self._n_parts] = self._parts[: self._n_parts] if self._parts is not None else 0
            self._parts = grown
            part_of = np.zeros(len(grown), np.int64)
            part_of[: self._n_parts] = self._part_of[: self._n_parts]
            self._part_of = part_of
        self._parts[self._n_parts : need] = vecs
        self._part_of[self._n_parts : need] = owners
        self._n_parts = need

    def _with_parts(self, q: np.ndarray, k: int, mask: np.ndarray, found: tuple) -> tuple:
        """The top ``k`` (positions, scores) with each admitted long post scored by the best
        of its whole vector and its parts: the parts' best owners join the whole vectors'
        top k, and every candidate is scored again as that maximum."""
        if not self._n_parts:
            return found
        owner = self._part_of[: self._n_parts]
        keep = mask[owner]
        if not keep.any():
            return found
        owner = owner[keep]
        score = self._parts[: self._n_parts][keep] @ q
        order = np.argsort(-score, kind="stable")
        best: dict[int, float] = {}
        for j in order:  # each owner's best part, the best owners first
            best.setdefault(int(owner[j]), float(score[j]))
            if len(best) >= k:
                break
        pos, sc = found
        scores = {int(p): float(s) for p, s in zip(pos, sc)}
        for p, s in best.items():
            whole = scores.get(p)
            if whole is None:
                whole = float(self.vectors[p] @ q)
            scores[p] = max(whole, s)
        # every kept candidate with parts: its best part, even if not among the best owners
        if len(scores) > len(best):
            rest = np.array([p for p in scores if p not in best], np.int64)
            has = np.isin(owner, rest)
            if has.any():
                for p, s in zip(owner[has], score[has]):
                    if s > scores[int(p)]:
                        scores[int(p)] = float(s)
        ranked = sorted(scores.items(), key=lambda t: (-t[1], t[0]))[:k]
        return (
            np.array([p for p, _ in ranked], np.int64),
            np.array([s for _, s in ranked], np.float64),
        )

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
            )  # found once per filter and shared (memkit/retrieval/base.py)
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
            out[i] = self._with_parts(q[i], k, mask, out[i])
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
        if not len(rows):
            return np.zeros(0, np.float32)
        out = self.vectors[rows] @ q
        if self._n_parts:
            owner = self._part_of[: self._n_parts]
            has = np.isin(owner, rows)
            if has.any():
                best = dict.fromkeys(rows.tolist(), -np.inf)
                for p, s in zip(owner[has], self._parts[: self._n_parts][has] @ q):
                    best[int(p)] = max(best[int(p)], float(s))
                out = np.maximum(out, np.array([best[int(r)] for r in rows], np.float32))
        return out

    def _save_state(self, folder: Path) -> None:
        np.save(folder / "vectors.npy", self.vectors)
        if self._n_parts:
            np.save(folder / "parts.npy", self._parts[: self._n_parts])
            np.save(folder / "part_of.npy", self._part_of[: self._n_parts])
        if self.uses_hnsw():
            self._graph().save(str(folder / "hnsw.usearch"))

    def _load_state(self, folder: Path) -> None:
        self._buffer = np.load(folder / "vectors.npy")
        self._rows = len(self._buffer)
        if (folder / "parts.npy").exists():
            self._parts = np.load(folder / "parts.npy")
            self._part_of = np.load(folder / "part_of.npy")
            self._n_parts = len(self._parts)
        if (folder / "hnsw.usearch").exists():
            self._hnsw = Index.restore(str(folder / "hnsw.usearch"))
            self._hnsw_size = len(self.catalog)
