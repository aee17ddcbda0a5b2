#!/usr/bin/env node
// Builds Strata's byte-level BPE tokenizer fixtures (GPT-2 and LLaMA 3).
//
// Usage: node make_fixtures.mjs OUT_DIR [--modules DIR] [--quick]
//
//   --modules DIR  node_modules folder holding the packages pinned in
//                  package-lock.json (default: $STRATA_TOKENIZER_NODE_MODULES,
//                  else node_modules next to this script).
//   --quick        skip the whole-vocabulary cross-check (corpus checks still run).
//
// For each model it writes OUT_DIR/<name>/tokenizer.json, tokenizer_config.json
// and expected.json ({"cases": [{"text": ..., "ids": [...]}, ...]}).
// expected.json ids come from @huggingface/tokenizers (Hugging Face's own JS
// implementation of tokenizer.json) with add_special_tokens = false. Every id
// list is also checked against a second, unrelated implementation (js-tiktoken
// for GPT-2, llama3-tokenizer-js for LLaMA 3) and decode(encode(x)) == x is
// checked. Any disagreement exits with status 1 and writes nothing further.
//
// It also writes OUT_DIR/<name>/expected_unicode_space.json (same shape) for a
// few texts holding U+FEFF, U+0085, U+180E and other Unicode spaces. There the
// JavaScript reference encoders (and the hard-coded GPT-2 regex inside
// @huggingface/tokenizers' ByteLevel pre-tokenizer) use JavaScript's \s, which
// wrongly includes U+FEFF and misses U+0085. The ids written there follow the
// Rust `tokenizers` library (Oniguruma: \s = White_Space), obtained from
// @huggingface/tokenizers' Split pre-tokenizer, which rewrites \s to
// \p{White_Space}; for GPT-2 via the equivalent
// Split(GPT-2 pattern, Isolated) + ByteLevel(use_regex=false) configuration.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

function die(msg) {
  console.error(`make_fixtures: ERROR: ${msg}`);
  process.exit(1);
}

// ---------------------------------------------------------------- arguments
const argv = process.argv.slice(2);
let outDir = null;
let modulesDir = process.env.STRATA_TOKENIZER_NODE_MODULES || path.join(HERE, "node_modules");
let quick = false;
for (let i = 0; i < argv.length; ++i) {
  const a = argv[i];
  if (a === "--modules") modulesDir = argv[++i];
  else if (a.startsWith("--modules=")) modulesDir = a.slice("--modules=".length);
  else if (a === "--quick") quick = true;
  else if (a.startsWith("-")) die(`unknown option ${a}`);
  else if (outDir === null) outDir = a;
  else die(`unexpected argument ${a}`);
}
if (!outDir) die("usage: node make_fixtures.mjs OUT_DIR [--modules DIR] [--quick]");
modulesDir = path.resolve(modulesDir);
outDir = path.resolve(outDir);
if (!fs.existsSync(modulesDir)) die(`node_modules folder not found: ${modulesDir}`);

// Resolve packages strictly from modulesDir (no walking up to other folders).
const requireFrom = createRequire(path.join(modulesDir, "__strata_resolve__.cjs"));
function load(spec) {
  const resolved = requireFrom.resolve(spec, { paths: [modulesDir] });
  if (!resolved.startsWith(modulesDir + path.sep)) {
    die(`${spec} resolved outside ${modulesDir}: ${resolved}`);
  }
  return requireFrom(resolved);
}
const lock = JSON.parse(fs.readFileSync(path.join(HERE, "package-lock.json"), "utf8"));
for (const name of ["@huggingface/tokenizers", "js-tiktoken", "llama3-tokenizer-js"]) {
  const want = lock.packages[`node_modules/${name}`].version;
  const pj = JSON.parse(fs.readFileSync(path.join(modulesDir, name, "package.json"), "utf8"));
  if (pj.version !== want) die(`${name} is ${pj.version} in ${modulesDir}, lockfile pins ${want}`);
}

