// Writes fashion_mnist_t10k_0.png: the first image of Fashion-MNIST's test set
// (t10k-images-idx3-ubyte.gz of Debian's dataset-fashion-mnist, label 9 "Ankle boot"), its 28x28
// bytes copied unchanged into an 8-bit grayscale PNG (colour type 0, no gamma or colour profile
// chunks, so a browser decodes each pixel to exactly that byte). Light on black, as the dataset
// stores it. The browser test of the try-a-model page (tests/ui/try.test.mjs) uploads it.
//   node tests/data/make_fashion_png.mjs [/usr/share/datasets/fashion-mnist]
// Needs only node's zlib (no image library).
import {readFileSync, writeFileSync} from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";
import zlib from "node:zlib";

const dir = process.argv[2] || "/usr/share/datasets/fashion-mnist";
const here = path.dirname(fileURLToPath(import.meta.url));
const INDEX = 0;

const idx = zlib.gunzipSync(readFileSync(path.join(dir, "t10k-images-idx3-ubyte.gz")));
if (idx.readUInt32BE(0) !== 0x803) throw new Error("not an IDX file of unsigned bytes with 3 dimensions");
const [rows, cols] = [idx.readUInt32BE(8), idx.readUInt32BE(12)];
const pixels = idx.subarray(16 + INDEX * rows * cols, 16 + (INDEX + 1) * rows * cols);
const labels = zlib.gunzipSync(readFileSync(path.join(dir, "t10k-labels-idx1-ubyte.gz")));
console.log(`image ${INDEX}: ${rows}x${cols}, label ${labels[8 + INDEX]}`);

// PNG (RFC 2083): signature, IHDR, one IDAT of zlib-compressed scanlines (filter byte 0), IEND.
const crcTable = Array.from({length: 256}, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "latin1");
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}
const ihdr = Buffer.alloc(13);
ihdr.writeUInt32BE(cols, 0);
ihdr.writeUInt32BE(rows, 4);
ihdr[8] = 8;  // bit depth
ihdr[9] = 0;  // grayscale
const raw = Buffer.alloc(rows * (cols + 1));
for (let y = 0; y < rows; y++) pixels.copy(raw, y * (cols + 1) + 1, y * cols, (y + 1) * cols);
const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr),
                           chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
writeFileSync(path.join(here, "fashion_mnist_t10k_0.png"), png);
