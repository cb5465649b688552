// Runs an ONNX file with onnxruntime-node (npm, pinned by package-lock.json): the independent
// runtime of tests/e2e/export_onnx_test.cc. Reads float32 images [N, H, W, C] (little-endian,
// row-major) from IMAGES, feeds them to the model's input and prints
// {"input": ..., "output": ..., "probabilities": [[...], ...], "outputs": {NAME: [[...], ...]}} as
// JSON on stdout: "probabilities" is the first output; "outputs" has every output by name (a
// copy made by add_logits_output.py also has the logits).
//   node run_onnx.js MODEL.onnx IMAGES.f32 N H W C
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, images, n, h, w, c] = process.argv.slice(2);
  const dims = [n, h, w, c].map(Number);
  const bytes = fs.readFileSync(images);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  if (data.length !== dims.reduce((a, b) => a * b, 1)) throw new Error(`${images}: ${data.length} floats, expected ${dims}`);
  const session = await ort.InferenceSession.create(model);
  const feeds = {};
  feeds[session.inputNames[0]] = new ort.Tensor('float32', data, dims);
  const results = await session.run(feeds);
  const rows = (out) => {
    const k = out.dims[1];
    const r = [];
    for (let i = 0; i < out.dims[0]; ++i) r.push(Array.from(out.data.slice(i * k, (i + 1) * k)));
    return r;
  };
  const outputs = {};
  for (const name of session.outputNames) outputs[name] = rows(results[name]);
  const first = results[session.outputNames[0]];
  process.stdout.write(JSON.stringify({
    input: session.inputNames[0], output: session.outputNames[0], dims: first.dims,
    probabilities: outputs[session.outputNames[0]], outputs,
  }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run_onnx.js: ${e.message}\n`);
  process.exit(1);
});