const { Tokenizer } = load("@huggingface/tokenizers");
const { Tiktoken } = load("js-tiktoken/lite");
const r50kRanks = load("js-tiktoken/ranks/r50k_base");
const { llama3Tokenizer } = load("llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs");

// ---------------------------------------------------------------- helpers
// GPT-2's bytes_to_unicode table.
const BYTE_TO_UNICODE = (() => {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; ++b) bs.push(b);
  for (let b = 0xa1; b <= 0xac; ++b) bs.push(b);
  for (let b = 0xae; b <= 0xff; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      ++n;
    }
  }
  const table = new Array(256);
  bs.forEach((b, i) => { table[b] = String.fromCharCode(cs[i]); });
  return table;
})();
const bytesToUnicode = (bytes) => Array.from(bytes, (b) => BYTE_TO_UNICODE[b]).join("");
const latin1Key = (bytes) => String.fromCharCode(...bytes);
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const tryUtf8 = (bytes) => { try { return strictUtf8.decode(bytes); } catch { return null; } };

function arraysEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; ++i) if (a[i] !== b[i]) return false;
  return true;
}

// Serialise a tokenizer.json with model.vocab in id order (a plain JS object
// would reorder integer-like keys such as "0" and "10").
function serializeTokenizerJson(tok, vocabEntries) {
  const placeholder = "\u0000VOCAB\u0000";
  const copy = { ...tok, model: { ...tok.model, vocab: placeholder } };
  const vocabText = "{" + vocabEntries.map(([t, id]) => `${JSON.stringify(t)}:${id}`).join(",") + "}";
  const text = JSON.stringify(copy);
  const quoted = JSON.stringify(placeholder);
  const at = text.indexOf(quoted);
  if (at < 0 || text.indexOf(quoted, at + 1) >= 0) die("vocab placeholder not unique");
  return text.slice(0, at) + vocabText + text.slice(at + quoted.length);
}

function writeJson(file, value) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof value === "string" ? value : JSON.stringify(value, null, 1) + "\n");
}

// {"cases": [...]} with one case per line.
const casesJson = (cases) => '{"cases": [\n' + cases.map((c) => JSON.stringify({ text: c.text, ids: c.ids })).join(",\n") + "\n]}\n";

const addedToken = (id, content, normalized) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized, special: true,
});

// ---------------------------------------------------------------- corpus
const corpusText = fs.readFileSync(path.join(HERE, "corpus.txt"), "utf8");
// JavaScript's \s differs from Unicode White_Space on exactly these two code
// points; keep them out of the corpus (see the edge cases below instead).
const JS_SPACE_DIVERGENT = /[\uFEFF\u0085]/u;
if (JS_SPACE_DIVERGENT.test(corpusText)) {
  die("corpus.txt contains U+FEFF or U+0085; put such texts in UNICODE_SPACE_CASES instead");
}
const UNICODE_SPACE_CASES = [
  "\uFEFFHello world",
  "a\uFEFFb and x \uFEFF y",
  "Comma, \uFEFFBOM inside",
  "line\u0085next line",
  "a\u0085\u0085b \u0085 c word \u0085",
  "mongolian\u180Evowel \u180E x a \u180E",
  "separators \u2028 and \u2029 here\u2028",
  "ideographic\u3000space\u3000\u3000x",
  "nbsp\u00A0 \u00A0x and thin\u2009space",
  " \u0085\uFEFF\u180E end  ",
  "dots.\u180E.\u180E!? and \u180E\u180E) x\u180E!",
  "(\uFEFF) [\uFEFF\uFEFF] ok.\uFEFF.",
  "end.\u0085\u0085next (\u0085) !\u0085!",
  // PCRE2 with PCRE2_UCP treats U+180E as \s (Oniguruma does not); these
  // change ids under that reading.
  "word \u180Eok and hello \u180Eworld",
  "a \u180E. 1 \u180E2 a, \u180E\"b\"",
];
function corpusCases() {
  const texts = [];
  const seen = new Set();
  const add = (t) => { if (!seen.has(t)) { seen.add(t); texts.push(t); } };
  const lines = corpusText.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) add(line);           // every line, "\r" kept where the file has CRLF
  for (let i = 0; i < lines.length; i += 8) {    // small multi-line chunks (newline handling)
    add(lines.slice(i, i + 8).join("\n") + "\n");
  }
  add(corpusText);                               // the whole file as one text
  return texts;
}

