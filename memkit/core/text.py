"""One analyzer for every sparse part: Unicode-aware tokens, case folding, stopwords, stemming.

``Analyzer()(text)`` returns the list of terms. The same object (same parameters) must be
used to index and to query; retrievers store its params and rebuild it on load.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer

# Lucene's default English stop set (what BEIR's Elasticsearch and Pyserini BM25 use).
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)

# NLTK's English list (179 words): better for chat, where "did", "what", "you" are noise.
NLTK_STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
    yourselves he him his himself she she's her hers herself it it's its itself they them their
    theirs themselves what which who whom this that that'll these those am is are was were be
    been being have has had having do does did doing a an the and but if or because as until
    while of at by for with about against between into through during before after above below
    to from up down in out on off over under again further then once here there when where why
    how all any both each few more most other some such no nor not only own same so than too
    very s t can will just don don't should should've now d ll m o re ve y ain aren aren't
    couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't
    ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
    weren weren't won won't wouldn wouldn't""".split()
)

STOPWORD_SETS = {"lucene": LUCENE_STOPWORDS, "nltk": NLTK_STOPWORDS, "english": NLTK_STOPWORDS}

# The past forms of common irregular verbs, to their base: a question asks "when did they
# drive there?" of a post saying "we drove", "what did Sofia win?" of "my pumpkin won
# second prize" (an analyzer with ``irregular``; the answer writer's checks).
IRREGULAR = dict(
    pair.split(":")
    for pair in (
        "drove:drive driven:drive went:go gone:go bought:buy ate:eat eaten:eat got:get "
        "gotten:get came:come saw:see seen:see took:take taken:take made:make gave:give "
        "given:give ran:run won:win lost:lose left:leave found:find told:tell said:say met:meet "
        "sent:send broke:break broken:break fell:fall felt:feel flew:fly flown:fly rode:ride "
        "wrote:write written:write sang:sing swam:swim began:begin brought:bring caught:catch "
        "thought:think spent:spend paid:pay kept:keep held:hold sat:sit stood:stand heard:hear "
        "knew:know known:know became:become sold:sell built:build chose:choose chosen:choose "
        "drank:drink drunk:drink forgot:forget hid:hide hit:hit hurt:hurt lent:lend read:read "
        "shook:shake slept:sleep spoke:speak stole:steal stolen:steal taught:teach "
        "threw:throw wore:wear woke:wake fed:feed grew:grow grown:grow dug:dig drew:draw "
        "drawn:draw fought:fight froze:freeze frozen:freeze hung:hang rang:ring "
        "shot:shoot sank:sink sunk:sink stuck:stick swept:sweep understood:understand "
        "fled:flee sought:seek bent:bend bled:bleed burnt:burn learnt:learn blew:blow "
        "blown:blow forgave:forgive forgiven:forgive bitten:bite hidden:hide "
        "ridden:ride risen:rise"
    ).split()
)
# A token is a run of letters or digits (any script); an apostrophe inside a word is kept
# ("don't"), so that stopword lists with contractions apply.
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


