"""Checks ONNX files with Debian's python3-onnx: the full checker (onnx.checker.check_model,
full_check: types and shapes inferred through every node) and the opset and input the export
documents. Run as /usr/bin/python3 check_onnx.py FILE... ; prints one line per file, exits 1
on the first failure. The oracle of tests/e2e/export_onnx_test.cc."""
import sys

import onnx

for path in sys.argv[1:]:
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    graph = model.graph
    dims = [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    ops = sorted({n.op_type for n in graph.node})
    print(f"{path}: ok opset {opset} input {graph.input[0].name} {dims} output {graph.output[0].name} ops {' '.join(ops)}")
