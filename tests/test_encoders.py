import numpy as np
import pytest

from memkit.models.encoders import CachedEncoder, EmbeddingCache, MiniLMEncoder, get_encoder


def test_minilm_vectors_are_normalised_and_meaningful():
    enc = MiniLMEncoder()
    v = enc.encode(
        ["I adopted a kitten", "We got a new cat from the shelter", "Quarterly tax filing deadline"]
    )
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert enc.encode([]).shape == (0, 384)


def test_second_run_encodes_nothing(tmp_path):
    texts = ["alpha beta", "gamma delta", "alpha beta", "epsilon"]
    first = CachedEncoder(MiniLMEncoder(), tmp_path / "cache.sqlite")
    a = first.encode(texts)
    assert first.encoded == 3  # the repeated text is encoded once
    second = CachedEncoder(
        MiniLMEncoder(), tmp_path / "cache.sqlite"
    )  # a new process, same cache file
    b = second.encode(texts)
    assert second.encoded == 0
    assert np.array_equal(a, b)
    assert np.allclose(a, MiniLMEncoder().encode(texts), atol=1e-6)
    second.encode(texts + ["zeta"])
    assert second.encoded == 1


def test_cache_is_keyed_by_model_and_text(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    assert EmbeddingCache.key("m1", "x") != EmbeddingCache.key("m2", "x")
    assert EmbeddingCache.key("m1", "x") != EmbeddingCache.key("m1", "x ")
    cache.put_many({EmbeddingCache.key("m1", "x"): np.ones(4, np.float32)})
    assert len(cache) == 1
    assert cache.get_many([EmbeddingCache.key("m2", "x")], 4) == {}


def test_shared_encoder_is_cached_in_the_configured_folder():
    enc = get_encoder("minilm")
    assert isinstance(enc, CachedEncoder) and enc.name == "all-MiniLM-L6-v2" and enc.dim == 384


def test_queries_are_remembered_in_memory_not_written_to_disk(tmp_path):
    enc = CachedEncoder(MiniLMEncoder(), tmp_path / "cache.sqlite", memory=2)
    q = enc.encode(["where did Ann go hiking?"])
    assert enc.encoded == 1 and len(enc.cache) == 0  # a query: no disk write
    assert (
        np.array_equal(enc.encode(["where did Ann go hiking?"]), q) and enc.encoded == 1
    )  # from memory
    (
        enc.encode(["first other"]),
        enc.encode(["second other"]),
    )  # the LRU holds two: the query falls out
    enc.encode(["where did Ann go hiking?"])
    assert enc.encoded == 4
    docs = enc.encode(["doc one", "doc two", "doc three"])  # documents go to disk
    assert len(enc.cache) == 3 and np.allclose(
        docs, MiniLMEncoder().encode(["doc one", "doc two", "doc three"]), atol=1e-6
    )


class CountingCache(EmbeddingCache):
    """The SQLite cache, counting the vectors read back from disk."""

    read = 0

    def get_many(self, keys, dim, within=None):
        found = super().get_many(keys, dim, within)
        self.read += len(found)
        return found


def test_a_process_that_remembers_vectors_reads_a_bulk_call_from_disk_once(tmp_path):
    """The eval fits a dozen configs on one data set's posts: with ``remember_vectors`` a
    bulk call's vectors stay in memory, where the service's default (4,096) lets a call
    larger than that go back to disk each time."""
    from memkit.models import encoders

    docs = ["doc one", "doc two", "doc three"]
    cache = CountingCache(tmp_path / "cache.sqlite")
    small = CachedEncoder(MiniLMEncoder(), cache, memory=2)
    first = small.encode(docs, store=True)
    small.encode(docs, store=True)
    assert cache.read == 3  # larger than its memory: read back from disk
    shared = get_encoder("minilm")
    before = shared.memory
    try:
        encoders.remember_vectors(10)
        assert shared.memory == 10 and get_encoder("minilm").memory == 10
        big = CachedEncoder(MiniLMEncoder(), cache, memory=shared.memory)
        big.encode(docs, store=True)  # from disk once
        again = big.encode(docs, store=True)
        assert cache.read == 6 and np.array_equal(again, first) and big.encoded == 0
    finally:
        encoders.remember_vectors(before)


TEXTS = [
    "ok",
    "I adopted a kitten from the shelter yesterday!",
    "Ünïcödé café ✓ 東京で会いましょう",
    "",
    "We spent the weekend on our kitchen renovation and it was a disaster. "
    * 30,  # > 256 word pieces
    "Quarterly tax filing deadline",
    "lol same",
]


@pytest.fixture(scope="module")
def onnx_folder():
    """The folder the served encoder (``minilm-int8``) exports into: memkit's cache, a
    temporary folder of this test session (conftest), so the export these tests read is
    the one the session made, made once, not a second one of its own."""
    from memkit.models.encoders import default_cache_dir

    return default_cache_dir() / "onnx"


@pytest.mark.heavy  # an ONNX export and quantization (10 s)
@pytest.mark.parametrize("quantize,floor", [(False, 0.99999), (True, 0.95)])
def test_onnx_encoder_matches_the_plain_model(onnx_folder, quantize, floor):
    from memkit.models.encoders import OnnxMiniLMEncoder

    enc = OnnxMiniLMEncoder(
        quantize=quantize, folder=onnx_folder, batch_size=3
    )  # several length-sorted batches
    got, want = enc.encode(TEXTS), MiniLMEncoder().encode(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * want).sum(axis=1)
    assert cos.min() >= floor, cos  # row i is text i's vector: the length sort is undone
    assert enc.encode([]).shape == (0, 384)
    # float32 computes the plain model's vectors, so it shares their cache entries; int8 does not
    assert (enc.name == MiniLMEncoder.name) is (not quantize)


def test_an_int8_vector_depends_on_its_text_alone(onnx_folder):
    """Dynamic int8 quantisation scales a layer's input by its largest value: in a batch
    that would be other texts' values too. Encoded alone or among others (longer and
    shorter), a text gets the same vector, as the embedding cache (keyed by text) needs."""
    from memkit.models.encoders import OnnxMiniLMEncoder

    enc = OnnxMiniLMEncoder(quantize=True, folder=onnx_folder)
    alone = np.concatenate([enc.encode([t]) for t in TEXTS])
    assert np.array_equal(enc.encode(TEXTS), alone)
    batched = OnnxMiniLMEncoder(quantize=True, folder=onnx_folder, batch_size=len(TEXTS)).encode(
        TEXTS
    )
    assert not np.allclose(batched, alone, atol=1e-3)  # what one text per run avoids


# Vectors this project's machines compute (first six numbers, and the sum of all 384) for
# the int8 encoder: stored so that a machine computing others fails here, before its
# `make eval` ledger differs from eval/RESULTS.md.
STORED_INT8 = {
    "Kim: moved the kiln firing to Saturday, the studio was booked on Friday": (
        [0.05531, 0.03438, 0.06212, -0.00058, 0.0416, 0.04031],
        0.12959,
    ),
    "Does anyone know a good place for pho near the station?": (
        [0.01019, 0.00802, 0.00677, 0.06761, -0.03613, 0.06565],
        0.21397,
    ),
    "The committee approved the new budget for the allotment society at the March meeting.": (
        [-0.02011, -0.01732, -0.08075, 0.03531, 0.07367, 0.03519],
        0.32282,
    ),
}


def test_int8_vectors_are_the_stored_ones_on_any_cpu(onnx_folder):
    """The int8 weights are 7-bit, so ONNX Runtime's 16-bit pair sums on CPUs without VNNI
    cannot saturate and every CPU computes the same products; and the vectors are the
    ones stored above."""
    import onnx
    from onnx import numpy_helper

    from memkit.models.encoders import OnnxMiniLMEncoder

    enc = OnnxMiniLMEncoder(quantize=True, folder=onnx_folder)
    graph = onnx.load(str(enc.model_file())).graph
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    products = [n for n in graph.node if n.op_type == "MatMulInteger"]
    assert len(products) == 36  # q, k, v, out, two feed-forward: 6 layers
    for node in products:
        w = weights[node.input[1]].astype(int)
        assert np.abs(w).max() <= 64, node.name  # 255 x 64 x 2 = 32,640 fits in 16 bits
    got = enc.encode(list(STORED_INT8))
    for row, (head, total) in zip(got, STORED_INT8.values()):
        assert np.allclose(row[:6], head, atol=1e-4) and abs(row.sum() - total) < 1e-3


def test_onnx_export_is_made_once(onnx_folder):
    from memkit.models.encoders import OnnxMiniLMEncoder

    for quantize in (False, True):
        path = OnnxMiniLMEncoder(quantize=quantize, folder=onnx_folder).model_file()
        stamp = path.stat().st_mtime_ns
        assert OnnxMiniLMEncoder(quantize=quantize, folder=onnx_folder).model_file() == path
        assert path.stat().st_mtime_ns == stamp
    assert get_encoder("minilm-int8").name == "all-MiniLM-L6-v2/onnx-int8-2"
    assert isinstance(get_encoder("minilm").encoder, MiniLMEncoder)
    assert isinstance(get_encoder("minilm-onnx").encoder, OnnxMiniLMEncoder)
    with pytest.raises(ValueError, match="minilm-int8"):
        get_encoder("bert")


def test_texts_differing_only_in_outer_whitespace_share_one_vector(tmp_path):
    enc = CachedEncoder(MiniLMEncoder(), tmp_path / "cache.sqlite")
    v = enc.encode(["\nBought a kayak.", "Bought a kayak.  ", "Bought a kayak."])
    assert enc.encoded == 1 and np.array_equal(v[0], v[1]) and np.array_equal(v[1], v[2])
    assert np.allclose(
        v[0], MiniLMEncoder().encode(["\nBought a kayak."])[0], atol=1e-6
    )  # the model agrees


@pytest.mark.parametrize("model", ["minilm", "minilm-int8"])
def test_a_posts_sentences_are_read_in_it_by_one_run_of_the_model(tmp_path, model):
    """encode_in_context: one run of the model per post gives the post's own vector (the
    one encode gives it, stored under its key) and its sentences' (read among the post's
    other words: near, not equal, to each sentence encoded alone); a second process finds
    them all on disk; a part not in its post is encoded on its own."""
    base = get_encoder(model, cache=False)
    post = "Mia: We drove to Zion in May. It took six hours. The canyon was stunning!"
    parts = ["We drove to Zion in May.", "It took six hours.", "The canyon was stunning!"]
    enc = CachedEncoder(base, tmp_path / "c.sqlite")
    [vecs] = enc.encode_in_context([post], [parts], store=True)
    assert vecs.shape == (3, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    alone = base.encode(parts)
    cos = (vecs * alone).sum(axis=1)
    assert (cos > 0.6).all() and (cos < 0.9999).all()  # the same sentences, read in their post
    trip = base.encode(["driving to a national park"])[0]
    assert (
        vecs[0] @ trip > vecs[1] @ trip and vecs[0] @ trip > vecs[2] @ trip
    )  # each sentence keeps its own sense
    again = CachedEncoder(
        base, tmp_path / "c.sqlite"
    )  # another process: the post's line too, no run
    [same] = again.encode_in_context([post], [parts])
    line = again.encode([post])
    assert again.encoded == 0 and np.array_equal(same, vecs)
    assert np.allclose(line[0], base.encode([post])[0], atol=1e-5)
    [odd] = again.encode_in_context([post], [["not in the post at all"]])
    assert again.encoded == 1 and np.allclose(
        odd[0], base.encode(["not in the post at all"])[0], atol=1e-5
    )


def test_run_each_keeps_its_threads_and_never_waits_on_its_own_pool():
    import threading

    from memkit.models import encoders

    seen: list[str] = []

    def inner(i):
        seen.append(threading.current_thread().name)

    def outer(i):  # a run that itself runs several: inline on the pool's thread, no deadlock
        encoders.run_each(inner, 3, 2)

    encoders.run_each(outer, 4, 2)
    assert len(seen) == 12 and all(n.startswith("memkit-run") for n in seen)
    for _ in range(5):
        encoders.run_each(inner, 6, 2)
    # the same two threads every call (a pool per call would have named new ones)
    assert len(set(seen)) <= 2 and len(seen) == 42


def test_a_forked_child_runs_on_pools_of_its_own():
    import os

    from memkit.models import encoders

    encoders.run_each(lambda i: None, 2, 2)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the parent's threads are not in the child: its work must still run
        import signal

        signal.alarm(10)  # hung: killed, a non-zero status
        out: list[int] = []
        encoders.run_each(out.append, 4, 2)
        os._exit(0 if sorted(out) == [0, 1, 2, 3] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
