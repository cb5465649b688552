// Runs an ONNX file with onnxruntime-node (npm, pinned by package-lock.json): the independent
// runtime of tests/e2e/export_onnx_test.cc. Reads float32 images [N, H, W, C] (little-endian,
// row-major) from IMAGES, feeds them to the model's input and prints
// {"input": {...}, "output": {...}, "probabilities": [[...], ...]} as JSON on stdout.
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
  const out = results[session.outputNames[0]];
  const k = out.dims[1];
  const probabilities = [];
  for (let r = 0; r < out.dims[0]; ++r) probabilities.push(Array.from(out.data.slice(r * k, (r + 1) * k)));
  process.stdout.write(JSON.stringify({
    input: session.inputNames[0], output: session.outputNames[0], dims: out.dims, probabilities,
  }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run_onnx.js: ${e.message}\n`);
  process.exit(1);
});
