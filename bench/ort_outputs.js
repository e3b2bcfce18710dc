// ONNX Runtime CPU's outputs for a stack of inputs, one run per row: the reference the
// quantized-accuracy check (bench/quantized_accuracy.py) holds kiln's int8 outputs to.
// usage: node ort_outputs.js MODEL.onnx INPUTS.npy OUT.npy   (NODE_PATH must reach onnxruntime-node)
// INPUTS.npy is float32 [N, ...the model's one input shape without its leading 1]; OUT.npy gets
// the first output of each run, stacked the same way, float32.
const ort = require('onnxruntime-node');
const npy = require('./npy.js');

(async () => {
  const [file, inputsPath, outPath] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 2, interOpNumThreads: 1 });
  const raw = npy.readNpy(inputsPath);
  if (raw.descr !== '<f4') throw new Error(`${inputsPath}: float32 arrays only`);
  const inputs = { shape: raw.shape, data: new Float32Array(raw.data) };
  const rows = inputs.shape[0], rowShape = [1, ...inputs.shape.slice(1)];
  const rowSize = inputs.data.length / rows;
  const outputs = [];
  let outShape = null;
  for (let i = 0; i < rows; i++) {
    const feed = new ort.Tensor('float32', inputs.data.slice(i * rowSize, (i + 1) * rowSize), rowShape);
    const result = await session.run({ [session.inputNames[0]]: feed });
    const first = result[session.outputNames[0]];
    outShape = first.dims.slice(1);
    outputs.push(Float32Array.from(first.data));
  }
  const stacked = new Float32Array(outputs.reduce((n, o) => n + o.length, 0));
  outputs.reduce((at, o) => (stacked.set(o, at), at + o.length), 0);
  npy.writeNpyFloat32(outPath, [rows, ...outShape], stacked);
})().catch(e => { console.error(`ort_outputs.js: ${e.message}`); process.exit(1); });