// ---------------------------------------------------------------- GPT-2
// The regex the Rust ByteLevel pre-tokenizer uses when use_regex is true.
const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
function buildGpt2() {
  const enc = new Tiktoken(r50kRanks);
  const textMap = enc.textMap; // rank -> bytes, as parsed by js-tiktoken itself
  const nRanks = 50256;
  if (textMap.size !== nRanks) die(`r50k_base: expected ${nRanks} ranks, got ${textMap.size}`);
  if (r50kRanks.special_tokens["<|endoftext|>"] !== 50256) die("r50k_base: <|endoftext|> is not 50256");

  const rankOf = new Map();
  const bytesOf = [];
  for (let r = 0; r < nRanks; ++r) {
    const b = textMap.get(r);
    if (!b) die(`r50k_base: rank ${r} missing`);
    const bytes = Uint8Array.from(b);
    const key = latin1Key(bytes);
    if (rankOf.has(key)) die(`r50k_base: duplicate token bytes at rank ${r}`);
    rankOf.set(key, r);
    bytesOf.push(bytes);
  }
  for (let r = 0; r < 256; ++r) {
    if (bytesOf[r].length !== 1) die(`r50k_base: rank ${r} is not a single byte`);
  }

  // Reconstruct the merge list (as Hugging Face's tiktoken converter does):
  // for each token of rank r >= 256, run BPE on its bytes using only merges
  // whose result has rank < r; the two parts left over are the merge that
  // creates it, and merges are ordered by r.
  const merges = [];
  for (let r = 256; r < nRanks; ++r) {
    let parts = Array.from(bytesOf[r], (b) => String.fromCharCode(b));
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < parts.length; ++i) {
        const rk = rankOf.get(parts[i] + parts[i + 1]);
        if (rk !== undefined && rk < bestRank) { bestRank = rk; best = i; }
      }
      if (best < 0 || bestRank >= r) break;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
    }
    if (parts.length !== 2) die(`GPT-2 merge reconstruction: rank ${r} splits into ${parts.length} parts`);
    const [a, b] = parts;
    if (!(rankOf.get(a) < r && rankOf.get(b) < r)) die(`GPT-2 merge reconstruction: bad parts for rank ${r}`);
    const ua = bytesToUnicode(Array.from(a, (c) => c.charCodeAt(0)));
    const ub = bytesToUnicode(Array.from(b, (c) => c.charCodeAt(0)));
    merges.push(`${ua} ${ub}`);
  }

  const vocabEntries = bytesOf.map((bytes, r) => [bytesToUnicode(bytes), r]);
  vocabEntries.push(["<|endoftext|>", 50256]);
  if (new Set(vocabEntries.map((e) => e[0])).size !== 50257) die("GPT-2 vocab strings not unique");

  const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [addedToken(50256, "<|endoftext|>", true)],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: null,
      merges,
    },
  };
  const config = {
    add_bos_token: false,
    add_prefix_space: false,
    bos_token: "<|endoftext|>",
    eos_token: "<|endoftext|>",
    unk_token: "<|endoftext|>",
    clean_up_tokenization_spaces: false,
    model_max_length: 1024,
    tokenizer_class: "GPT2Tokenizer",
    added_tokens_decoder: {
      "50256": { content: "<|endoftext|>", lstrip: false, normalized: true, rstrip: false, single_word: false, special: true },
    },
  };
  return {
    name: "gpt2",
    json: serializeTokenizerJson(tok, vocabEntries),
    config,
    nBpe: nRanks,
    tokenText: (id) => tryUtf8(bytesOf[id]),
    refEncode: (text) => enc.encode(text, "all"),
    refDecode: (ids) => enc.decode(ids),
    refName: "js-tiktoken r50k_base",
    // Same tokenizer with the ByteLevel regex spelled out as a Split, so that
    // @huggingface/tokenizers applies Oniguruma's \s (see header comment).
    splitVariant: (tj) => ({
      ...tj,
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          { type: "Split", pattern: { Regex: GPT2_PATTERN }, behavior: "Isolated", invert: false },
          { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
        ],
      },
    }),
  };
}

