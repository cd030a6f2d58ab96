"""Every answer writer a config can name, asked real questions through the pipeline
(``Pipeline.from_config`` and ``query``), not called directly: a writer whose interface
drifted from the pipeline's call fails here on every question.

The LLM writer needs a chat-completions endpoint; the only local generative model is too
weak to answer, so its tests are contract tests against a small local HTTP server that
speaks the protocol the writer calls (OpenAI's ``POST /v1/chat/completions``) and answers
from the numbered posts it is sent."""

import inspect
import json
import re
import socket
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memkit.answer import ANSWERERS
from memkit.config.model import config_schema
from memkit.core.tables import events_frame
from memkit.pipeline import Pipeline

NOW = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
POSTS = [
    ("p1", "Maya", "2024-03-02T10:00:00+00:00",
     "I adopted a kitten from the shelter on Saturday. Her name is Pixel and she is tiny."),
    ("p2", "Tom", "2024-03-05T18:30:00+00:00",
     "Finished the first draft of my thesis chapter on coral reefs."),
    ("p3", "Maya", "2024-03-20T20:00:00+00:00",
     "Pottery class tonight: my first bowl came out lopsided."),
    ("p4", "Tom", "2024-04-10T08:15:00+00:00",
     "Booked train tickets to Edinburgh for the book festival in August."),
    ("p5", "Ines", "2024-04-12T12:00:00+00:00",
     "The bakery on Mill Lane now sells rye bread on Fridays."),
]  # fmt: skip
TEXT = {e: text for e, _, _, text in POSTS}
KITTEN = "What is the name of Maya's kitten?"
LISTING = "What happened with the kitten in March 2024?"


@pytest.fixture(scope="module")
def events():
    return events_frame(
        {
            "event_id": e,
            "floor_id": "home",
            "block_id": "home/feed",
            "block_type": "feed",
            "user_id": who,
            "created_at": at,
            "text": text,
        }
        for e, who, at, text in POSTS
    )


def pipeline(events, answer: dict) -> Pipeline:
    # time windows on: a listing question ("... in March 2024?") reaches the writer as one
    config = {"retriever": {"type": "bm25"}, "time_windows": True, "answer": answer}
    return Pipeline.from_config(config).fit(events)


def quotes_a_post(written) -> bool:
    """The answer quotes at least one post, and each post it names is quoted in its text."""
    return bool(written.quoted) and all(
        any(s in written.text for s in re.split(r"(?<=[.!?])\s+", TEXT[e])) for e in written.quoted
    )


def schema_answer_types() -> set[str]:
    schema = config_schema()
    refs = schema["properties"]["answer"]["anyOf"][0]["oneOf"]
    defs = [schema["$defs"][r["$ref"].rsplit("/", 1)[-1]] for r in refs]
    return {d["properties"]["type"]["const"] for d in defs}


def test_every_writer_type_the_schema_allows_is_tested_here_and_has_one_interface():
    assert schema_answer_types() == set(ANSWERERS) == {"extractive", "llm"}
    for name, cls in ANSWERERS.items():
        assert list(inspect.signature(cls.write).parameters) == ["self", "question", "evidence"], (
            name
        )


# -- extractive ------------------------------------------------------------------------------
def test_extractive_writer_answers_through_the_pipeline(events):
    p = pipeline(events, {"type": "extractive"})
    res = p.query(KITTEN, now=NOW)
    written = res.written
    assert written.writer == "extractive" and not written.declined
    assert written.quoted == ["p1"] and quotes_a_post(written)
    assert "Her name is Pixel" in written.text and "Maya wrote" in written.text
    assert [i.event_id for i in res.items][0] == "p1"
    # a question that lists a window's posts, searched for what else it names
    listed = p.query(LISTING, now=NOW).written
    assert listed.text.startswith("1 post from March 2024.") and listed.quoted == ["p1"]
    assert quotes_a_post(listed)
    # a one-line account of what was found still knows what an answer would quote
    account = p.query("kitten shelter", now=NOW, summary=False).written
    assert account.text.startswith("Found 1 item for “kitten shelter”")
    assert account.quoted == ["p1"]
    # nothing posted answers it: declined, nothing quoted
    never = p.query("What is Ines's favourite pizza topping?", now=NOW).written
    assert never.declined and never.quoted == []


def test_the_pipeline_calls_the_writer_once_with_the_question_and_its_evidence(events):
    from memkit.answer import Asked, Evidence

    p = pipeline(events, {"type": "extractive"})
    calls = []
    write = p.answerer.write
    p.answerer.write = lambda *args, **kw: calls.append((args, kw)) or write(*args, **kw)
    p.query(KITTEN, now=NOW, authors=["Maya", "Tom", "Ines"])
    ((args, kw),) = calls
    question, evidence = args
    assert kw == {} and isinstance(question, Asked) and isinstance(evidence, Evidence)
    assert question.text == KITTEN and question.summary and not question.listing
    assert question.authors == ("Maya", "Tom", "Ines")
    assert question.reading.query == KITTEN
    assert evidence.items[0].event_id == "p1" and not evidence.ranked and evidence.found is None
    calls.clear()
    p.query(LISTING, now=NOW)
    ((args, _),) = calls
    question, evidence = args
    assert question.listing and evidence.ranked and evidence.found == 1
    assert [i.event_id for i in evidence.items] == ["p1"]


