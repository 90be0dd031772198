#!/usr/bin/env node
// Load test of strata serve with the official OpenAI client (npm `openai`): C clients at once,
// each asking R completions of T tokens, half of them streamed. Every reply is checked (a
// stream must end with a finish_reason, its chunks carry text, the text of a prompt is the same
// streamed or not when greedy); 503s are retried by the client as its Retry-After says and
// counted. Prints p50/p99 latency, aggregate decode tok/s, and one JSON line (--json).
//
//   node tools/load/openai_load.mjs --port 8080 --clients 64 --tokens 64 [--requests 1]
//        [--stream-share 0.5] [--api-key KEY] [--json]
import OpenAI from 'openai';

function flags(argv) {
  const o = {port: 8080, host: '127.0.0.1', clients: 8, tokens: 64, requests: 1,
             streamShare: 0.5, apiKey: 'none', json: false, prompts: 8};
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i], next = () => argv[++i];
    if (a === '--port') o.port = Number(next());
    else if (a === '--host') o.host = next();
    else if (a === '--clients') o.clients = Number(next());
    else if (a === '--tokens') o.tokens = Number(next());
    else if (a === '--requests') o.requests = Number(next());
    else if (a === '--stream-share') o.streamShare = Number(next());
    else if (a === '--api-key') o.apiKey = next();
    else if (a === '--json') o.json = true;
    else throw new Error(`unknown flag ${a}`);
  }
  return o;
}

const PROMPTS = ['In the beginning', 'And God said', 'Let there be light', 'And the evening',
                 'The earth was without form', 'He called the light Day', 'And God saw',
                 'Day and night'];

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

async function one(client, prompt, tokens, stream) {
  const start = performance.now();
  let text = '', finish = null, completion = 0;
  if (stream) {
    const s = await client.completions.create(
        {model: 'strata', prompt, max_tokens: tokens, temperature: 0, stream: true,
         stream_options: {include_usage: true}});
    for await (const chunk of s) {
      if (chunk.usage) completion = chunk.usage.completion_tokens;
      for (const c of chunk.choices ?? []) {
        if (finish !== null) throw new Error('a chunk after the finish');
        text += c.text ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    if (finish === null) throw new Error('the stream ended without a finish_reason');
  } else {
    const r = await client.completions.create(
        {model: 'strata', prompt, max_tokens: tokens, temperature: 0});
    text = r.choices[0].text;
    finish = r.choices[0].finish_reason;
    completion = r.usage.completion_tokens;
  }
  if (finish !== 'stop' && finish !== 'length') throw new Error(`finish_reason ${finish}`);
  return {seconds: (performance.now() - start) / 1e3, text, completion};
}

async function main() {
  const o = flags(process.argv);
  let retried = 0;
  // The client retries 429/5xx itself after Retry-After; count the 503s it saw.
  const fetchCounting = async (url, init) => {
    const res = await fetch(url, init);
    if (res.status === 503) ++retried;
    return res;
  };
  const client = new OpenAI({baseURL: `http://${o.host}:${o.port}/v1`, apiKey: o.apiKey,
                             maxRetries: 20, timeout: 120000, fetch: fetchCounting});
  const latencies = [], errors = [], texts = new Map();
  let completion = 0;
  const start = performance.now();
  await Promise.all(Array.from({length: o.clients}, async (_, c) => {
    for (let r = 0; r < o.requests; ++r) {
      const k = c * o.requests + r;
      const prompt = PROMPTS[Math.floor(k / 2) % PROMPTS.length];
      // Streamed requests spread evenly: a share of 0.5 streams every other one.
      const stream = Math.floor((k + 1) * o.streamShare) > Math.floor(k * o.streamShare);
      try {
        const res = await one(client, prompt, o.tokens, stream);
        latencies.push(res.seconds);
        completion += res.completion;
        if (!texts.has(prompt)) texts.set(prompt, res.text);
        else if (texts.get(prompt) !== res.text) errors.push(`client ${c}: "${prompt}" gave another text`);
      } catch (e) {
        errors.push(`client ${c}: ${e.message ?? e}`);
      }
    }
  }));
  const wall = (performance.now() - start) / 1e3;
  latencies.sort((a, b) => a - b);
  const report = {clients: o.clients, requests: o.clients * o.requests, tokens: o.tokens,
                  completed: latencies.length, errors: errors.length, retried_503: retried,
                  wall_s: wall, p50_s: percentile(latencies, 0.5) ?? null,
                  p99_s: percentile(latencies, 0.99) ?? null,
                  aggregate_tok_s: completion / wall};
  for (const e of errors.slice(0, 10)) console.error(e);
  if (o.json) console.log(JSON.stringify(report));
  else console.log(`${report.completed}/${report.requests} requests, ${report.errors} errors, ` +
                   `${retried} 503s retried; p50 ${report.p50_s?.toFixed(3)} s, p99 ` +
                   `${report.p99_s?.toFixed(3)} s, all in ${wall.toFixed(3)} s, ` +
                   `${report.aggregate_tok_s.toFixed(1)} tok/s together`);
  process.exit(errors.length === 0 ? 0 : 1);
}

main().catch((e) => { console.error(`error: ${e.message ?? e}`); process.exit(1); });
