#!/usr/bin/env node
// strata serve through the npm `ollama` client, as Open WebUI and editors speak to Ollama:
// list, show, ps and version; chat and generate whole and streamed (the streamed parts adding
// up to the whole reply, greedy); a JSON-schema format with an integer range; embed; an error the
// client raises as Ollama's ResponseError with the server's message. Exits 1 on any mismatch.
//
//   node tools/load/ollama_client.mjs --port 11434 --model tiny
import {Ollama} from 'ollama';

function flags(argv) {
  const o = {port: 11434, host: '127.0.0.1', model: 'tiny'};
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i], next = () => argv[++i];
    if (a === '--port') o.port = Number(next());
    else if (a === '--host') o.host = next();
    else if (a === '--model') o.model = next();
    else throw new Error(`unknown flag ${a}`);
  }
  return o;
}

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures += 1;
}

async function joined(stream, piece) {
  let text = '', last = null, parts = 0;
  for await (const part of stream) {
    parts += 1;
    if (part.done) last = part;
    else text += piece(part);
  }
  return {text, last, parts};
}

async function main() {
  const o = flags(process.argv);
  const ollama = new Ollama({host: `http://${o.host}:${o.port}`});
  const options = {temperature: 0, num_predict: 12};

  const list = await ollama.list();
  check(list.models.length === 1 && list.models[0].name === o.model && list.models[0].details.format === 'gguf',
        `list: ${JSON.stringify(list.models.map((m) => m.name))}`);
  const show = await ollama.show({model: o.model});
  check(show.capabilities.includes('completion') && typeof show.template === 'string',
        `show: ${show.details.family} ${show.details.parameter_size} ${show.details.quantization_level}`);
  const ps = await ollama.ps();
  check(ps.models[0]?.name === o.model, 'ps lists the model');
  const version = await ollama.version();
  check(/^\d+\.\d+\.\d+$/.test(version.version), `version ${version.version}`);

  const messages = [{role: 'user', content: 'Tell me about the beginning.'}];
  const whole = await ollama.chat({model: o.model, messages, options});
  check(whole.done && whole.message.role === 'assistant' && whole.message.content.length > 0 &&
        whole.eval_count > 0, `chat: ${JSON.stringify(whole.message.content)} (${whole.eval_count} tokens)`);
  const streamed = await joined(await ollama.chat({model: o.model, messages, options, stream: true}),
                                (p) => p.message.content);
  check(streamed.text === whole.message.content && streamed.last?.done_reason === whole.done_reason &&
        streamed.parts > 2, `chat streamed in ${streamed.parts} parts, the same text`);

  const gen = await ollama.generate({model: o.model, prompt: 'In the beginning', raw: true, options});
  check(gen.done && gen.response.length > 0, `generate raw: ${JSON.stringify(gen.response)}`);
  const gstream = await joined(await ollama.generate({model: o.model, prompt: 'In the beginning', raw: true,
                                                      options, stream: true}), (p) => p.response);
  check(gstream.text === gen.response, 'generate streamed: the same text');

  const schema = {type: 'object', properties: {age: {type: 'integer', minimum: 0, maximum: 150}},
                  required: ['age'], additionalProperties: false};
  const formatted = await ollama.chat({model: o.model, messages: [{role: 'user', content: 'Your age?'}],
                                       format: schema, options: {num_predict: 40, seed: 3}});
  if (formatted.done_reason === 'stop') {
    const value = JSON.parse(formatted.message.content);
    check(Number.isInteger(value.age) && value.age >= 0 && value.age <= 150 && Object.keys(value).length === 1,
          `format: ${formatted.message.content}`);
  } else {
    console.log(`cut  format reply ended by length: ${formatted.message.content}`);
  }

  const emb = await ollama.embed({model: o.model, input: ['In the beginning', 'light']});
  const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  check(emb.embeddings.length === 2 && emb.embeddings.every((v) => Math.abs(norm(v) - 1) < 1e-4) &&
        emb.embeddings[0].some((x, i) => x !== emb.embeddings[1][i]),
        `embed: ${emb.embeddings.length} unit vectors of ${emb.embeddings[0].length}`);
  try {
    await ollama.chat({model: o.model, messages: [{role: 'user', content: 'x', images: ['aGk=']}]});
    check(false, 'an image is refused');
  } catch (e) {
    check(e.name === 'ResponseError' && e.status_code === 400 && /images are not supported/.test(e.error),
          `an image is refused: ${e.status_code} ${e.error}`);
  }
  if (failures) {
    console.log(`${failures} failures`);
    process.exit(1);
  }
  console.log('the ollama client lists, shows, chats and streams against strata serve');
}

main().catch((e) => { console.error(`error: ${e.message ?? e}`); process.exit(1); });
