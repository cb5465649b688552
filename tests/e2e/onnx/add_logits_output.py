"""Writes a copy of an exported ONNX file whose graph also outputs the logits: the input of the
final Softmax, as a second output named after that tensor. onnxruntime then reports the values
before the softmax, where a small error in a confident model still shows (after it, it is lost
in probabilities near 0 and 1). Run as /usr/bin/python3 add_logits_output.py IN.onnx OUT.onnx;
prints the logits' tensor name. Part of the oracle of tests/e2e/export_onnx_test.cc."""
import sys

import onnx

src, dst = sys.argv[1], sys.argv[2]
model = onnx.load(src)
graph = model.graph
# The Softmax that makes the output, through the Identity a model ending in softmax gets.
made_by = {out: n for n in graph.node for out in n.output}
final = made_by.get(graph.output[0].name)
while final is not None and final.op_type == "Identity":
    final = made_by.get(final.input[0])
if final is None or final.op_type != "Softmax":
    sys.exit(f"{src}: the output {graph.output[0].name} is not made by a Softmax node")
logits = final.input[0]
# The logits have the probabilities' type and shape ([N, classes]): a Softmax keeps them.
output = onnx.ValueInfoProto()
output.CopyFrom(graph.output[0])
output.name = logits
graph.output.append(output)
onnx.checker.check_model(model, full_check=True)
onnx.save(model, dst)
print(logits)
