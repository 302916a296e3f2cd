// Writes fashion_mnist_t10k_0.png: the first image of Fashion-MNIST's test set
// (t10k-images-idx3-ubyte.gz of Debian's dataset-fashion-mnist, label 9 "Ankle boot"), its 28x28
// bytes copied unchanged into an 8-bit grayscale PNG (colour type 0, no gamma or colour profile
// chunks, so a browser decodes each pixel to exactly that byte). Light on black, as the dataset
// stores it. The browser test of the try-a-model page (tests/ui/try.test.mjs) uploads it.
//   node tests/data/make_fashion_png.mjs [/usr/share/datasets/fashion-mnist]
// Needs only node's zlib (no image library; grey_png.mjs writes the PNG).
import {readFileSync, writeFileSync} from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";
import zlib from "node:zlib";

import {encodeGreyPng} from "./grey_png.mjs";

const dir = process.argv[2] || "/usr/share/datasets/fashion-mnist";
const here = path.dirname(fileURLToPath(import.meta.url));
const INDEX = 0;

const idx = zlib.gunzipSync(readFileSync(path.join(dir, "t10k-images-idx3-ubyte.gz")));
if (idx.readUInt32BE(0) !== 0x803) throw new Error("not an IDX file of unsigned bytes with 3 dimensions");
const [rows, cols] = [idx.readUInt32BE(8), idx.readUInt32BE(12)];
const pixels = idx.subarray(16 + INDEX * rows * cols, 16 + (INDEX + 1) * rows * cols);
const labels = zlib.gunzipSync(readFileSync(path.join(dir, "t10k-labels-idx1-ubyte.gz")));
console.log(`image ${INDEX}: ${rows}x${cols}, label ${labels[8 + INDEX]}`);

writeFileSync(path.join(here, "fashion_mnist_t10k_0.png"), encodeGreyPng({w: cols, h: rows, pixels}));
