"""The served int8 graph with its float parts in double, for ONNX Runtime: the same vectors on
every x86-64 CPU measured (a candidate for one ledger on every CPU; not what memkit serves).

ONNX Runtime picks its float32 kernels by CPU (MLAS: layer norm, softmax, erf, matrix
products), and the int8 graph's 8-bit rounding of activations (``DynamicQuantizeLinear``)
turns their last-bit differences into whole steps now and then, so each CPU family gives
its own vectors and its own ledger (eval/RESULTS.md). Its double kernels
are not chosen by CPU. Here every float tensor of the graph is double: the weights and
constants, each ``Cast`` to float; a ``DynamicQuantizeLinear`` gets its input rounded to
float32 (a correctly rounded, CPU-independent step) and gives its scale back as double;
``Erf``, which has no double kernel, is Abramowitz and Stegun's 7.1.26 (error below
1.5e-7) made of double operations. The integer products (``MatMulInteger``) were exact
already. Graph optimizations must be off: ONNX Runtime's fusions (``MatMulIntegerToFloat``)
take float32 only.

    make_double(Path("minilm-v3-int8w7.onnx"), Path("minilm-v3-int8w7-f64.onnx"))
    session = double_session("minilm-v3-int8w7-f64.onnx")
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# erf(x) = sign(x) (1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-x^2)), t = 1/(1 + p|x|)
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _double(tensor: onnx.TensorProto) -> onnx.TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name)


def _erf(node: onnx.NodeProto, constant) -> list[onnx.NodeProto]:
    """``node`` (an Erf) as double operations."""
    x, p = node.input[0], node.name or node.output[0]

    def op(kind: str, inputs: list[str], out: str) -> onnx.NodeProto:
        return helper.make_node(kind, inputs, [f"{p}/{out}"])

    nodes = [
        op("Abs", [x], "abs"),
        op("Sign", [x], "sign"),
        op("Mul", [f"{p}/abs", constant(_P)], "px"),
        op("Add", [f"{p}/px", constant(1.0)], "den"),
        op("Div", [constant(1.0), f"{p}/den"], "t"),
    ]
    poly = constant(_A[-1])  # Horner: ((a5 t + a4) t + a3) t ...
    for i, a in enumerate(reversed(_A[:-1])):
        nodes += [
            op("Mul", [poly, f"{p}/t"], f"m{i}"),
            op("Add", [f"{p}/m{i}", constant(a)], f"h{i}"),
        ]
        poly = f"{p}/h{i}"
    return nodes + [
        op("Mul", [poly, f"{p}/t"], "poly"),
        op("Mul", [x, x], "x2"),
        op("Neg", [f"{p}/x2"], "-x2"),
        op("Exp", [f"{p}/-x2"], "exp"),
        op("Mul", [f"{p}/poly", f"{p}/exp"], "tail"),
        op("Sub", [constant(1.0), f"{p}/tail"], "erf|x|"),
        helper.make_node("Mul", [f"{p}/erf|x|", f"{p}/sign"], [node.output[0]]),
    ]


def make_double(source: Path, target: Path) -> Path:
    """Write ``source`` (an int8 graph) to ``target`` with its float parts in double."""
    model = onnx.load(str(source))
    graph = model.graph
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(_double(init))
    constants: dict[float, str] = {}

    def constant(value: float) -> str:
        if value not in constants:
            name = constants[value] = f"double_constant_{len(constants)}"
            graph.initializer.append(numpy_helper.from_array(np.array(value, np.float64), name))
        return constants[value]

    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.name == "value" and attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(_double(attr.t))  # a Constant's or ConstantOfShape's value
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
        if node.op_type == "Erf":
            nodes += _erf(node, constant)
        elif node.op_type == "DynamicQuantizeLinear":
            x, scale = node.input[0], node.output[1]
            node.input[0], node.output[1] = f"{x}/float32", f"{scale}/float32"
            nodes += [
                helper.make_node("Cast", [x], [f"{x}/float32"], to=TensorProto.FLOAT),
                node,
                helper.make_node("Cast", [f"{scale}/float32"], [scale], to=TensorProto.DOUBLE),
            ]
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    for out in graph.output:
        out.type.tensor_type.elem_type = TensorProto.DOUBLE
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return target


def double_session(path: str | Path, threads: int = 1):
    """An ONNX Runtime session that runs the double graph as written (no fusions)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