# -- LLM: contract tests against a local chat-completions endpoint ------------------------------
class ChatCompletions(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions`` as OpenAI-compatible servers answer it: the reply is
    the numbered post sharing most words with the question, cited as [n]. ``mode`` makes
    it fail instead: an HTTP error, a body that is not JSON, no choices, content null, or
    a reply slower than the writer's timeout."""

    mode = "ok"
    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatCompletions.seen.append((self.path, dict(self.headers), body))
        mode = ChatCompletions.mode
        if mode == "slow":
            time.sleep(1.5)
        if mode == "error":
            self.send_response(500)
            self.end_headers()
            return
        prompt = body["messages"][-1]["content"]
        question = prompt.rsplit("Question: ", 1)[1]
        words = set(re.findall(r"\w+", question.lower()))
        posts = re.findall(r"^\[(\d+)\] \([^)]*\) (.*)$", prompt, re.MULTILINE)
        n, text = max(posts, key=lambda p: len(words & set(re.findall(r"\w+", p[1].lower()))))
        content = {"null": None}.get(mode, f"{text} [{n}]")
        reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": (
                []
                if mode == "no-choices"
                else [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ]
            ),
        }
        data = b"<html>bad gateway</html>" if mode == "garbage" else json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ChatCompletions.mode = "ok"
    ChatCompletions.seen.clear()
    yield f"http://127.0.0.1:{server.server_port}/v1/chat/completions"
    server.shutdown()
    server.server_close()


def closed_port() -> str:
    """The URL of a port no one listens on (the connection is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/chat/completions"


def llm(url: str, **kw) -> dict:
    return {"type": "llm", "url": url, "model": "local-chat", "timeout": 0.5, **kw}


def test_contract_llm_writer_answers_through_the_pipeline(events, endpoint, monkeypatch):
    monkeypatch.setenv("MEMKIT_TEST_LLM_KEY", "sk-local")
    p = pipeline(events, llm(endpoint, api_key_env="MEMKIT_TEST_LLM_KEY"))
    res = p.query(KITTEN, now=NOW)
    written = res.written
    assert written.writer == "llm" and not written.declined
    assert written.quoted == ["p1"] and quotes_a_post(written)
    assert "Her name is Pixel" in written.text
    assert "p1" in [i.event_id for i in res.items]
    # what it sent: one request, as the protocol has it
    ((path, headers, body),) = ChatCompletions.seen
    assert path == "/v1/chat/completions" and headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer sk-local"
    assert body["model"] == "local-chat" and body["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    prompt = body["messages"][1]["content"]
    assert f"(Maya, 2 March 2024, in Feed) {TEXT['p1']}" in prompt
    assert prompt.endswith(f"Question: {KITTEN}")


@pytest.mark.parametrize("mode", ["error", "garbage", "no-choices", "null", "slow", "refused"])
def test_contract_llm_writer_falls_back_to_the_extractive_writer_through_the_pipeline(
    events, endpoint, mode, caplog
):
    ChatCompletions.mode = mode
    url = closed_port() if mode == "refused" else endpoint
    p = pipeline(events, llm(url))
    given, passed_on = [], []
    write, fallback = p.answerer.write, p.answerer.extractive.write
    p.answerer.write = lambda *args, **kw: given.append((args, kw)) or write(*args, **kw)
    p.answerer.extractive.write = lambda *args, **kw: (
        passed_on.append((args, kw)) or fallback(*args, **kw)
    )
    written = p.query(KITTEN, now=NOW).written
    # the fallback is given what the LLM writer was: the same question and evidence
    (((question, evidence), kw),) = given
    assert passed_on == [((question, evidence), kw)] and kw == {}
    assert passed_on[0][0][0] is question and passed_on[0][0][1] is evidence
    # the extractive writer's answer, given the same question and evidence
    alone = pipeline(events, {"type": "extractive"}).query(KITTEN, now=NOW).written
    assert written.writer == "extractive" and not written.declined
    assert written.text == alone.text and written.quoted == alone.quoted == ["p1"]
    assert quotes_a_post(written)
    assert "LLM answer writer failed" in caplog.text
    assert len(ChatCompletions.seen) == (0 if mode == "refused" else 1)


def test_llm_writer_leaves_listings_and_accounts_to_the_extractive_writer(events, endpoint):
    p = pipeline(events, llm(endpoint))
    alone = pipeline(events, {"type": "extractive"})
    for question, summary in [(LISTING, True), ("kitten shelter", False)]:
        written = p.query(question, now=NOW, summary=summary).written
        expected = alone.query(question, now=NOW, summary=summary).written
        assert written.writer == "extractive" and written.text == expected.text
        assert written.quoted == expected.quoted == ["p1"]
    assert ChatCompletions.seen == []  # neither was sent to the endpoint
