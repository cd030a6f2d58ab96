"""How often a question's text is read by a regular expression while it is answered.

    .venv/bin/python eval/bench/question_reads.py                       # the served default
    .venv/bin/python eval/bench/question_reads.py --config reader --top 15
    .venv/bin/python eval/bench/question_reads.py --json                # last line: JSON

Every conversation of a suite (``--dataset``, default ``conversations-dev``) is asked turn by
turn through ``Pipeline.query``, as ``memkit eval`` asks it. While a question is answered,
each call of a compiled pattern (``search``, ``match``, ``fullmatch``, ``findall``,
``finditer``, ``sub``, ``subn``, ``split``) and of the ``re`` module's functions is counted
when the string it reads is the question or made from it: the question itself, a piece of
it, or a string all of whose words are the question's (the words carried from earlier turns
are not counted: they are the history's). Prints, a question: the median and the quartiles
of those evaluations, how many call sites (file:line) made them, and the sites that read the
question most.

The hook is installed before memkit is imported (patterns compiled at import are wrapped),
so run it as a script, not from a notebook that imported memkit already.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORD = re.compile(r"\w+")
METHODS = ("search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split")


class Trace:
    """What the hook counts for the question being answered (None between questions)."""

    def __init__(self):
        self.question: str | None = None
        self.words: set[str] = set()
        self.count = 0
        self.sites: Counter = Counter()
        self.per_question: list[int] = []
        self.all_sites: Counter = Counter()
        # reads made outside Question.read (memkit/question/__init__.py), by the first
        # caller outside the language pack, the text tables and the question package:
        # what still reads the question's text after it was read
        self.outside = 0
        self.per_question_outside: list[int] = []
        self.askers: Counter = Counter()

    def start(self, text: str) -> None:
        self.question, self.count, self.sites, self.outside = text, 0, Counter(), 0
        self.words = {w.lower() for w in WORD.findall(text)}

    def stop(self) -> None:
        self.per_question.append(self.count)
        self.per_question_outside.append(self.outside)
        self.all_sites.update(self.sites)
        self.question = None

    def reads_question(self, s) -> bool:
        q = self.question
        if q is None or not isinstance(s, str) or not s.strip():
            return False
        if s in q or s.lower() in q.lower():
            return True
        words = [w.lower() for w in WORD.findall(s)]
        return bool(words) and all(w in self.words for w in words)

    def seen(self, s) -> None:
        if self.reads_question(s):
            self.count += 1
            frame = sys._getframe(2)
            while frame and frame.f_code.co_filename == __file__:
                frame = frame.f_back
            if frame is not None:
                self.sites[_site(frame)] += 1
            asker = None
            while frame is not None:
                name = frame.f_code.co_filename
                if name.endswith(QUESTION_READ[0]) and frame.f_code.co_name in QUESTION_READ[1]:
                    return  # read by Question.read: the one reading the goal allows
                if asker is None and not any(part in name for part in READERS):
                    asker = frame
                frame = frame.f_back
            self.outside += 1
            if asker is not None:
                self.askers[_site(asker)] += 1


def _site(frame) -> str:
    where = Path(frame.f_code.co_filename)
    try:
        where = where.relative_to(ROOT)
    except ValueError:
        pass
    return f"{where}:{frame.f_lineno}"


# Question.read and Question.of (which it calls) are where the question is read; the modules
# whose functions do the reading for whoever calls them are skipped to name the caller.
QUESTION_READ = ("memkit/question/__init__.py", ("read", "of"))
READERS = (
    "memkit/language/",
    "memkit/core/text.py",
    "memkit/question/",
    "/re/",
    "question_reads.py",
)


TRACE = Trace()


class CountedPattern:
    """A compiled pattern whose reads of the question are counted; everything else is the
    pattern's own."""

    __slots__ = ("_p",)

    def __init__(self, p):
        self._p = p

    def __getattr__(self, name):
        return getattr(self._p, name)

    def __reduce__(self):
        return (re.compile, (self._p.pattern, self._p.flags))

    def __eq__(self, other):
        return self._p == getattr(other, "_p", other)

    def __hash__(self):
        return hash(self._p)


def _method(name):
    def call(self, string, *args, **kwargs):
        # sub/subn take (repl, string): the string read is the second argument
        text = args[0] if name in ("sub", "subn") and args else string
        TRACE.seen(text)
        return getattr(self._p, name)(string, *args, **kwargs)

    return call


for _name in METHODS:
    setattr(CountedPattern, _name, _method(_name))


def _module_function(original, name):
    def call(pattern, string, *args, **kwargs):
        text = args[0] if name in ("sub", "subn") and args else string
        TRACE.seen(text)
        if isinstance(pattern, CountedPattern):
            pattern = pattern._p
        return original(pattern, string, *args, **kwargs)

    return call


def install() -> None:
    """Wrap ``re.compile`` and the module's reading functions (before memkit is imported)."""
    compile_ = re.compile

    def counted_compile(pattern, flags=0):
        if isinstance(pattern, CountedPattern):
            return pattern
        return CountedPattern(compile_(pattern, flags))

    re.compile = counted_compile
    for name in METHODS:
        setattr(re, name, _module_function(getattr(re, name), name))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="default", help="a config name or TOML path")
    ap.add_argument(
        "--dataset",
        default=str(ROOT / "datasets" / "conversations" / "dev"),
        help="a conversation suite's folder (default: the dev suite)",
    )
    ap.add_argument("--top", type=int, default=10, help="call sites to list")
    ap.add_argument("--json", action="store_true", help="last line: the figures as JSON")
    args = ap.parse_args(argv)

    install()
    sys.path.insert(0, str(ROOT))
    from memkit.config import resolve_config
    from memkit.datasets import read_dataset
    from memkit.evaluation.harness import run_queries
    from memkit.pipeline import Pipeline

    dataset = read_dataset(args.dataset)
    pipeline = Pipeline.from_config(resolve_config(args.config)).fit(dataset.events)
    ask = Pipeline.ask

    def traced(self, req):
        TRACE.start(req.query)
        try:
            return ask(self, req)
        finally:
            TRACE.stop()

    Pipeline.ask = traced
    queries = dataset.queries.filter(dataset.queries["conversation_id"].is_not_null())
    run_queries(pipeline, queries, k=10, events=dataset.events)
    counts = TRACE.per_question
    q1, med, q3 = statistics.quantiles(counts, n=4) if len(counts) > 1 else (counts * 3)
    out = {
        "config": args.config,
        "dataset": args.dataset,
        "questions": len(counts),
        "median": med,
        "q1": q1,
        "q3": q3,
        "max": max(counts, default=0),
        "call_sites": len(TRACE.all_sites),
        "modules": len({s.rsplit(":", 1)[0] for s in TRACE.all_sites}),
        "outside_median": statistics.median(TRACE.per_question_outside or [0]),
        "outside_callers": len(TRACE.askers),
    }
    print(
        f"{args.config} on {args.dataset}: {out['questions']} questions, regular-expression "
        f"reads of the question a question: median {med:g} (quartiles {q1:g}-{q3:g}, "
        f"max {out['max']}), from {out['call_sites']} call sites in {out['modules']} files"
    )
    for site, n in TRACE.all_sites.most_common(args.top):
        print(f"  {n / max(len(counts), 1):6.2f} a question  {site}")
    print(
        f"outside Question.read: median {out['outside_median']:g} a question, from "
        f"{out['outside_callers']} callers; the callers that read it most:"
    )
    for site, n in TRACE.askers.most_common(args.top):
        print(f"  {n / max(len(counts), 1):6.2f} a question  {site}")
    if args.json:
        print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
