// hf_tokenizer_oracle.js -- Hugging Face tokenizers (npm "tokenizers": the Node binding of the
// Rust crate) as the oracle for test_hf_tokenizer.
//
//   node hf_tokenizer_oracle.js NPM_DIR TOKENIZER_JSON CORPUS OUT ADD_SPECIAL
//
// CORPUS is a series of cases, each a little-endian uint32 byte count and the bytes. Each
// case is decoded as a browser or Node does (TextDecoder, not fatal: each maximal ill-formed
// subpart becomes U+FFFD) and encoded with tokenizer.encode(text, null, {addSpecialTokens:
// ADD_SPECIAL === "1"}). OUT gets one line per case: the ids, space-separated.
"use strict";
const fs = require("fs");
const path = require("path");

const [npmDir, tokPath, corpusPath, outPath, addSpecial] = process.argv.slice(2);
if (!outPath) {
  process.stderr.write("usage: node hf_tokenizer_oracle.js NPM_DIR TOKENIZER_JSON CORPUS OUT ADD_SPECIAL\n");
  process.exit(2);
}
const { Tokenizer } = require(path.join(npmDir, "node_modules", "tokenizers"));

async function main() {
  const tok = Tokenizer.fromFile(tokPath);
  const buf = fs.readFileSync(corpusPath);
  const dec = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const out = [];
  for (let at = 0; at < buf.length;) {
    const n = buf.readUInt32LE(at);
    const text = dec.decode(buf.subarray(at + 4, at + 4 + n));
    at += 4 + n;
    const enc = await tok.encode(text, null, { addSpecialTokens: addSpecial === "1" });
    out.push(enc.getIds().join(" "));
  }
  fs.writeFileSync(outPath, out.join("\n") + "\n");
}
main().catch((e) => {
  process.stderr.write(`hf_tokenizer_oracle.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
