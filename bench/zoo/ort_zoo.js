// ONNX Runtime CPU (all graph optimisations on) on one zoo model, fed the model's own saved
// inputs (NAME.in<i>.npy), so that every engine runs the same data. Prints the median ms of
// REPS runs after 3 warm-ups, and the process's peak resident set in bytes.
// usage: node ort_zoo.js THREADS REPS MODEL.onnx   (NODE_PATH must reach onnxruntime-node)
const fs = require('fs');
const ort = require('onnxruntime-node');
const npy = require('../npy.js');

// A .npy file as an ort.Tensor.
function readNpy(path) {
  const { descr, shape, data } = npy.readNpy(path);
  const kinds = { '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array] };
  if (!kinds[descr]) throw new Error(`${path}: dtype ${descr} not handled`);
  const [type, Arr] = kinds[descr];
  return new ort.Tensor(type, new Arr(data), shape);
}

(async () => {
  const [threads, reps, file] = [parseInt(process.argv[2]), parseInt(process.argv[3]), process.argv[4]];
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  const stem = file.replace(/\.onnx$/, '');
  const feeds = {};
  session.inputNames.forEach((name, i) => { feeds[name] = readNpy(`${stem}.in${i}.npy`); });
  for (let i = 0; i < 3; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < reps; i++) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  const mid = times.length >> 1;
  const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  console.log(`ort_ms ${median.toFixed(3)}`);
  // VmHWM, not resourceUsage().maxRSS: Linux carries maxRSS across fork and exec, so it would
  // include the Python harness that started this process.
  const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'latin1'));
  console.log(`peak_rss_bytes ${hwm ? Number(hwm[1]) * 1024 : process.resourceUsage().maxRSS * 1024}`);
})().catch(e => { console.error(`ort_zoo.js: ${e.message}`); process.exit(1); });
