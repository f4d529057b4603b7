#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// make_tokenizer_goldens.mjs — writes tests/data/tokenizer_goldens.json with Hugging Face's own
// tokenizer (the Rust `tokenizers` library through its npm binding, `npm install tokenizers`).
//
//   node scripts/make_tokenizer_goldens.mjs QWEN3_TOKENIZER_JSON LLAMA3_TOKENIZER_JSON \
//        [--texts tests/data/tokenizer_texts.json] [--out tests/data/tokenizer_goldens.json]
//
// For every text: ids = encode(text, add_special_tokens=False), decoded = decode(ids,
// skip_special_tokens=False). scripts/make_tokenizer_goldens.py writes the same file with the
// Python package; only the "generator" line differs. Set PK_TOKENIZERS_NPM to the package's
// directory when it is not installed next to the repository.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const pkgDir = process.env.PK_TOKENIZERS_NPM || 'tokenizers';
const { Tokenizer } = require(pkgDir);
const version = JSON.parse(
  fs.readFileSync(require.resolve(path.join(pkgDir, 'package.json')), 'utf8')).version;

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
let texts = path.join(root, 'tests/data/tokenizer_texts.json');
let out = path.join(root, 'tests/data/tokenizer_goldens.json');
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--texts') texts = args[++i];
  else if (args[i] === '--out') out = args[++i];
  else files.push(args[i]);
}
if (files.length !== 2) {
  console.error('usage: make_tokenizer_goldens.mjs QWEN3_JSON LLAMA3_JSON [--texts F] [--out F]');
  process.exit(2);
}
const cases = JSON.parse(fs.readFileSync(texts, 'utf8'));
const s = JSON.stringify;
let o = '{\n';
o += ` "generator": ${s(`tokenizers ${version} (Hugging Face Rust library, npm binding) via scripts/make_tokenizer_goldens.mjs`)},\n`;
o += ' "tokenizers": {\n';
const names = ['qwen3', 'llama3'];
for (let k = 0; k < 2; k++) {
  const tok = Tokenizer.fromFile(files[k]);
  o += `  ${s(names[k])}: {\n   "vocab_size": ${tok.getVocabSize(true)},\n   "cases": [\n`;
  for (let i = 0; i < cases.length; i++) {
    const c = cases[i];
    const enc = await tok.encode(c.text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const decoded = await tok.decode(ids, false);
    o += `    {"name": ${s(c.name)}, "text": ${s(c.text)}, "ids": [${ids.join(', ')}], ` +
         `"decoded": ${s(decoded)}}${i + 1 < cases.length ? ',' : ''}\n`;
  }
  o += `   ]\n  }${k === 0 ? ',' : ''}\n`;
}
o += ' }\n}\n';
fs.writeFileSync(out, o);
console.log(`wrote ${out}: ${cases.length} texts x 2 tokenizers (tokenizers ${version})`);
