"""The meaning model's weights as an ONNX graph, run by ONNX Runtime (issue 44).

The same all-MiniLM-L6-v2 weights as `agents.semantic.Encoder` reads, wired into an ONNX
graph here, in this process, with `onnx.helper` (no export tool, no torch, no download), then
then its matrix weights quantized to int8 per output channel (dynamic quantization: the
activations are quantized per call) and run on one intra-op thread. About 1 ms of CPU a text,
against 4 ms for the same graph in fp32 and 8-12 ms for the numpy encoder; the held-out table
of `loop_eval` is the same as fp32's at every threshold from 0.45 to 0.70 (docs/BENCHMARKS.md,
"Meaning models").

Building and quantizing take about 3 s of CPU. With a folder to keep it in (the data dir,
set by the app), the int8 model is written there once (23 MB) and later processes load it in
a fraction of a second.

Pure Python like `agents.semantic` (no Django).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Any

# LayerNormalization is an operator from opset 17 on.
OPSET = 17
# Bumped whenever build_graph or the quantization changes: names the kept model file.
GRAPH_VERSION = 1


def build_graph(root: Path) -> bytes:
    """The serialized ONNX model of the BERT encoder under `root` (config.json and
    model.safetensors): token ids [n] in, the mean of the last layer's vectors [384] out.

    One text at a time, no batch and no padding mask: a decision embeds the texts it has
    not seen, usually one.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = json.loads((root / "config.json").read_text())
    layers = int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    size = hidden // heads
    eps = float(config["layer_norm_eps"])
    weights = load_file(str(root / "model.safetensors"))
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def weight(name: str, *, transpose: bool = False) -> str:
        # Linear layers are stored [out, in]; MatMul wants [in, out].
        t = weights[name]
        return const(name, np.ascontiguousarray(t.T if transpose else t))

    def norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization",
                    [x, weight(prefix + ".weight"), weight(prefix + ".bias")], out,
                    axis=-1, epsilon=eps)  # fmt: skip

    def dense(x: str, prefix: str, out: str) -> str:
        product = node("MatMul", [x, weight(prefix + ".weight", transpose=True)], out + "/mm")
        return node("Add", [product, weight(prefix + ".bias")], out)

    split_heads = const("split_heads", np.array([-1, heads, size], dtype=np.int64))
    join_heads = const("join_heads", np.array([-1, hidden], dtype=np.int64))
    scale = const("scale", np.array(1 / math.sqrt(size), dtype=np.float32))
    half, one = const("half", np.float32(0.5)), const("one", np.float32(1.0))
    root2 = const("root2", np.float32(math.sqrt(2.0)))

    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "ids"], "words")
    places = node("Gather", [weight("embeddings.position_embeddings.weight"), "positions"],
                  "places")  # fmt: skip
    kind = const("kind", weights["embeddings.token_type_embeddings.weight"][0])
    x = node("Add", [node("Add", [words, places], "emb/wp"), kind], "emb/sum")
    x = norm(x, "embeddings.LayerNorm", "emb")
    for i in range(layers):
        p = f"encoder.layer.{i}."

        def heads_of(part: str, perm: list[int], p: str = p, i: int = i, x: str = x) -> str:
            flat = dense(x, f"{p}attention.self.{part}", f"l{i}/{part}")
            split = node("Reshape", [flat, split_heads], f"l{i}/{part}/split")
            return node("Transpose", [split], f"l{i}/{part}/t", perm=perm)

        q = heads_of("query", [1, 0, 2])  # [heads, n, size]
        k = heads_of("key", [1, 2, 0])  # [heads, size, n]
        v = heads_of("value", [1, 0, 2])
        scores = node("Mul", [node("MatMul", [q, k], f"l{i}/qk"), scale], f"l{i}/scores")
        att = node("Softmax", [scores], f"l{i}/att", axis=-1)
        ctx = node("Transpose", [node("MatMul", [att, v], f"l{i}/ctx3")], f"l{i}/ctx_t",
                   perm=[1, 0, 2])  # fmt: skip
        ctx = node("Reshape", [ctx, join_heads], f"l{i}/ctx")
        out = dense(ctx, p + "attention.output.dense", f"l{i}/att_out")
        x = norm(node("Add", [x, out], f"l{i}/res1"), p + "attention.output.LayerNorm", f"l{i}/n1")
        h = dense(x, p + "intermediate.dense", f"l{i}/inter")
        # GELU as BERT computes it (with erf): ONNX Runtime fuses the five nodes into one.
        erf = node("Erf", [node("Div", [h, root2], f"l{i}/g/div")], f"l{i}/g/erf")
        gate = node("Mul", [node("Add", [erf, one], f"l{i}/g/add"), half], f"l{i}/g/half")
        h = node("Mul", [h, gate], f"l{i}/gelu")
        out = dense(h, p + "output.dense", f"l{i}/out")
        x = norm(node("Add", [x, out], f"l{i}/res2"), p + "output.LayerNorm", f"l{i}/n2")
    node("ReduceMean", [x], "pooled", axes=[0], keepdims=0)
    graph = helper.make_graph(
        nodes,
        "minilm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"]),
         helper.make_tensor_value_info("positions", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [hidden])],
        initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # read by every ONNX Runtime since 1.10
    return bytes(model.SerializeToString())


