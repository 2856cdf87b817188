// Peer runner for `make bench`: transformers.js (onnxruntime-node) driving an autoui bundle's
// encoder_model.onnx and a decoder_model_merged.onnx through its own T5 generate loop — the
// text path only (transformers.js has no Auto-UI fusion or BLIP-2 tower; the decoder attends
// to the plain encoder output, which costs the same as the fused one).
//
//   node bench/node/run.mjs --model DIR --inputs inputs.json --threads 2 [--runs 3] [--warmup 1] [--json OUT]
//                           [--python PY]
//
// A temporary Hugging Face-style model directory (config.json, generation_config.json,
// tokenizer.json, onnx/) points at the bundle's files. Fixed length: generate with
// min_new_tokens = max_new_tokens = inputs.tokens (</s> masked until then).
//
// transformers.js only loads optimum's merged decoder (one If on use_cache_branch), while
// bundles since format 2 hold the decoder as two graphs (decoder_with_past_model.onnx and
// decoder_cross_model.onnx). So the merged file is built here, before the timed load, into the
// temporary directory by `python -m scripts.peers.merged_decoder BUNDLE OUT` (PY: --python, else
// $AUTOUI_PYTHON, else the repository's .venv/bin/python, else python3): the same weights,
// stored once, in the layout an optimum/transformers.js user would run (ONNX Runtime prepacks
// the weights once per If branch, so its RSS is what such a user pays).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { AutoModelForSeq2SeqLM, AutoTokenizer, env } from '@huggingface/transformers';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string' },
    inputs: { type: 'string' },
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '1' },
    json: { type: 'string' },
    python: { type: 'string' },
  },
});
if (!args.model || !args.inputs) {
  console.error('usage: node run.mjs --model BUNDLE_DIR --inputs inputs.json [--threads N] [--runs N] [--warmup N] [--json OUT] [--python PY]');
  process.exit(2);
}
const threads = Number(args.threads);
const bundle = path.resolve(args.model);
const manifest = JSON.parse(fs.readFileSync(path.join(bundle, 'manifest.json'), 'utf8'));
const inputs = JSON.parse(fs.readFileSync(args.inputs, 'utf8'));
const m = manifest.model;
if (manifest.format_version !== 2) {
  console.error(`${bundle}: bundle format ${manifest.format_version}, want 2 (python -m scripts.upgrade_bundle ${bundle})`);
  process.exit(1);
}

// The HF-style directory transformers.js expects.
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'autoui-tjs-'));
process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }));
const dir = path.join(root, 'model');
fs.mkdirSync(path.join(dir, 'onnx'), { recursive: true });
const tokens = manifest.tokens;
fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
  model_type: 't5', architectures: ['T5ForConditionalGeneration'], is_encoder_decoder: true,
  d_model: m.d_model, d_kv: m.d_kv, d_ff: m.d_ff, num_layers: m.num_layers, num_decoder_layers: m.num_decoder_layers,
  num_heads: m.num_heads, vocab_size: m.vocab_size, feed_forward_proj: m.feed_forward_proj,
  relative_attention_num_buckets: m.relative_attention_num_buckets,
  relative_attention_max_distance: m.relative_attention_max_distance, layer_norm_epsilon: m.layer_norm_epsilon,
  tie_word_embeddings: false, use_cache: true,
  decoder_start_token_id: tokens.decoder_start_id, eos_token_id: tokens.eos_id, pad_token_id: tokens.pad_id,
}, null, 2));
fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({
  decoder_start_token_id: tokens.decoder_start_id, eos_token_id: tokens.eos_id, pad_token_id: tokens.pad_id,
}, null, 2));
fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
  tokenizer_class: 'T5Tokenizer', eos_token: '</s>', pad_token: '<pad>', unk_token: '<unk>',
  model_max_length: manifest.prompt.max_source_tokens,
}, null, 2));
fs.symlinkSync(path.join(bundle, manifest.files.tokenizer.path), path.join(dir, 'tokenizer.json'));
// Graphs over 2 GB keep their weights in external-data files named in the graph; ONNX Runtime
// looks for them beside the graph file it was given, so they are linked in too (the merged
// decoder's own .data file, if any, is written beside it).
for (const e of manifest.files.encoder.external_data ?? []) {
  fs.symlinkSync(path.join(bundle, e.path), path.join(dir, 'onnx', path.basename(e.path)));
}
fs.symlinkSync(path.join(bundle, manifest.files.encoder.path), path.join(dir, 'onnx', 'encoder_model.onnx'));
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const venvPython = path.join(repo, '.venv', 'bin', 'python');
const python = args.python ?? process.env.AUTOUI_PYTHON ?? (fs.existsSync(venvPython) ? venvPython : 'python3');
execFileSync(python, ['-m', 'scripts.peers.merged_decoder', bundle, path.join(dir, 'onnx', 'decoder_model_merged.onnx')],
  { cwd: repo, stdio: ['ignore', 'inherit', 'inherit'] });

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = root;
env.useFSCache = false;
env.useBrowserCache = false;

