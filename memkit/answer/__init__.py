"""Answer writers: turn the ranked items of a query into the text a person reads.

Every answerer (:class:`Answerer`: what the pipeline calls) has one entry point,
``write(question, evidence)``. ``question`` is an :class:`Asked`: the question's text and
how it is asked (a summary or a one-line account of what was found, the authors where it
is asked, the conversation's reading of it, whether it lists a time window's posts).
``evidence`` is an :class:`Evidence`: the top items, best first (:data:`AnswerItem`: the
pipeline's memkit.core.items.Item, or a dict with ``text`` and, where known, ``event_id``,
``speaker`` (the author's name), ``block_title``, ``block_type_name`` and
``created_at``), and what the pipeline learned of them (a reader found one likely to
answer, the first states a changed fact). It returns an :class:`Answer`: the text, the
event ids it quotes, and whether it declined.

``extractive`` (the default, memkit.answer.extractive) runs offline and only quotes what
was posted. With its two models (``[answer.select]`` and ``[answer.decline]`` in the
config, logistic regressions written by ``memkit train answers``, cross-validated by
conversation):

1. **Candidates** are the sentences of the top ``max_items`` items, less questions (a
   question never answers one) and greetings ("Thanks, Caroline!": nothing but names and
   pleasantries, which the encoder finds close to any question naming that person).
2. **Select**: each candidate is described by ``SENTENCE_FEATURES`` (cosine with the
   question, the question's terms it and its post contain, the item's rank, whether its
   author is someone other than the person asked about, whether it holds what the
   question type asks for: a date, a number, a place, a name) and the best one is quoted
   (memkit.answer.features says what each feature measures; memkit.answer.selection).
   The selection model learned which *post* answers (LoCoMo's labels name posts), so the
   sentence quoted of that post is chosen by a third model, ``[answer.within]``
   (``WITHIN_FEATURES``: its cosine and the question's words it holds against the post's
   best, whether it holds what is asked), trained on SQuAD 2.0's paragraphs by
   ``memkit train within``: "Who taught the guests to ceilidh?" quotes the blog post's
   "Lena taught half the guests to ceilidh", not its opening.
3. **Decline**: the question as a whole is described by ``QUERY_FEATURES``: how well the
   posts *about* the person asked about answer it against posts about someone else
   (speaker attribution: an author's "I", the addressee's "you", a third-person name),
   whether that person only *asked* about it, whether the question's terms or proper
   names appear in the items at all. Above the model's threshold, or when at least
   ``max_missing`` of a question's terms (at most ``QUESTION_TERMS``) are in none of the
   items (a fact never posted: "What is Ann's favourite pizza topping?" over posts that
   mention pizza once), the writer says memory holds nothing on it, and quotes nothing.
4. **Shape** (memkit.answer.compose): one post, the sentence that answers (cut to its
   clause past ``max_words``), attributed ("On 8 May 2023 Caroline wrote in “Session 1”:
   “...”"); several posts only when the question asks for several (``wants_list``: "What
   activities ...", "Where has ..."). A when-question leads with the date, relative times
   ("yesterday") resolved against the post's own time (memkit.language.timeref). Whatever users
   typed (the quoted text, names, block titles) is shown through memkit.answer.render, so
   that none of it can close the answer's “ ” marks, and two authors of one name (or of
   look-alike names) are named apart by their user ids ("Oli (u_1a2b3c)").

Without models it answers by rules alone (memkit.answer.rules: for configs with no models,
and the baseline in eval/RESULTS.md).

``llm`` (memkit.answer.llm) sends the question and the numbered items to an
OpenAI-compatible chat-completions endpoint and falls back to ``extractive`` on any
failure.
"""

from __future__ import annotations

from memkit.answer.base import DECLINE, Answer, Answerer, AnswerItem, Asked, Evidence, ItemDict
from memkit.answer.extractive import ExtractiveAnswerer
from memkit.answer.features import QUERY_FEATURES, SENTENCE_FEATURES, Candidates
from memkit.answer.llm import LLMAnswerer
from memkit.answer.selection import QUESTION_TERMS
from memkit.config.model import AnswerSpec, construct, typed
from memkit.core.text import sentences
from memkit.question.kinds import question_type, wants_list

__all__ = [
    "ANSWERERS",
    "DECLINE",
    "QUERY_FEATURES",
    "QUESTION_TERMS",
    "SENTENCE_FEATURES",
    "Answer",
    "AnswerItem",
    "Answerer",
    "Asked",
    "Candidates",
    "Evidence",
    "ExtractiveAnswerer",
    "ItemDict",
    "LLMAnswerer",
    "build_answerer",
    "question_type",
    "sentences",
    "wants_list",
]

ANSWERERS: dict[str, type[Answerer]] = {"extractive": ExtractiveAnswerer, "llm": LLMAnswerer}


def build_answerer(spec: "AnswerSpec | dict | None") -> Answerer:
    """The writer a config's ``[answer]`` table describes, as a typed spec
    (memkit.config.model) or its dict checked into one first (None: extractive, no
    models). A type added to ANSWERERS at run time has its settings checked by its class."""
    spec = typed("answer", spec or {"type": "extractive"})
    return construct(ANSWERERS[spec.type], spec, "answer")
