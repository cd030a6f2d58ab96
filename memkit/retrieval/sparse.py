"""Sparse retrievers: BM25 and TF-IDF over one term index.

The index keeps raw term counts, not precomputed scores, in a few CSC segments (one per
``add`` batch, merged when there are more than ``MAX_SEGMENTS``, as in Lucene). A query
gathers the postings of its terms and weighs them with the *current* collection
statistics, so document frequencies, the document count and the average length are
always exactly those of the alive collection: after ``add`` or ``remove`` a search scores
as a full refit would, with no refit. Segments are merged as Lucene's tiered policy does,
the smallest neighbours first, so a stream of small adds costs each posting a logarithmic
number of merges, never a copy of the whole index per add; collection-wide document
frequencies are recounted only when a search without a scope needs them after a removal.
A search works on the postings of its terms only (never on an array as long as the
collection), so its cost follows its terms' postings, not the collection's size. (bm25s
precomputes scores into the matrix, which is faster per query but goes stale when the
collection changes; eval/RESULTS.md has the side-by-side numbers.)

A search that names floors counts those statistics over the floors' events only (its
*scope*, see memkit/retrieval/base.py): it scores exactly as a retriever fitted on those
floors alone, whatever else is indexed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl
import scipy.sparse as sp

from memkit.config.model import BM25Spec, TfidfSpec
from memkit.core.text import Analyzer
from memkit.retrieval.base import Retriever, document_text, top_k
from memkit.retrieval.registry import register

MAX_SEGMENTS = 8
# Built indexes kept by (analyzer, texts), when a process asks for it (``share_indexes``).
_SHARED: dict | None = None
SHARED_MAX = 8


def share_indexes() -> None:
    """From now on this process remembers the last few term indexes built from scratch,
    by analyzer and texts, and a new index of the same texts starts as a copy. The eval
    fits a dozen configs on each data set, most of them with a BM25 part over the same
    documents; the service builds each index once and does not ask for this."""
    global _SHARED
    if _SHARED is None:
        _SHARED = {}


class Matches(NamedTuple):
    """A query's terms in a collection or a scope of it (``TermIndex.matches``): each
    posting as parallel arrays, and the statistics BM25 weighs them with."""

    ids: np.ndarray  # the query's term ids that occur
    qtf: np.ndarray  # how often each is in the query
    pos: np.ndarray  # each posting's document position
    tf: np.ndarray  # its count in that document
    which: np.ndarray  # which of ``ids`` it is
    df: np.ndarray  # each term's document frequency
    n_docs: int  # documents in the collection (or scope)
    total_len: float  # their summed lengths


class TermIndex:
    """Term counts per document, in segments of CSC matrices (rows = positions)."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer
        self.vocab: dict[str, int] = {}
        self._df = np.zeros(0, np.int64)  # alive documents containing each term (None: recount)
        self.doc_len = np.zeros(0, np.float64)  # terms per document (0 when dead)
        self.segments: list[tuple[int, sp.csc_matrix]] = []  # (first position, counts)
        self.n_docs = 0  # alive documents
        self.total_len = 0.0  # sum of doc_len, kept with it

    @property
    def df(self) -> np.ndarray:
        """Alive documents containing each term (recounted after a removal, when asked)."""
        if self._df is None:
            df = np.zeros(len(self.vocab), np.int64)
            alive = self.doc_len > 0
            for start, mat in self.segments:
                cols = np.repeat(np.arange(mat.shape[1]), np.diff(mat.indptr))
                df[: mat.shape[1]] += np.bincount(
                    cols[alive[mat.indices + start]], minlength=mat.shape[1]
                )
            self._df = df
        return self._df

    def add(self, texts: list[str], positions: np.ndarray) -> None:
        assert len(texts) == 0 or positions[0] == len(self.doc_len), (
            "positions must be appended in order"
        )
        if _SHARED is not None and len(self.doc_len) == 0 and len(texts):
            key = (self.analyzer, tuple(texts))
            if key in _SHARED:
                self._copy_from(_SHARED[key])
                return
            self._add(texts, positions)
            while len(_SHARED) >= SHARED_MAX:
                del _SHARED[next(iter(_SHARED))]
            _SHARED[key] = TermIndex(self.analyzer)._copy_from(self)
            return
        self._add(texts, positions)

    def _copy_from(self, other: "TermIndex") -> "TermIndex":
        """This index made a copy of ``other`` (its arrays copied: either may change)."""
        self.vocab = dict(other.vocab)
        self._df = None if other._df is None else other._df.copy()
        self.doc_len = other.doc_len.copy()
        self.segments = [(start, mat.copy()) for start, mat in other.segments]
        self.n_docs, self.total_len = other.n_docs, other.total_len
        return self

    def _add(self, texts: list[str], positions: np.ndarray) -> None:
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(texts), np.float64)
        for r, text in enumerate(texts):
            counts = Counter(self.analyzer(text))
            lengths[r] = sum(counts.values())
            for term, c in counts.items():
                t = self.vocab.get(term)
                if t is None:
                    t = self.vocab[term] = len(self.vocab)
                rows.append(r)
                cols.append(t)
                vals.append(c)
        width = len(self.vocab)
        mat = sp.csc_matrix((np.array(vals, np.float32), (rows, cols)), shape=(len(texts), width))
        if self._df is not None:
            self._df = np.concatenate([self._df, np.zeros(width - len(self._df), np.int64)])
            self._df += np.diff(mat.indptr)
        self.doc_len = np.concatenate([self.doc_len, lengths])
        self.total_len += float(lengths.sum())
        self.n_docs += len(texts)
        self.segments.append((int(positions[0]) if len(texts) else len(self.doc_len), mat))
        while len(self.segments) > MAX_SEGMENTS:
            sizes = [m.shape[0] for _, m in self.segments]
            i = min(range(len(sizes) - 1), key=lambda j: sizes[j] + sizes[j + 1])
            self.segments[i : i + 2] = [self._merged(self.segments[i : i + 2])]

    def remove(self, positions: np.ndarray) -> None:
        self.n_docs -= len(positions)
        self.total_len -= float(self.doc_len[positions].sum())
        self.doc_len[positions] = 0.0
        if len(positions):
            self._df = None  # recounted when a search over the whole collection needs it

    def _merged(self, segments: list[tuple[int, sp.csc_matrix]]) -> tuple[int, sp.csc_matrix]:
        width = len(self.vocab)
        mats = [
            sp.csc_matrix(
                (
                    m.data,
                    m.indices,
                    np.concatenate([m.indptr, np.full(width - m.shape[1], m.indptr[-1])]),
                ),
                shape=(m.shape[0], width),
            )
            for _, m in segments
        ]
        return segments[0][0], sp.vstack(mats, format="csc")

    def query_terms(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Known term ids of a query and how often each occurs in it."""
        counts = Counter(t for t in self.analyzer(text) if t in self.vocab)
        ids = np.array([self.vocab[t] for t in counts], np.int64)
        return ids, np.array(list(counts.values()), np.float64)

    def matches(
        self, text: str, scope: np.ndarray | None, rows: np.ndarray | None = None
    ) -> "Matches":
        """A query's terms that occur in the collection (or in ``scope``, a mask of alive
        positions, whose positions are ``rows`` when the caller has them), with their
        statistics there. Postings of dead documents are left in when there is no scope
        (they score, and no mask admits them)."""
        ids, qtf = self.query_terms(text)
        pos, tf, which = self.postings(ids)
        if scope is None:
            df = self.df[ids].astype(np.float64)
            return Matches(ids, qtf, pos, tf, which, df, self.n_docs, self.total_len)
        inside = scope[pos]
        pos, tf, which = pos[inside], tf[inside], which[inside]
        df = np.bincount(which, minlength=len(ids)).astype(np.float64)
        keep = df > 0  # a term only out of scope is not a term of this collection
        if not keep.all():
            renumber = np.cumsum(keep) - 1
            ids, qtf, df, which = ids[keep], qtf[keep], df[keep], renumber[which]
        rows = np.flatnonzero(scope) if rows is None else rows
        return Matches(ids, qtf, pos, tf, which, df, len(rows), float(self.doc_len[rows].sum()))

    def df_within(self, scope: np.ndarray) -> np.ndarray:
        """Document frequency of every term among the positions ``scope`` admits."""
        df = np.zeros(len(self.vocab), np.float64)
        for start, mat in self.segments:
            cols = np.repeat(np.arange(mat.shape[1]), np.diff(mat.indptr))
            df[: mat.shape[1]] += np.bincount(
                cols[scope[mat.indices + start]], minlength=mat.shape[1]
            )
        return df

    def postings(self, term_ids: np.ndarray):
        """For each query term i: positions and counts, as flat arrays plus the term index
        (term by term, each term's segments in order). Gathered per segment with array
        code: a query's terms' posting ranges at once, not one slice per term."""
        pos, tf, which = [], [], []
        for start, mat in self.segments:
            known = np.flatnonzero(term_ids < mat.shape[1])
            lo, hi = mat.indptr[term_ids[known]], mat.indptr[term_ids[known] + 1]
            n = hi - lo
            total = int(n.sum())
            if total:
                at = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(
                    total
                )  # the ranges, concatenated
                pos.append(mat.indices[at] + start)
                tf.append(mat.data[at])
                which.append(np.repeat(known, n))
        if not pos:
            return np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int64)
        which = np.concatenate(which)
        order = np.argsort(which, kind="stable")
        return (
            np.concatenate(pos)[order],
            np.concatenate(tf)[order].astype(np.float64),
            which[order],
        )

    def save(self, folder: Path, prefix: str) -> None:
        segments = [self._merged(self.segments)] if len(self.segments) > 1 else self.segments
        mat = segments[0][1] if segments else sp.csc_matrix((0, len(self.vocab)), dtype=np.float32)
        sp.save_npz(folder / f"{prefix}counts.npz", mat)
        terms = sorted(self.vocab, key=self.vocab.get)
        pl.DataFrame({"term": terms}).write_parquet(folder / f"{prefix}vocab.parquet")
        np.savez(
            folder / f"{prefix}stats.npz", df=self.df, doc_len=self.doc_len, n_docs=self.n_docs
        )

    def load(self, folder: Path, prefix: str) -> None:
        mat = sp.load_npz(folder / f"{prefix}counts.npz").tocsc()
        self.segments = [(0, mat)] if mat.shape[0] else []
        self.vocab = {
            t: i
            for i, t in enumerate(
                pl.read_parquet(folder / f"{prefix}vocab.parquet")["term"].to_list()
            )
        }
        stats = np.load(folder / f"{prefix}stats.npz")
        self._df, self.doc_len, self.n_docs = stats["df"], stats["doc_len"], int(stats["n_docs"])
        self.total_len = float(self.doc_len.sum())


class _SparseRetriever(Retriever):
    match_type = "keyword"

    def _built(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.index = TermIndex(Analyzer(self.stopwords, self.stemmer, irregular=self.irregular))

    def _index(self, events: pl.DataFrame, positions: np.ndarray) -> None:
        self.index.add(document_text(events, self.doc_template), positions)
        self._changed()

    def _unindex(self, positions: np.ndarray) -> None:
        self.index.remove(positions)
        self._changed()

    def _changed(self) -> None:
        pass

    def _search_batch(self, texts, k, masks, scopes=None):
        out = []
        for text, mask, scope in zip(texts, masks, scopes or [None] * len(texts)):
            pos, sc = self.matched(text, scope)
            keep = mask[pos] & (sc > 0)
            pos, sc = pos[keep], sc[keep]
            idx, best = top_k(sc, None, k)  # positions ascend, so ties go to the earlier event
            out.append((pos[idx], best))
        return out

    def score(self, text: str, n: int | None = None, scope: np.ndarray | None = None) -> np.ndarray:
        """Scores of every position for one query (0 where no term matches), with the
        statistics of ``scope`` (a mask of alive positions; None: the whole collection)."""
        out = np.zeros(len(self.catalog) if n is None else n)
        pos, sc = self.matched(text, scope)
        out[pos] = sc
        return out

    def matched(self, text: str, scope: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The positions where some query term occurs (ascending) and their scores."""
        rows = None if scope is None else self.catalog.rows(scope)
        terms = self.index.matches(text, scope, rows)
        if len(terms.pos) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        return _summed(terms.pos, self._contributions(terms, scope), len(self.catalog))

    def _contributions(self, terms: Matches, scope: np.ndarray | None) -> np.ndarray:
        """Each posting's share of its document's score (``terms``: what ``matches`` returns
        for ``scope``)."""
        raise NotImplementedError

    def _save_state(self, folder: Path) -> None:
        self.index.save(folder, "")

    def _load_state(self, folder: Path) -> None:
        self.index.load(folder, "")
        self._changed()


@register
class BM25Retriever(_SparseRetriever):
    """Okapi BM25 as Lucene scores it: idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` times
    ``tf / (tf + k1 * (1 - b + b * dl / avgdl))`` (no constant ``k1 + 1`` factor; the
    ranking is the same). bm25s with ``method="lucene"`` gives the same scores."""

    type_name = "bm25"
    spec = BM25Spec

    def _contributions(self, terms: Matches, scope) -> np.ndarray:
        t = terms
        idf = np.log1p((t.n_docs - t.df + 0.5) / (t.df + 0.5))
        avgdl = t.total_len / t.n_docs
        norm = self.k1 * (1.0 - self.b + self.b * self.index.doc_len[t.pos] / avgdl)
        return (idf * t.qtf)[t.which] * t.tf / (t.tf + norm)


@register
class TfidfRetriever(_SparseRetriever):
    """Cosine similarity of TF-IDF vectors, weighted exactly as scikit-learn's
    ``TfidfVectorizer`` (``smooth_idf=True``, ``norm="l2"``, optional ``sublinear_tf``).

    scikit-learn fixes its vocabulary and idf at ``fit``; to keep ``add`` exact without a
    refit, the weights are applied to the shared term index at query time and document
    norms are recomputed (one sparse product) after each change. A test checks the
    scores against ``TfidfVectorizer`` itself.
    """

    type_name = "tfidf"
    spec = TfidfSpec

    def _built(self) -> None:
        self._changed()
        super()._built()

    def _changed(self) -> None:
        self._norms = None
        self._scoped = {}  # scope (its mask's bytes) -> (idf, norms) counted within it

    def warm(self) -> None:
        self._doc_norms()

    def _idf(self, df: np.ndarray, n: int) -> np.ndarray:
        return np.log((1.0 + n) / (1.0 + df)) + 1.0

    def _tf(self, tf: np.ndarray) -> np.ndarray:
        return 1.0 + np.log(tf) if self.sublinear_tf else tf

    def _norms_for(self, idf: np.ndarray, alive: np.ndarray) -> np.ndarray:
        idf2 = idf**2
        sq = np.zeros(len(self.index.doc_len))
        for start, mat in self.index.segments:
            w = mat.copy()
            w.data = self._tf(w.data.astype(np.float64)) ** 2
            sq[start : start + mat.shape[0]] = w @ idf2[: mat.shape[1]]
        sq[~alive] = 0.0
        return np.sqrt(sq)

    def _doc_norms(self) -> np.ndarray:
        if self._norms is None:
            idf = self._idf(self.index.df.astype(np.float64), self.index.n_docs)
            self._norms = self._norms_for(idf, self.catalog.alive)
        return self._norms

    def _statistics(self, scope: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(idf of every term, norm of every document) over the collection or a scope."""
        if scope is None:
            return self._idf(self.index.df.astype(np.float64), self.index.n_docs), self._doc_norms()
        key = np.packbits(scope).tobytes()
        if key not in self._scoped:
            if len(self._scoped) > 64:
                self._scoped.clear()
            idf = self._idf(self.index.df_within(scope), int(scope.sum()))
            self._scoped[key] = (idf, self._norms_for(idf, scope))
        return self._scoped[key]

    def _contributions(self, terms: Matches, scope) -> np.ndarray:
        ids, qtf, pos, tf, which = terms.ids, terms.qtf, terms.pos, terms.tf, terms.which
        all_idf, norms = self._statistics(scope)
        idf = all_idf[ids]
        q = self._tf(qtf) * idf
        q /= np.linalg.norm(q)
        norm = norms[pos]
        alive = norm > 0  # a dead document scores 0 (and no mask admits it)
        return np.where(
            alive, self._tf(tf) * idf[which] * q[which] / np.where(alive, norm, 1.0), 0.0
        )


def _summed(pos: np.ndarray, contrib: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct positions (ascending) and the sum of their contributions. Few postings:
    sorted; many (a fair share of the collection): counted over the whole collection,
    which is then cheaper than sorting."""
    if len(pos) * 8 < n:
        found, where = np.unique(pos, return_inverse=True)
        return found, np.bincount(where, weights=contrib, minlength=len(found))
    sums = np.bincount(pos, weights=contrib, minlength=n)
    found = np.flatnonzero(np.bincount(pos, minlength=n))
    return found, sums[found]