// ---------------------------------------------------------------- LLaMA 3
const LLAMA3_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function buildLlama3() {
  const t = llama3Tokenizer;
  const vocab = t.vocabById;
  if (vocab.length !== 128256) die(`llama3-tokenizer-js: expected 128256 tokens, got ${vocab.length}`);
  const nBpe = 128000;
  const vocabEntries = [];
  const seen = new Set();
  for (let id = 0; id < nBpe; ++id) {
    const s = vocab[id];
    if (seen.has(s)) die(`LLaMA 3 vocab: duplicate token ${JSON.stringify(s)}`);
    seen.add(s);
    vocabEntries.push([s, id]);
  }
  const specials = vocab.slice(nBpe);
  const expectSpecial = (id, s) => { if (vocab[id] !== s) die(`LLaMA 3: id ${id} is ${vocab[id]}, expected ${s}`); };
  expectSpecial(128000, "<|begin_of_text|>");
  expectSpecial(128001, "<|end_of_text|>");
  expectSpecial(128009, "<|eot_id|>");
  expectSpecial(128255, "<|reserved_special_token_247|>");

  // t.merges: Map "left right" -> priority, inserted in the hub file's merge order.
  const merges = [];
  let prev = -Infinity;
  for (const [key, prio] of t.merges) {
    if (!(prio > prev)) die("LLaMA 3 merges: priorities not increasing in insertion order");
    prev = prio;
    const sp = key.indexOf(" ");
    const a = key.slice(0, sp);
    const b = key.slice(sp + 1);
    if (sp <= 0 || b.includes(" ") || !seen.has(a) || !seen.has(b) || !seen.has(a + b)) {
      die(`LLaMA 3 merges: bad merge ${JSON.stringify(key)}`);
    }
    merges.push(key);
  }
  if (merges.length !== 280147) die(`LLaMA 3 merges: expected 280147, got ${merges.length}`);

  const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: specials.map((s, i) => addedToken(nBpe + i, s, false)),
    normalizer: null,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: LLAMA3_PATTERN }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: {
      type: "Sequence",
      processors: [
        { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
        {
          type: "TemplateProcessing",
          single: [
            { SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
          ],
          pair: [
            { SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
            { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } },
            { Sequence: { id: "B", type_id: 1 } },
          ],
          special_tokens: {
            "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] },
          },
        },
      ],
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: true,
      vocab: null,
      merges,
    },
  };
  const addedTokensDecoder = {};
  specials.forEach((s, i) => {
    addedTokensDecoder[String(nBpe + i)] = {
      content: s, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true,
    };
  });
  const config = {
    added_tokens_decoder: addedTokensDecoder,
    bos_token: "<|begin_of_text|>",
    clean_up_tokenization_spaces: true,
    eos_token: "<|end_of_text|>",
    model_input_names: ["input_ids", "attention_mask"],
    tokenizer_class: "PreTrainedTokenizerFast",
  };
  const utf8 = new TextEncoder();
  return {
    name: "llama3",
    json: serializeTokenizerJson(tok, vocabEntries),
    config,
    nBpe,
    tokenText: (id) => {
      const bytes = Array.from(vocab[id], (c) => {
        const b = BYTE_TO_UNICODE.indexOf(c);
        if (b < 0) die(`LLaMA 3 vocab: non byte-level char in token ${id}`);
        return b;
      });
      return tryUtf8(Uint8Array.from(bytes));
    },
    refEncode: (text) => t.encode(text, { bos: false, eos: false }),
    refDecode: (ids) => t.decode(ids),
    refName: "llama3-tokenizer-js",
  };
}

