"""The int8 MiniLM graph run by numpy, the same on every x86-64 CPU (a measured candidate
for one ledger on every CPU; not what memkit serves).

ONNX Runtime picks its float kernels (layer norm, softmax, GELU's erf, the float matrix
products) by CPU, so the float parts of the int8 graph differ in their last bits between
an AVX2 machine and an AVX-512 one, and the graph's 8-bit rounding of activations
(``DynamicQuantizeLinear``) turns such a difference into a whole step now and then:
three machines gave three ledgers for the int8 rows (eval/RESULTS.md).

Here every float operation runs in float64, and the integer products are exact (int8
times uint8 summed over at most 1,536 terms is below 2**53, so numpy's float64 matrix
product gives the exact integer whatever its order of summation). What can still vary
between CPUs is the last bit of a float64 sum or exponential (about 1e-16 of the value),
and that changes a quantized activation only if the value lies that close to a rounding
boundary.

    from memkit.onnx_numpy import NumpyGraph
    graph = NumpyGraph("minilm-v3-int8w7.onnx")
    hidden = graph.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper
from scipy.special import erf

_FLOAT = np.float64  # what every float tensor is computed in


def _float(x: np.ndarray) -> np.ndarray:
    return x.astype(_FLOAT) if x.dtype.kind == "f" else x


def _dynamic_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``DynamicQuantizeLinear``: uint8 values, their scale and zero point (ONNX's rules:
    the range always holds 0, rounding is half to even)."""
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero = np.clip(np.rint(-lo / scale), 0, 255)
    q = np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.uint8)
    return q, np.array(scale, _FLOAT), np.array(zero, np.uint8)


def _matmul_integer(a, b, a_zero=None, b_zero=None) -> np.ndarray:
    """``MatMulInteger``, exact (see ``_integer_product``)."""
    return _integer_product(a, a_zero, _shifted(b, b_zero))


def _shifted(b: np.ndarray, zero) -> list[np.ndarray]:
    """An integer weight less its zero point, cut along its rows into float32 blocks whose
    products with uint8 activations (less theirs: at most 255 either way) sum exactly in
    float32: every partial sum is an integer below 2**24, whatever the order of summation."""
    b = b.astype(np.int64) - (0 if zero is None else np.asarray(zero).astype(np.int64))
    rows = max(1, (1 << 24) // (255 * max(1, int(np.abs(b).max()))))
    return [b[i : i + rows].astype(np.float32) for i in range(0, b.shape[0], rows)]


def _integer_product(a: np.ndarray, a_zero, blocks: list[np.ndarray]) -> np.ndarray:
    """``a`` (less its zero point) times a weight cut by ``_shifted``: one exact float32
    product per block, the blocks' integer sums added in int64."""
    a = a.astype(np.float32) - np.float32(0 if a_zero is None else int(a_zero))
    flat, out, start = a.reshape(-1, a.shape[-1]), 0, 0
    for block in blocks:
        out = out + (flat[:, start : start + len(block)] @ block).astype(np.int64)
        start += len(block)
    return out.reshape(*a.shape[:-1], blocks[0].shape[-1])


def _layer_norm(x, scale, bias, axis=-1, epsilon=1e-5, **_) -> np.ndarray:
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * scale + bias


def _softmax(x, axis=-1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _slice(x, starts, ends, axes=None, steps=None) -> np.ndarray:
    index = [slice(None)] * x.ndim
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a)] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _reshape(x, shape, allowzero=0) -> np.ndarray:
    shape = [x.shape[i] if d == 0 and not allowzero else int(d) for i, d in enumerate(shape)]
    return x.reshape(shape)


def _unsqueeze(x, axes) -> np.ndarray:
    for a in sorted(int(a) % (x.ndim + len(axes)) for a in axes):
        x = np.expand_dims(x, a)
    return x


_TYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}

