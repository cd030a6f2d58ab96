"""How often the int8 encoder's matrix products would differ on a CPU without VNNI.

ONNX Runtime multiplies the uint8 activations by the int8 weights with VPMADDUBSW on
x86-64 CPUs without VNNI: each pair of neighbouring products is added in 16 bits and
saturates past 32,767, where VNNI CPUs (this machine, if ``avx512_vnni`` is in
/proc/cpuinfo) add in 32 bits. This script runs the int8 model on sample texts, takes the
quantised input of every ``MatMulInteger`` and counts the output sums that the 16-bit
pairs would change, for the 8-bit weights memkit used to ship and the 7-bit weights it
ships now (``memkit.encoders.quantize_int8``)::

    .venv/bin/python eval/int8_saturation.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

TEXTS = [
    "Kim: moved the kiln firing to Saturday, the studio was booked on Friday",
    "Omar: the boiler man comes on the 14th between eight and noon",
    "Does anyone know a good place for pho near the station?",
    "We walked from Grasmere to Patterdale and the weather held all day, which was lucky "
    "because the forecast said rain. The last descent was steep and my knees complained.",
    "Nina: thinking about getting a cat, or maybe a rabbit if the landlord says no",
    "The committee approved the new budget for the allotment society at the March meeting.",
]


def saturated(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``a @ w`` (uint8 by int8, int32 sums) with neighbouring products added in int16 first
    and clipped, as VPMADDUBSW does."""
    a = a.reshape(-1, a.shape[-1]).astype(np.int32)
    k = a.shape[1] - a.shape[1] % 2
    pairs = a[:, 0:k:2, None] * w[None, 0:k:2] + a[:, 1:k:2, None] * w[None, 1:k:2]
    out = np.clip(pairs, -32768, 32767).sum(axis=1)
    if k < a.shape[1]:
        out += a[:, -1:, None] * w[None, -1:]
    return out


def count(model: Path) -> tuple[int, int, int, int]:
    """(products, output sums, sums a non-VNNI CPU would change, largest weight) for
    ``model`` over ``TEXTS``."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    from memkit.encoders import OnnxMiniLMEncoder

    graph = onnx.load(str(model))
    weights = {i.name: numpy_helper.to_array(i) for i in graph.graph.initializer}
    products = [
        (n.input[0], weights[n.input[1]].astype(np.int32))
        for n in graph.graph.node
        if n.op_type == "MatMulInteger" and n.input[1] in weights
    ]
    for name in {a for a, _ in products}:
        graph.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    tokenizer = OnnxMiniLMEncoder(quantize=True)._session()[1]
    sums = changed = 0
    for text in TEXTS:
        ids = tokenizer.encode(text).ids
        feed = {
            "input_ids": np.array([ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
        }
        names = [a for a, _ in products]
        got = dict(zip(names, session.run(names, feed)))
        for a, w in products:
            x = got[a]
            exact = x.reshape(-1, x.shape[-1]).astype(np.int64) @ w.astype(np.int64)
            sums += exact.size
            changed += int((saturated(x, w) != exact).sum())
    largest = max(int(np.abs(w).max()) for _, w in products)
    return len(products), sums, changed, largest


def main() -> None:
    from memkit.encoders import OnnxMiniLMEncoder, quantize_int8

    seven = OnnxMiniLMEncoder(quantize=True).model_file()
    base = seven.with_name(seven.name.replace("-int8w7", ""))
    flags = Path("/proc/cpuinfo").read_text()
    vnni = "avx512_vnni" in flags or "avx_vnni" in flags
    print(f"this CPU has VNNI: {vnni} (without it, ONNX Runtime's products are the saturated ones)")
    with tempfile.TemporaryDirectory() as tmp:
        eight = Path(tmp) / "eight.onnx"
        quantize_int8(base, eight, seven_bits=False)
        print("| weights | products | output sums | sums changed without VNNI | largest weight |")
        print("|---|---:|---:|---:|---:|")
        for label, path in (("8-bit (before)", eight), ("7-bit (now)", seven)):
            n, sums, changed, largest = count(path)
            print(f"| {label} | {n} | {sums:,} | {changed:,} ({changed / sums:.2%}) | {largest} |")


if __name__ == "__main__":
    main()
