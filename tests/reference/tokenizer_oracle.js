// tokenizer_oracle.js -- independent GPT-2 encoders for test_tokenizer_oracle.
//
//   node tokenizer_oracle.js NPM_DIR encode CORPUS OUT
//   node tokenizer_oracle.js NPM_DIR classes OUT
//
// NPM_DIR holds node_modules/{js-tiktoken,gpt-3-encoder}. CORPUS is a series of
// cases, each a little-endian uint32 byte count and the bytes. For every case
// OUT gets two lines:
//   A <ids>   js-tiktoken getEncoding("gpt2").encode(text, [], []) -- special
//             tokens as plain text. "A -" when the case is skipped: invalid
//             UTF-8 (a JS string cannot carry it), U+0085 or U+FEFF (JS's \s
//             differs from Unicode White_Space there), or a piece longer than
//             3000 bytes (js-tiktoken's merge loop is cubic).
//   B <ids>   OpenAI's original algorithm, written here from its description:
//             the GPT-2 pattern run by V8 with \s spelled out as Unicode
//             White_Space; bytes that do not start a well-formed UTF-8 sequence
//             (TextDecoder fatal decides) stand alone as "other" symbols; each
//             piece is mapped through bytes_to_unicode and merged pass by pass
//             (lowest-ranked pair of merges.txt, all its occurrences left to
//             right) using gpt-3-encoder's encoder.json and vocab.bpe.
// "classes" writes, for every code point but surrogates, V8's answer to
// \p{L}, \p{N} and \s as run-length lines "FIRST LAST CLASS" (CLASS in L N S O).
"use strict";
const fs = require("fs");
const path = require("path");

const [npmDir, mode, ...rest] = process.argv.slice(2);
if (!npmDir || !mode) {
  process.stderr.write("usage: node tokenizer_oracle.js NPM_DIR encode CORPUS OUT | classes OUT\n");
  process.exit(2);
}
const mods = path.join(npmDir, "node_modules");

if (mode === "classes") {
  const L = /^\p{L}$/u, N = /^\p{N}$/u, S = /^\s$/u;
  const lines = [];
  let runStart = 0, runCls = null;
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const ch = String.fromCodePoint(cp);
    const c = L.test(ch) ? "L" : N.test(ch) ? "N" : S.test(ch) ? "S" : "O";
    if (c !== runCls || (cp === 0xe000 && runCls !== null)) {
      if (runCls !== null) lines.push(`${runStart} ${cp === 0xe000 ? 0xd7ff : cp - 1} ${runCls}`);
      runStart = cp;
      runCls = c;
    }
  }
  lines.push(`${runStart} ${0x10ffff} ${runCls}`);
  fs.writeFileSync(rest[0], lines.join("\n") + "\n");
  process.exit(0);
}
if (mode !== "encode") {
  process.stderr.write(`tokenizer_oracle.js: unknown mode '${mode}'\n`);
  process.exit(2);
}

const { getEncoding } = require(path.join(mods, "js-tiktoken"));
const tiktoken = getEncoding("gpt2");
const encoder = JSON.parse(fs.readFileSync(path.join(mods, "gpt-3-encoder", "encoder.json"), "utf8"));
const bpeLines = fs.readFileSync(path.join(mods, "gpt-3-encoder", "vocab.bpe"), "utf8").split("\n");
const mergeRank = new Map();
bpeLines.slice(1).forEach((line, i) => {
  if (line.trim() === "") return;
  const key = line.replace(/\r$/, "");
  if (!mergeRank.has(key)) mergeRank.set(key, i);
});

// bytes_to_unicode, from its definition in GPT-2's encoder.py
const byteChar = new Array(256);
{
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    byteChar[b] = String.fromCodePoint(printable ? b : 256 + n++);
  }
}

function gpt2Bpe(symbols) {
  let word = symbols;
  while (word.length > 1) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < word.length; i++) {
      const r = mergeRank.get(word[i] + " " + word[i + 1]);
      if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
    }
    if (best < 0) break;
    const a = word[best], b = word[best + 1], out = [];
    for (let i = 0; i < word.length;) {
      if (i + 1 < word.length && word[i] === a && word[i + 1] === b) { out.push(a + b); i += 2; }
      else { out.push(word[i]); i += 1; }
    }
    word = out;
  }
  return word;
}

const WS = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const gpt2Pattern = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`, "gu");
const fatal = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }); // keep U+FEFF

function seqLen(b) {
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) return 3;
  if (b >= 0xf0 && b <= 0xf4) return 4;
  return 0;
}

function encodeB(bytes) {
  // JS string with one stand-in per invalid byte, and the byte offset of each UTF-16 unit
  const parts = [], starts = [];
  for (let i = 0; i < bytes.length;) {
    const n = seqLen(bytes[i]);
    let ch = null;
    if (n === 1) ch = String.fromCharCode(bytes[i]);
    else if (n > 1 && i + n <= bytes.length) {
      try { ch = fatal.decode(bytes.subarray(i, i + n)); } catch (e) { ch = null; }
    }
    const len = ch === null ? 1 : n;
    if (ch === null) ch = "\ue000"; // private use: neither \s, \p{L} nor \p{N}
    parts.push(ch);
    for (let k = 0; k < ch.length; k++) starts.push(i);
    i += len;
  }
  starts.push(bytes.length);
  const text = parts.join("");
  const ids = [];
  for (const m of text.matchAll(gpt2Pattern)) {
    const from = starts[m.index], to = starts[m.index + m[0].length];
    const symbols = [];
    for (let i = from; i < to; i++) symbols.push(byteChar[bytes[i]]);
    for (const tok of gpt2Bpe(symbols)) {
      const id = encoder[tok];
      if (id === undefined) throw new Error(`no id for ${JSON.stringify(tok)}`);
      ids.push(id);
    }
  }
  return ids;
}

function encodeA(bytes) {
  let text;
  try { text = fatal.decode(bytes); } catch (e) { return null; }
  if (/[\u0085\ufeff]/.test(text)) return null;
  for (const m of text.matchAll(gpt2Pattern)) if (Buffer.byteLength(m[0]) > 3000) return null;
  return tiktoken.encode(text, [], []);
}

const corpus = fs.readFileSync(rest[0]);
const out = [];
for (let off = 0; off < corpus.length;) {
  const n = corpus.readUInt32LE(off);
  const bytes = new Uint8Array(corpus.buffer, corpus.byteOffset + off + 4, n);
  off += 4 + n;
  const a = encodeA(bytes);
  out.push(a === null ? "A -" : ("A " + a.join(" ")).trimEnd());
  out.push(("B " + encodeB(bytes).join(" ")).trimEnd());
}
fs.writeFileSync(rest[1], out.join("\n") + "\n");
