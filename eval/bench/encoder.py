"""Encoder benchmark: plain sentence-transformers against the ONNX Runtime encoders, on
the same texts, side by side in one run.

    .venv/bin/python eval/bench/encoder.py [--n 2000]
                                           [--locomo ../shared/datasets/locomo/locomo-dev.json]

Texts: ``--n`` generated posts (memkit.synthetic: chat lines to blog entries) and, if the
LoCoMo file is there, as many LoCoMo turns. Each encoder encodes every text once after a
warm-up (no cache); the table gives texts/s, the speed-up over plain sentence-transformers
and the cosine of each vector to the plain model's vector of the same text (minimum and
mean over all texts).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from memkit.encoders import MiniLMEncoder, OnnxMiniLMEncoder
from memkit.synthetic import generate_events


def texts_for(n: int, locomo: str | None) -> list[str]:
    texts = generate_events(n, seed=5)["text"].to_list()
    if locomo and Path(locomo).exists():
        turns = [
            t["text"]
            for conv in json.loads(Path(locomo).read_text())
            for key, session in conv["conversation"].items()
            if isinstance(session, list)
            for t in session
        ]
        texts += turns[:n]
    return texts


def timed(enc, texts: list[str]) -> tuple[np.ndarray, float]:
    enc.encode(texts[:16])  # warm-up: load the model, first allocations
    t = time.perf_counter()
    vecs = enc.encode(texts)
    return vecs, time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument(
        "--locomo",
        default=str(Path(__file__).resolve().parents[3] / "shared/datasets/locomo/locomo-dev.json"),
    )
    args = ap.parse_args(argv)
    texts = texts_for(args.n, args.locomo)
    print(f"{len(texts)} texts, mean {np.mean([len(t) for t in texts]):.0f} characters")
    ref, ref_s = timed(
        MiniLMEncoder(batch_size=32), texts
    )  # sentence-transformers' own default batch
    rows = [("sentence-transformers (plain, batch 32)", ref_s, ref)]
    for label, enc in [
        ("sentence-transformers (batch 64, memkit's setting)", MiniLMEncoder(batch_size=64)),
        (
            "ONNX Runtime fp32, fused graph, length-sorted (minilm-onnx)",
            OnnxMiniLMEncoder(quantize=False),
        ),
        (
            "ONNX Runtime int8 weights, length-sorted (minilm-int8)",
            OnnxMiniLMEncoder(quantize=True),
        ),
    ]:
        vecs, took = timed(enc, texts)
        rows.append((label, took, vecs))
    print("\n| encoder | texts/s | speed-up | min cosine | mean cosine |")
    print("|---|---:|---:|---:|---:|")
    for label, took, vecs in rows:
        cos = (vecs * ref).sum(axis=1)
        print(
            f"| {label} | {len(texts) / took:.0f} | {ref_s / took:.2f}x | {cos.min():.4f} | "
            f"{cos.mean():.4f} |"
        )


if __name__ == "__main__":
    main()
