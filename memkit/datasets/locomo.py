"""LoCoMo (``locomo10.json`` layout) to a memkit Dataset.

One floor per conversation (``conv-26``), one block per session (``conv-26/session_1``,
type ``feed``), one event per dialog turn (``conv-26/D1:3``) whose ``created_at`` is the
session's date and time and whose ``user_id`` is the speaker; an image's BLIP caption is
appended to the text as `` [image: CAPTION]``. Questions keep their gold ``answer`` (category
5 has only ``adversarial_answer``, kept in metadata) and their category by name. Evidence
ids are normalised (``"D8:6; D9:17"`` is two ids, ``"D:11:26"`` is ``D11:26``, ``"D30:05"``
is ``D30:5``); ids that name no turn are counted in ``Dataset.info["evidence_unresolved"]``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from memkit.core.errors import DatasetError
from memkit.core.tables import Dataset, events_frame, qrels_frame, queries_frame

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def normalize_evidence(raw: list | str | None) -> tuple[list[str], list[str]]:
    """Evidence ids as ``D<session>:<turn>``; returns (ids, pieces that are not ids)."""
    if raw is None:
        return [], []
    items = [raw] if isinstance(raw, str) else list(raw)
    ids, bad = [], []
    for item in items:
        for piece in re.split(r"[;,]", str(item)):
            piece = piece.strip()
            if not piece:
                continue
            m = _EVIDENCE.fullmatch(piece)
            if m:
                ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
            else:
                bad.append(piece)
    return list(dict.fromkeys(ids)), bad


def parse_session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` to a naive datetime (taken as UTC downstream)."""
    return datetime.strptime(" ".join(text.split()).upper(), "%I:%M %p ON %d %B, %Y")


def _sessions(conversation: dict):
    keys = [k for k in conversation if re.fullmatch(r"session_\d+", k)]
    for key in sorted(keys, key=lambda k: int(k.split("_")[1])):
        turns = conversation[key]
        if isinstance(turns, list) and turns:
            yield int(key.split("_")[1]), conversation.get(f"{key}_date_time"), turns


def read_locomo(path: str | Path, name: str = "locomo") -> Dataset:
    path = Path(path)
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError([(str(path), exc.lineno, None, f"not valid JSON: {exc.msg}")]) from None
    if not isinstance(samples, list):
        raise DatasetError(
            [(str(path), None, None, "expected a list of samples (locomo10.json layout)")]
        )
    events, queries, qrels = [], [], []
    unresolved, no_evidence = [], 0
    for sample in samples:
        conv_id = sample["sample_id"]
        conv = sample["conversation"]
        turn_ids = set()
        for n, when, turns in _sessions(conv):
            try:
                created = parse_session_time(when).isoformat() if when else None
            except ValueError:
                raise DatasetError(
                    [
                        (
                            str(path),
                            None,
                            f"{conv_id}.session_{n}_date_time",
                            f"expected a time like '1:56 pm on 8 May, 2023', got {when!r}",
                        )
                    ]
                ) from None
            for turn in turns:
                dia = normalize_evidence(turn["dia_id"])[0][0]
                turn_ids.add(dia)
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [image: {turn['blip_caption']}]"
                events.append(
                    {
                        "event_id": f"{conv_id}/{dia}",
                        "floor_id": conv_id,
                        "block_id": f"{conv_id}/session_{n}",
                        "block_type": "feed",
                        "user_id": turn["speaker"],
                        "text": text,
                        "created_at": created,
                        "tags": [],
                        "dia_id": dia,
                        "session": n,
                    }
                )
        for i, qa in enumerate(sample["qa"]):
            qid = f"{conv_id}/q{i}"
            ids, bad = normalize_evidence(qa.get("evidence"))
            if not ids and not bad:
                no_evidence += 1
            unresolved += [(qid, b) for b in bad]
            for dia in ids:
                if dia in turn_ids:
                    qrels.append({"query_id": qid, "event_id": f"{conv_id}/{dia}", "relevance": 1})
                else:
                    unresolved.append((qid, dia))
            extra = (
                {"adversarial_answer": qa["adversarial_answer"]}
                if "adversarial_answer" in qa
                else {}
            )
            queries.append(
                {
                    "query_id": qid,
                    "text": qa["question"],
                    "floor_ids": [conv_id],
                    "category": CATEGORIES.get(qa.get("category"), str(qa.get("category"))),
                    "answer": qa.get("answer"),
                    "evidence": ids,
                    **extra,
                }
            )
    info = {
        "source": "snap-research/LoCoMo (ACL 2024)",
        "license": "CC BY-NC 4.0",
        "file": str(path),
        "evidence_unresolved": len(unresolved),
        "unresolved": [f"{q}: {e!r}" for q, e in unresolved],
        "questions_without_evidence": no_evidence,
    }
    return Dataset(
        name=name,
        events=events_frame(events, str(path)),
        queries=queries_frame(queries, str(path)),
        qrels=qrels_frame(qrels, str(path)),
        info=info,
    )