def quantize_int8(model: bytes) -> bytes:
    """`model` with its MatMul weights as int8, one scale per output channel (per tensor, the
    vectors moved more: cosine 0.957 to the fp32 ones at worst, against 0.992)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = _Quiet()
    # quantize_dynamic advises pre-processing on the root logger; the graph needs none.
    logging.getLogger().addFilter(quiet)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source, target = Path(tmp, "fp32.onnx"), Path(tmp, "int8.onnx")
            source.write_bytes(model)
            quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True)
            return target.read_bytes()
    finally:
        logging.getLogger().removeFilter(quiet)


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def int8_model(root: Path, keep_in: Path | None = None) -> bytes:
    """The quantized model of the weights under `root`: read from `keep_in` when an earlier
    process wrote it there, else built (and written there, atomically, when given)."""
    if keep_in is None:
        return quantize_int8(build_graph(root))
    import onnxruntime

    weights = root / "model.safetensors"
    stamp = f"{GRAPH_VERSION}:{weights.stat().st_size}:{weights.stat().st_mtime_ns}:"
    stamp += onnxruntime.__version__
    kept = keep_in / f"minilm-int8-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}.onnx"
    if kept.exists():
        return kept.read_bytes()
    model = quantize_int8(build_graph(root))
    try:
        keep_in.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=keep_in, suffix=".partial")
        with os.fdopen(fd, "wb") as out:
            out.write(model)
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide it from another user's workers
        os.replace(partial, kept)
    except OSError:
        pass  # a read-only data dir: the next process builds it again
    return model


class OnnxEncoder:
    """Unit vectors of texts from the ONNX graph, on one thread, as `Encoder.encode` gives."""

    def __init__(self, root: Path, model: bytes, max_tokens: int):
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.np = np
        options = ort.SessionOptions()
        # One thread: a call's few tokens gain nothing from more, and the web workers share
        # the cores (the numpy encoder's BLAS threads made an encode 6x slower on a busy
        # machine). The sequential mode starts no inter-op pool either.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_tokens)

    def encode(self, text: str) -> Any:
        """The text's unit vector, float32 (numpy)."""
        np = self.np
        ids = np.array(self.tokenizer.encode(text).ids, dtype=np.int64)
        positions = np.arange(len(ids), dtype=np.int64)
        (pooled,) = self.session.run(None, {"ids": ids, "positions": positions})
        length = float(np.linalg.norm(pooled))
        return pooled / length if length else pooled