OPS: dict[str, Callable[..., Any]] = {
    "Add": np.add,
    "Mul": np.multiply,
    "Div": lambda a, b: a / b if a.dtype.kind == "f" or b.dtype.kind == "f" else a // b,
    "Erf": erf,
    "MatMul": np.matmul,
    "MatMulInteger": _matmul_integer,
    "DynamicQuantizeLinear": _dynamic_quantize,
    "LayerNormalization": _layer_norm,
    "Softmax": _softmax,
    "Gather": lambda x, i, axis=0: np.take(x, i, axis=axis),
    "Shape": lambda x: np.array(x.shape, np.int64),
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "Transpose": lambda x, perm: np.transpose(x, perm),
    "Cast": lambda x, to: _float(x.astype(_TYPES[to])),
    "Where": np.where,
    "IsNaN": np.isnan,
    "Range": lambda start, limit, delta: np.arange(start, limit, delta),
    "ConstantOfShape": lambda shape, value: np.full(
        [int(d) for d in shape], _float(value)[0], _float(value).dtype
    ),
    "And": np.logical_and,
    "Equal": np.equal,
    "GreaterOrEqual": np.greater_equal,
    "Flatten": lambda x, axis=1: x.reshape(int(np.prod(x.shape[:axis])), -1),
    "Slice": _slice,
    "Expand": lambda x, shape: x * np.ones([int(d) for d in shape], x.dtype),
}


class NumpyGraph:
    """An ONNX graph of the operators above, run node by node in numpy."""

    def __init__(self, path: str | Path):
        model = onnx.load(str(path))
        graph = model.graph
        self.values = {i.name: _float(numpy_helper.to_array(i)) for i in graph.initializer}
        self.nodes = []
        for node in graph.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "Constant":
                self.values[node.output[0]] = _float(numpy_helper.to_array(attrs["value"]))
                continue
            if node.op_type not in OPS:
                raise ValueError(f"{path}: operator {node.op_type} is not supported here")
            if "value" in attrs:  # ConstantOfShape's fill value
                attrs["value"] = numpy_helper.to_array(attrs["value"])
            fn, inputs = OPS[node.op_type], list(node.input)
            if node.op_type == "MatMulInteger" and inputs[1] in self.values:
                # a stored weight: shifted by its zero point once, not at every run
                weight = _shifted(self.values[inputs[1]], self.values.get(inputs[3]))
                fn, inputs = (
                    (lambda a, a_zero=None, w=weight: _integer_product(a, a_zero, w)),
                    [
                        inputs[0],
                        inputs[2],
                    ],
                )
            self.nodes.append((fn, inputs, list(node.output), attrs))
        self.output = graph.output[0].name
        # Nodes that read only shapes (a Shape, and what is computed from shapes and
        # constants alone): in this graph every tensor's shape follows from the inputs',
        # so they are run once for each shape of the inputs and their values kept.
        static = set(self.values)
        self.kept: list[str] = []
        self.data_nodes = []
        for op, node in zip((n.op_type for n in graph.node if n.op_type != "Constant"), self.nodes):
            if op == "Shape" or all(not i or i in static for i in node[1]):
                static.update(node[2])
                self.kept += node[2]
            else:
                self.data_nodes.append(node)
        self._by_shape: dict[tuple, dict[str, np.ndarray]] = {}

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        key = tuple(sorted((name, value.shape) for name, value in feed.items()))
        kept = self._by_shape.get(key)
        if kept is None:  # the first run of this shape: every node
            values = _run(self.nodes, {**self.values, **feed})
            self._by_shape[key] = {name: values[name] for name in self.kept}
            return values[self.output]
        return _run(self.data_nodes, {**self.values, **kept, **feed})[self.output]


def _run(nodes: list, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for fn, inputs, outputs, attrs in nodes:
        args = [values[i] if i else None for i in inputs]
        while args and args[-1] is None:
            args.pop()
        out = fn(*args, **attrs)
        for name, value in zip(outputs, out if len(outputs) > 1 else (out,)):
            values[name] = value
    return values