// ---------------------------------------------------------------- run
function runModel(m) {
  const t0 = Date.now();
  const dir = path.join(outDir, m.name);
  fs.mkdirSync(dir, { recursive: true });
  writeJson(path.join(dir, "tokenizer.json"), m.json);
  writeJson(path.join(dir, "tokenizer_config.json"), m.config);

  // Load back exactly what was written.
  const tokJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const cfgJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const hf = new Tokenizer(tokJson, cfgJson);
  const hfEncode = (text) => hf.encode(text, { add_special_tokens: false }).ids;
  // (@huggingface/tokenizers refuses to decode an empty id list.)
  const hfDecode = (ids) =>
    ids.length === 0 ? "" : hf.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  // Oniguruma-faithful encoder (differs from hf only for GPT-2, and only on U+FEFF / U+0085).
  const hfOnig = m.splitVariant ? new Tokenizer(m.splitVariant(tokJson), cfgJson) : hf;
  const onigEncode = (text) => hfOnig.encode(text, { add_special_tokens: false }).ids;

  // Sanity: add_special_tokens=true must apply the post-processor as the hub does.
  const withSpecial = hf.encode("Hi", { add_special_tokens: true }).ids;
  const plain = hfEncode("Hi");
  const expectPrefix = m.name === "llama3" ? [128000] : [];
  if (!arraysEqual(withSpecial, [...expectPrefix, ...plain])) {
    die(`${m.name}: add_special_tokens=true gave ${JSON.stringify(withSpecial)}`);
  }

  let failures = 0;
  const fail = (what, text, a, b, bName = m.refName) => {
    if (++failures <= 20) {
      console.error(`[${m.name}] ${what} for ${JSON.stringify(text)}\n  @huggingface/tokenizers: ${JSON.stringify(a)}\n  ${bName}: ${JSON.stringify(b)}`);
    }
  };

  const cases = [];
  for (const text of corpusCases()) {
    const ids = hfEncode(text);
    const ref = m.refEncode(text);
    if (!arraysEqual(ids, ref)) fail("encode mismatch", text, ids, ref);
    const onig = onigEncode(text);
    if (!arraysEqual(ids, onig)) fail("ByteLevel regex vs equivalent Split mismatch", text, ids, onig, "Split variant");
    const back = hfDecode(ids);
    if (back !== text) fail("decode(encode(x)) != x (HF)", text, back, text, "input");
    const refBack = m.refDecode(ref);
    if (refBack !== text) fail("decode(encode(x)) != x (reference)", text, text, refBack);
    cases.push({ text, ids });
  }

  // Texts where JavaScript's \s and Oniguruma's \s differ (see header).
  const spaceCases = [];
  const jsDiffers = [];
  for (const text of UNICODE_SPACE_CASES) {
    const ids = onigEncode(text);
    const back = hfDecode(ids);
    if (back !== text) fail("decode(encode(x)) != x (HF, unicode-space case)", text, back, text, "input");
    const ref = m.refEncode(text);
    const jsOk = arraysEqual(ids, ref) && arraysEqual(ids, hfEncode(text));
    if (!jsOk) {
      if (!JS_SPACE_DIVERGENT.test(text)) fail("unexpected mismatch on unicode-space case", text, ids, ref);
      jsDiffers.push(text);
    }
    spaceCases.push({ text, ids });
  }

  // Whole-vocabulary cross-check: the text of every BPE token that is valid
  // UTF-8 must encode the same way in both implementations.
  let vocabChecked = 0;
  let vocabSingle = 0;
  let vocabSkipped = 0;
  if (!quick) {
    for (let id = 0; id < m.nBpe; ++id) {
      const text = m.tokenText(id);
      if (text === null) continue;
      if (JS_SPACE_DIVERGENT.test(text)) { ++vocabSkipped; continue; }
      const ids = hfEncode(text);
      const ref = m.refEncode(text);
      if (!arraysEqual(ids, ref)) fail(`vocab token ${id} encode mismatch`, text, ids, ref);
      if (ids.length === 1 && ids[0] === id) ++vocabSingle;
      ++vocabChecked;
    }
  }

  if (failures > 0) die(`${m.name}: ${failures} mismatches`);
  writeJson(path.join(dir, "expected.json"), casesJson(cases));
  writeJson(path.join(dir, "expected_unicode_space.json"), casesJson(spaceCases));
  const nIds = cases.reduce((s, c) => s + c.ids.length, 0);
  console.log(
    `[${m.name}] ok: ${cases.length} cases, ${nIds} ids, identical in @huggingface/tokenizers and ${m.refName}; ` +
      `round trip ok` +
      (quick ? "" : `; vocab check: ${vocabChecked} UTF-8 tokens agree (${vocabSingle} encode to themselves, ${vocabSkipped} skipped for U+FEFF/U+0085)`) +
      `; unicode-space cases: ${spaceCases.length}, of which ${jsDiffers.length} differ under JavaScript \\s as expected` +
      ` (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
}

// ---------------------------------------------------------------- NFC (Qwen2's layout)
// Qwen2's tokenizer.json normalizes to NFC and splits with LLaMA 3's pattern at single digits. No
// package ships Qwen2's vocabulary, so the layout is built on GPT-2's vocabulary, and the ids come
// from @huggingface/tokenizers alone (decode(encode(x)) is NFC(x) there, checked).
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const NFC_CASES = [
  "Cafe\u0301 au lait, re\u0301sume\u0301, nai\u0308ve",  // decomposed accents
  "Caf\u00e9 au lait, r\u00e9sum\u00e9, na\u00efve",       // the same, composed
  "\u212B ngstr\u00f6m and \u2126 ohm, K\u212A",            // singletons: Angstrom, Ohm, Kelvin signs
  "\u1100\u1161\u11A8 \uAC01 jamo and syllable",             // Hangul composition
  "a\u0328\u0301 q\u0307\u0323 reordered marks",             // canonical ordering
  "\uFB01 ligature and \u00BD fraction stay (NFC, not NFKC)",
  "e\u0301<|endoftext|>e\u0301 around an added token",
  "mixed 12345 digits, \u0915\u093C \u0958 Devanagari nukta",
  "\u30AB\u3099 \u30AC katakana voicing",
];

function runNfc(gpt2) {
  const dir = path.join(outDir, "gpt2_nfc");
  const base = JSON.parse(gpt2.json);
  const tokJson = {
    ...base,
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: QWEN2_PATTERN }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
      ],
    },
  };
  const vocabEntries = Object.entries(base.model.vocab).sort((a, b) => a[1] - b[1]);
  writeJson(path.join(dir, "tokenizer.json"), serializeTokenizerJson(tokJson, vocabEntries));
  writeJson(path.join(dir, "tokenizer_config.json"), gpt2.config);
  const hf = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")), gpt2.config);
  const cases = [];
  for (const text of [...corpusCases(), ...NFC_CASES]) {
    const ids = hf.encode(text, { add_special_tokens: false }).ids;
    const back = ids.length === 0 ? "" : hf.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    if (back !== text.normalize("NFC")) die(`gpt2_nfc: decode(encode(x)) is not NFC(x) for ${JSON.stringify(text)}`);
    cases.push({ text, ids });
  }
  const composed = hf.encode(NFC_CASES[1], { add_special_tokens: false }).ids;
  if (!arraysEqual(hf.encode(NFC_CASES[0], { add_special_tokens: false }).ids, composed))
    die("gpt2_nfc: decomposed and composed accents encode differently under NFC");
  writeJson(path.join(dir, "expected.json"), casesJson(cases));
  console.log(`[gpt2_nfc] ok: ${cases.length} cases (NFC normalizer, Qwen2's split pattern) from @huggingface/tokenizers`);
}

fs.mkdirSync(outDir, { recursive: true });
const gpt2 = buildGpt2();
runModel(gpt2);
runModel(buildLlama3());
runNfc(gpt2);