class Analyzer:
    """Text to terms.

    Parameters
    ----------
    stopwords: "english" (= "nltk"), "lucene", None, or an iterable of words.
    stemmer: a Snowball language name known to PyStemmer ("english", "porter", ...) or None.
    min_length: drop terms shorter than this (after stemming).
    irregular: read a common irregular verb's past forms as its base form ("won" as "win",
        "flew" as "fly"; ``IRREGULAR``), before stopwords ("won" is one of NLTK's).
    """

    def __init__(
        self,
        stopwords: str | None = "english",
        stemmer: str | None = "english",
        min_length: int = 1,
        irregular: bool = False,
    ):
        self.stopwords = stopwords
        self.stemmer = stemmer
        self.min_length = min_length
        self.irregular = bool(irregular)
        if stopwords is None:
            self._stop: frozenset[str] = frozenset()
        elif isinstance(stopwords, str):
            if stopwords not in STOPWORD_SETS:
                raise ValueError(
                    f"stopwords: expected one of {sorted(STOPWORD_SETS)} or None, got {stopwords!r}"
                )
            self._stop = STOPWORD_SETS[stopwords]
        else:
            self._stop = frozenset(w.lower() for w in stopwords)
        self._stem = _stem_fn(stemmer) if stemmer else None

    def params(self) -> dict:
        stop = (
            self.stopwords
            if self.stopwords is None or isinstance(self.stopwords, str)
            else sorted(self._stop)
        )
        return {
            "stopwords": stop,
            "stemmer": self.stemmer,
            "min_length": self.min_length,
            "irregular": self.irregular,
        }

    def tokens(self, text: str) -> list[str]:
        """Unicode-normalised, case-folded word tokens, before stopwords and stemming."""
        text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
        return _TOKEN.findall(text)

    def __call__(self, text: str) -> list[str]:
        return list(_analyzed(self, text))

    def _terms(self, text: str) -> tuple[str, ...]:
        tokens = self.tokens(text)
        if self.irregular:
            tokens = [IRREGULAR.get(t, t) for t in tokens]
        terms = [t for t in tokens if t not in self._stop]
        # Possessives: "caroline's" indexes as "caroline".
        terms = [t[:-2] if t.endswith("'s") else t for t in terms]
        if self._stem is not None:
            terms = [self._stem(t) for t in terms]
        return tuple(t for t in terms if len(t) >= self.min_length)

    def __eq__(self, other) -> bool:
        return isinstance(other, Analyzer) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (self._stop, self.stemmer, self.min_length, self.irregular)


@lru_cache(maxsize=50_000)
def _analyzed(analyzer: Analyzer, text: str) -> tuple[str, ...]:
    """An analyzer's terms of a text, remembered: the same texts are analysed again and
    again (every post of a session shares its session's text; an eval indexes each data
    set once per config; a query is analysed by every sparse part). Analyzers with the
    same parameters are equal, so they share what is remembered."""
    return analyzer._terms(text)


@lru_cache(maxsize=8)
def _stem_fn(language: str):
    stemmer = Stemmer.Stemmer(language)
    return lru_cache(maxsize=200_000)(stemmer.stemWord)


# -- sentences and passages ----------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A long post's sentences are encoded one by one at ingest, so a text cut into many tiny
# pieces ("Ok. Yes. No." for 20,000 characters: 1,500 of them) would cost a run of the model
# each, several times the CPU of prose as long (SECURITY.md). Where a long text's pieces
# average under SENTENCE_MIN_CHARS, consecutive ones are joined until each is that long;
# prose (sentences of 60 to 120 characters) and chat lines are split as before.
SENTENCE_MIN_CHARS = 40
LONG_TEXT_CHARS = 1000


def sentences(text: str | None) -> list[str]:
    """The sentences of a post's text (split after . ! ? and at line breaks); in a long
    text of tiny pieces, runs of them joined to at least ``SENTENCE_MIN_CHARS``.
    Remembered: the writer splits the same candidates for every question that reaches
    them."""
    return list(_sentences(text or ""))


@lru_cache(maxsize=65536)
def _sentences(text: str) -> tuple[str, ...]:
    parts = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    if len(text) <= LONG_TEXT_CHARS or len(parts) * SENTENCE_MIN_CHARS <= len(text):
        return tuple(parts)
    joined: list[str] = []
    for part in parts:
        if joined and len(joined[-1]) < SENTENCE_MIN_CHARS:
            joined[-1] = f"{joined[-1]} {part}"
        else:
            joined.append(part)
    return tuple(joined)


CHUNK_WORDS = 48  # words a passage holds at most (whole sentences; one longer sentence is cut)


def chunks(text: str | None, max_words: int = CHUNK_WORDS) -> list[str]:
    """A text in runs of whole sentences of at most ``max_words`` words (a longer sentence
    stands alone and is cut by the tokenizer)."""
    out: list[str] = []
    current: list[str] = []
    n = 0
    for s in sentences(text):
        w = len(s.split())
        if current and n + w > max_words:
            out.append(" ".join(current))
            current, n = [], 0
        current.append(s)
        n += w
    if current:
        out.append(" ".join(current))
    return out
