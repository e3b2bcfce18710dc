// ONNX Runtime CPU's outputs for a stack of inputs, one run per row: the reference the
// quantized-accuracy check (bench/quantized_accuracy.py) holds kiln's int8 outputs to.
// usage: node ort_outputs.js MODEL.onnx INPUTS.npy OUT.npy   (NODE_PATH must reach onnxruntime-node)
// INPUTS.npy is float32 [N, ...the model's one input shape without its leading 1]; OUT.npy gets
// the first output of each run, stacked the same way, float32.
const fs = require('fs');
const ort = require('onnxruntime-node');

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.slice(major === 1 ? 10 : 12, start).toString('latin1');
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header))
    throw new Error(`${path}: float32 C-order arrays only`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return { shape, data };
}

function writeNpy(path, shape, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1, head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer)]));
}

(async () => {
  const [file, inputsPath, outPath] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 2, interOpNumThreads: 1 });
  const inputs = readNpy(inputsPath);
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
  writeNpy(outPath, [rows, ...outShape], stacked);
})().catch(e => { console.error(`ort_outputs.js: ${e.message}`); process.exit(1); });
