// ONNX Runtime CPU on one model with a symbolic batch, as a server sees it: one session, then
// for each input file in turn (batches of different sizes) a first run and REPS timed runs.
// Prints session_ms (creating the session), then per input "size_ms FILE FIRST MEDIAN", then
// sweep_ms: the session, every first run and every timed run.
// usage: node ort_sweep.js THREADS REPS MODEL.onnx IN0.npy[,IN1.npy...]...   (one argument per batch;
// NODE_PATH must reach onnxruntime-node)
const ort = require('onnxruntime-node');
const npy = require('../npy.js');

function readNpy(path) {
  const { descr, shape, data } = npy.readNpy(path);
  const kinds = { '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array] };
  if (!kinds[descr]) throw new Error(`${path}: dtype ${descr} not handled`);
  const [type, Arr] = kinds[descr];
  return new ort.Tensor(type, new Arr(data), shape);
}

const msSince = (start) => Number(process.hrtime.bigint() - start) / 1e6;

(async () => {
  const [threads, reps, file, ...inputs] = [parseInt(process.argv[2]), parseInt(process.argv[3]), ...process.argv.slice(4)];
  const sweep = process.hrtime.bigint();
  let t = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  console.log(`session_ms ${msSince(t).toFixed(1)}`);
  for (const path of inputs) {
    // One batch: its inputs' files, comma-separated, in the model's input order.
    const feeds = {};
    path.split(',').forEach((file, i) => { feeds[session.inputNames[i]] = readNpy(file); });
    t = process.hrtime.bigint();
    await session.run(feeds);
    const first = msSince(t);
    const times = [];
    for (let i = 0; i < reps; i++) {
      t = process.hrtime.bigint();
      await session.run(feeds);
      times.push(msSince(t));
    }
    times.sort((a, b) => a - b);
    const mid = times.length >> 1;
    const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
    console.log(`size_ms ${path} ${first.toFixed(3)} ${median.toFixed(3)}`);
  }
  console.log(`sweep_ms ${msSince(sweep).toFixed(1)}`);
})().catch(e => { console.error(`ort_sweep.js: ${e.message}`); process.exit(1); });
