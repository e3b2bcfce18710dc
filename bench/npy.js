// .npy files (format 1.0-3.0, little-endian, C order) for the Node.js peers' scripts
// (bench/zoo/ort_zoo.js, bench/ort_outputs.js).
const fs = require('fs');

// { descr: '<f4' and the like, shape: [...], data: an ArrayBuffer of the values }
function readNpy(path) {
  const buf = fs.readFileSync(path);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.slice(major === 1 ? 10 : 12, start).toString('latin1');
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran-order arrays are not read`);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  return { descr, shape, data: buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length) };
}

// Writes a Float32Array of the given shape as a version 1.0 .npy file.
function writeNpyFloat32(path, shape, values) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1, head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(values.buffer)]));
}

module.exports = { readNpy, writeNpyFloat32 };