const now = () => Number(process.hrtime.bigint()) / 1e9;
let t0 = now();
const model = await AutoModelForSeq2SeqLM.from_pretrained('model', {
  dtype: 'fp32', device: 'cpu',
  session_options: { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential' },
});
const tokenizer = await AutoTokenizer.from_pretrained('model');
const loadS = now() - t0;

// Per-call timings of the two sessions, around transformers.js's own calls.
let clock = null;
let decoderCalls = 0;
function timeSession(sess, onDone) {
  const run = sess.run.bind(sess);
  sess.run = async (...a) => {
    const t = now();
    const out = await run(...a);
    onDone(now() - t);
    return out;
  };
}
const add = (stage, s) => { clock[stage] = (clock[stage] ?? 0) + s; };
timeSession(model.sessions.model, (s) => add('encoder', s));
timeSession(model.sessions.decoder_model_merged, (s) => {
  add(decoderCalls === 0 ? 'first_step' : 'later_steps', s);
  decoderCalls++;
});

const ACTION_RE = /Action Plan: \[([^\]]*)\]\s*;\s*Action Decision:\s*(.*)$/;

async function one(c, n) {
  clock = {};
  decoderCalls = 0;
  let t = now();
  const enc = tokenizer(c.source_text, { truncation: true, max_length: manifest.prompt.max_source_tokens });
  add('tokenize', now() - t);
  if (enc.input_ids.dims[1] !== c.source_tokens) {
    console.error(`warning: case ${c.id}: ${enc.input_ids.dims[1]} tokens here, ${c.source_tokens} in Go`);
  }
  t = now();
  const out = await model.generate({
    input_ids: enc.input_ids, attention_mask: enc.attention_mask,
    max_new_tokens: n, min_new_tokens: n, do_sample: false, num_beams: 1,
  });
  add('generate', now() - t);
  const ids = Array.from(out.tolist()[0].slice(1), Number);
  t = now();
  const text = tokenizer.decode(ids, { skip_special_tokens: true });
  const mm = ACTION_RE.exec(text); // random weights: usually no match; the cost is what counts
  if (mm) mm[2].match(/"(\w+)": "([^"]*)"/g);
  add('parse', now() - t);
  const stages = { ...clock };
  stages.text_path = stages.tokenize + stages.generate + stages.parse;
  stages.total = stages.text_path;
  if (decoderCalls > 1) stages.decode_step = stages.later_steps / (decoderCalls - 1);
  return { case: c.id, stages, ids, decoder_calls: decoderCalls };
}

const actions = [];
for (let r = -Number(args.warmup); r < Number(args.runs); r++) {
  for (const c of inputs.cases) {
    const a = await one(c, inputs.tokens);
    if (a.ids.length !== inputs.tokens) {
      console.error(`case ${c.id}: generated ${a.ids.length} tokens, want ${inputs.tokens}`);
      process.exit(1);
    }
    if (r >= 0) actions.push(a);
  }
  console.error(`  pass ${r >= 0 ? r + 1 : 'warm-up'} done`);
}

function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const n = s.length;
  const med = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const rank = Math.ceil((9 * n) / 10);
  const ms = (x) => Math.round(x * 1e6) / 1e3;
  return { n, min_ms: ms(s[0]), median_ms: ms(med), p90_ms: ms(s[rank - 1]) };
}
const median = (v) => summarize(v).median_ms / 1e3;
const stages = {};
for (const name of ['tokenize', 'encoder', 'first_step', 'decode_step', 'later_steps', 'parse', 'generate', 'text_path', 'total']) {
  const s = actions.filter((a) => name in a.stages).map((a) => a.stages[name]);
  if (s.length) stages[name] = summarize(s);
}
const pkg = (name) => JSON.parse(fs.readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
const doc = {
  runner: 'transformers.js-node', model: m.size, threads, provider: 'cpu', stages,
  total_median_ms: stages.total.median_ms, text_path_median_ms: stages.text_path.median_ms,
  tokens: median(actions.map((a) => a.ids.length)), decoder_calls: median(actions.map((a) => a.decoder_calls)),
  peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 102.4) / 10,
  fixed_length: `EOS suppressed until ${inputs.tokens} tokens, then stop`,
  generated_ids: actions[0].ids,
  load_s: Math.round(loadS * 100) / 100,
  notes: [
    `@huggingface/transformers ${pkg('@huggingface/transformers')}, onnxruntime-node ${pkg('onnxruntime-node')}, node ${process.version}`,
    'text path only: no vision tower, no fusion graph (the decoder attends to the encoder output)',
    'decoder: optimum\'s merged layout (decoder_model_merged.onnx), built before the load from the bundle\'s two decoder graphs by scripts.peers.merged_decoder',
  ],
};
const text = JSON.stringify(doc, null, 2) + '\n';
if (args.json) fs.writeFileSync(args.json, text);
else process.stdout.write(text);
