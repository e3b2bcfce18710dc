// Runs an ONNX model in ONNX Runtime (all graph optimisations) on raw float32 input files (any number of samples) and
// writes its first output as raw float32, to compare kiln with ORT on the same QDQ file
// (tests/quantize/compare_ort.py drives it; not part of `make test`: ORT is a peer, installed by
// shared/peers/install-peers.sh).
// usage: NODE_PATH=.../node_modules node ort_run.js MODEL.onnx IN.f32 OUT.f32 [IN.f32 OUT.f32 ...]
const fs = require('fs');
const ort = require('onnxruntime-node');
(async () => {
  const [model, ...files] = process.argv.slice(2);
  const s = await ort.InferenceSession.create(model, { intraOpNumThreads: 2, interOpNumThreads: 1,
                                                        graphOptimizationLevel: 'all' });
  const declared = s.inputMetadata[0].shape;
  for (let i = 0; i + 1 < files.length; i += 2) {
    const bytes = fs.readFileSync(files[i]);
    // The leading dim (a batch, symbolic or not) is whatever the file's size makes it.
    const sample = declared.slice(1).reduce((a, b) => a * b, 1);
    const shape = [bytes.length / 4 / sample, ...declared.slice(1)];
    const x = new ort.Tensor('float32', new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), shape);
    const out = await s.run({ [s.inputNames[0]]: x });
    const y = out[s.outputNames[0]].data;
    fs.writeFileSync(files[i + 1], Buffer.from(y.buffer, y.byteOffset, y.byteLength));
  }
})().catch((e) => { console.error(e.message); process.exit(1); });
