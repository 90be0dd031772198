#!/usr/bin/env node
// strata serve's features through the official OpenAI client (npm `openai`): response_format
// with a JSON schema (whole and streamed), json_object, tools with tool_choice "required" and a
// named function (whole and streamed: the client assembles the streamed calls), logprobs,
// embeddings (the client's default base64 and floats). Each
// output is written to --out as {kind, schema, output, finish}; tests/openai_features.sh has
// python3-jsonschema validate them, so the check is an independent validator, not this script.
//
//   node tools/load/openai_features.mjs --port 8080 --out results.json
import OpenAI from 'openai';
import {writeFileSync} from 'node:fs';

function flags(argv) {
  const o = {port: 8080, host: '127.0.0.1', out: 'results.json'};
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i], next = () => argv[++i];
    if (a === '--port') o.port = Number(next());
    else if (a === '--host') o.host = next();
    else if (a === '--out') o.out = next();
    else throw new Error(`unknown flag ${a}`);
  }
  return o;
}

const PERSON = {type: 'object', additionalProperties: false, required: ['name', 'age', 'tribe'],
                properties: {name: {type: 'string', maxLength: 16},
                             age: {type: 'integer', minimum: 0, maximum: 150},
                             tribe: {enum: ['Judah', 'Levi']}, tags: {type: 'array',
                             items: {type: 'string', maxLength: 8}, maxItems: 3}}};
// Integer ranges as people send them (llama-server enforces these; strata refused them once).
const RANGES = [
  {type: 'object', properties: {age: {type: 'integer', minimum: 0, maximum: 150}}, required: ['age']},
  {type: 'object', properties: {year: {type: 'integer', minimum: 1900, maximum: 2100},
                                month: {type: 'integer', minimum: 1, maximum: 12}},
   required: ['year', 'month'], additionalProperties: false},
  {type: 'object', properties: {delta: {type: 'integer', exclusiveMinimum: -10, exclusiveMaximum: 10}},
   required: ['delta']},
  {type: 'object', properties: {rating: {type: 'integer', minimum: 1, maximum: 5},
                                confidence: {type: 'number', minimum: 0, maximum: 1}},
   required: ['rating', 'confidence']},
  {type: 'array', items: {type: 'integer', minimum: -3, maximum: 3}, minItems: 1, maxItems: 4},
  {type: 'object', properties: {port: {type: 'integer', minimum: 1024, maximum: 65535}}, required: ['port']},
];
const TOOLS = [
  {type: 'function', function: {name: 'get_weather', description: 'Current weather in a city',
   parameters: {type: 'object', properties: {city: {type: 'string', maxLength: 12},
                unit: {enum: ['c', 'f']}}, required: ['city']}}},
  {type: 'function', function: {name: 'count_sheep', parameters: {type: 'object',
   properties: {n: {type: 'integer'}}, required: ['n']}}},
];
const ASK = [{role: 'user', content: 'Tell me about the weather in Paris.'}];

async function main() {
  const o = flags(process.argv);
  const client = new OpenAI({baseURL: `http://${o.host}:${o.port}/v1`, apiKey: 'none',
                             maxRetries: 2, timeout: 120000});
  const results = [];
  for (const [seed, temperature] of [[0, 0], [1, 0.8], [2, 0.8]]) {
    // A JSON schema, whole.
    const r = await client.chat.completions.create({
      model: 'strata', messages: ASK, max_tokens: 120, seed, temperature,
      response_format: {type: 'json_schema', json_schema: {name: 'person', strict: true, schema: PERSON}}});
    results.push({kind: 'json_schema', schema: PERSON, output: r.choices[0].message.content,
                  finish: r.choices[0].finish_reason});
    // The same, streamed: the deltas joined.
    let text = '', finish = null;
    const s = await client.chat.completions.create({
      model: 'strata', messages: ASK, max_tokens: 120, seed, temperature, stream: true,
      response_format: {type: 'json_schema', json_schema: {name: 'person', schema: PERSON}}});
    for await (const chunk of s) {
      for (const c of chunk.choices ?? []) {
        text += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    results.push({kind: 'json_schema streamed', schema: PERSON, output: text, finish});
    // json_object.
    const j = await client.chat.completions.create({
      model: 'strata', messages: ASK, max_tokens: 200, seed, temperature,
      response_format: {type: 'json_object'}});
    results.push({kind: 'json_object', schema: {type: 'object'}, output: j.choices[0].message.content,
                  finish: j.choices[0].finish_reason});
    // Tools: any required call, then a named one.
    for (const choice of ['required', {type: 'function', function: {name: 'count_sheep'}}]) {
      const t = await client.chat.completions.create({
        model: 'strata', messages: ASK, max_tokens: 160, seed, temperature, tools: TOOLS,
        tool_choice: choice});
      const calls = t.choices[0].message.tool_calls ?? [];
      results.push({kind: `tools ${JSON.stringify(choice)}`, finish: t.choices[0].finish_reason,
                    only: typeof choice === 'string' ? null : choice.function.name,
                    calls: calls.map((c) => ({id: c.id, type: c.type, name: c.function.name,
                                              arguments: c.function.arguments}))});
    }
    // Tools streamed: the client's delta.tool_calls, gathered by index.
    const ts = await client.chat.completions.create({
      model: 'strata', messages: ASK, max_tokens: 160, seed, temperature, tools: TOOLS,
      tool_choice: 'required', stream: true});
    const gathered = [];
    let tfinish = null;
    for await (const chunk of ts) {
      for (const c of chunk.choices ?? []) {
        for (const d of c.delta?.tool_calls ?? []) {
          gathered[d.index] ??= {id: '', type: 'function', name: '', arguments: ''};
          const g = gathered[d.index];
          if (d.id) g.id = d.id;
          if (d.function?.name) g.name += d.function.name;
          if (d.function?.arguments) g.arguments += d.function.arguments;
        }
        if (c.finish_reason) tfinish = c.finish_reason;
      }
    }
    results.push({kind: 'tools streamed', finish: tfinish, only: null, calls: gathered});
  }
  // Six requests with integer ranges, one schema each.
  for (const [i, schema] of RANGES.entries()) {
    const r = await client.chat.completions.create({
      model: 'strata', messages: ASK, max_tokens: 120, seed: 10 + i, temperature: 0.8,
      response_format: {type: 'json_schema', json_schema: {name: `ranges${i}`, schema}}});
    results.push({kind: 'json_schema integer ranges', schema, output: r.choices[0].message.content,
                  finish: r.choices[0].finish_reason});
  }
  // logprobs: one entry per token, each with its alternatives.
  const lp = await client.chat.completions.create({
    model: 'strata', messages: ASK, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2});
  results.push({kind: 'logprobs', finish: lp.choices[0].finish_reason,
                logprobs: lp.choices[0].logprobs?.content ?? null,
                completion_tokens: lp.usage.completion_tokens});
  // Embeddings: the client's default (it asks for base64 and decodes it) and plain floats.
  const input = ['In the beginning', 'And God said, Let there be light', 'light'];
  const eb = await client.embeddings.create({model: 'strata', input});
  const ef = await client.embeddings.create({model: 'strata', input, encoding_format: 'float'});
  results.push({kind: 'embeddings', inputs: input.length, response: ef,
                decoded: eb.data.map((d) => Array.from(d.embedding))});
  writeFileSync(o.out, JSON.stringify({tools: TOOLS, results}, null, 1));
  console.log(`${results.length} replies written to ${o.out}`);
}

main().catch((e) => { console.error(`error: ${e.message ?? e}`); process.exit(1); });
