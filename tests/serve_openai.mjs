// SPDX-License-Identifier: Apache-2.0
// serve_openai.mjs — pk serve through the official OpenAI Node SDK (npm `openai`), run by
// tests/test_serve_openai.sh: starts $BUILD/pk serve on the shipped model (CPU, a free port, an
// API key, --max-requests 1), then chat and completions, streamed and not, whose text must equal
// `pk generate` / `pk generate --chat` for the same prompt (greedy); usage in the stream; the SDK's
// error classes for 400 / 401 / 404; an aborted stream frees the only slot for the next request.
// Prints "serve_openai: N passed, N failed" last.
import { spawn, spawnSync } from 'node:child_process';
import OpenAI from 'openai';

const build = process.env.BUILD || 'build';
const pk = `${build}/pk`;
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) passed++;
  else { failed++; console.log(`FAIL ${what}`); }
}

function generate(args) {
  const r = spawnSync(pk, ['generate', ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pk generate ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.endsWith('\n') ? r.stdout.slice(0, -1) : r.stdout; // pk ends the text with a newline
}

function startServer() {
  const child = spawn(pk, ['serve', '--port', '0', '--api-key', 'sk-node', '--max-requests', '1', '--threads', '2'],
                      { stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`pk serve did not start: ${err}`)), 30000);
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/serving \S+ on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve({ child, port: Number(m[1]) }); }
    });
    child.on('exit', (code) => reject(new Error(`pk serve exited ${code}: ${err}`)));
  });
}

async function expectError(what, status, cls, fn) {
  try {
    await fn();
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof cls && e.status === status, `${what}: ${e.constructor.name} ${e.status} ${e.message}`);
  }
}

const prompt = 'In the beginning', question = 'Tell me about Moses';
const wantText = generate(['--prompt', prompt, '--max-tokens', '12']).slice(prompt.length);
const wantChat = generate(['--chat', '--prompt', question, '--max-tokens', '10']);
const { child, port } = await startServer();
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-node', maxRetries: 0, timeout: 60000 });

  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'pk-tiny', `models: ${JSON.stringify(models.data)}`);

  const c = await client.completions.create({ model: 'pk-tiny', prompt, max_tokens: 12, temperature: 0 });
  check(c.choices[0].text === wantText && c.choices[0].finish_reason === 'length',
        `completion ${JSON.stringify(c.choices[0])} vs pk generate ${JSON.stringify(wantText)}`);
  check(c.usage.completion_tokens === 12 && c.usage.prompt_tokens > 0 &&
        c.usage.total_tokens === c.usage.prompt_tokens + 12, `completion usage ${JSON.stringify(c.usage)}`);

  let text = '', usage = null, finish = null;
  const cs = await client.completions.create({ model: 'pk-tiny', prompt, max_tokens: 12, stream: true,
                                               stream_options: { include_usage: true } });
  for await (const chunk of cs) {
    for (const ch of chunk.choices) { text += ch.text; finish = ch.finish_reason || finish; }
    if (chunk.usage) usage = chunk.usage;
  }
  check(text === wantText && finish === 'length', `streamed completion ${JSON.stringify(text)} (${finish})`);
  check(usage && usage.completion_tokens === 12, `streamed completion usage ${JSON.stringify(usage)}`);

  const messages = [{ role: 'user', content: question }];
  const r = await client.chat.completions.create({ model: 'pk-tiny', messages, max_tokens: 10 });
  check(r.choices[0].message.role === 'assistant' && r.choices[0].message.content === wantChat,
        `chat ${JSON.stringify(r.choices[0].message)} vs pk generate --chat ${JSON.stringify(wantChat)}`);
  check(r.object === 'chat.completion' && r.usage.completion_tokens <= 10, `chat usage ${JSON.stringify(r.usage)}`);

  text = ''; usage = null;
  const rs = await client.chat.completions.create({ model: 'pk-tiny', messages, max_completion_tokens: 10, stream: true,
                                                    stream_options: { include_usage: true },
                                                    chat_template_kwargs: { enable_thinking: true } });
  for await (const chunk of rs) {
    for (const ch of chunk.choices) text += ch.delta.content || '';
    if (chunk.usage) usage = chunk.usage;
  }
  check(text === wantChat, `streamed chat ${JSON.stringify(text)} vs ${JSON.stringify(wantChat)}`);
  check(usage && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, `stream usage ${JSON.stringify(usage)}`);

  const hot = { model: 'pk-tiny', messages, temperature: 0.7, top_p: 0.9, seed: 1234, max_tokens: 16 };
  const h1 = await client.chat.completions.create(hot), h2 = await client.chat.completions.create(hot);
  check(h1.choices[0].message.content === h2.choices[0].message.content,
        `seed 1234 twice: ${JSON.stringify(h1.choices[0].message.content)} vs ${JSON.stringify(h2.choices[0].message.content)}`);
  await expectError('temperature 7000', 400, OpenAI.BadRequestError,
                    () => client.chat.completions.create({ model: 'pk-tiny', messages, temperature: 7000 }));
  await expectError('unknown model', 404, OpenAI.NotFoundError,
                    () => client.completions.create({ model: 'gpt-4o', prompt }));
  await expectError('max_tokens over the context', 400, OpenAI.BadRequestError,
                    () => client.completions.create({ model: 'pk-tiny', prompt, max_tokens: 100000 }));
  const stranger = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
  await expectError('wrong key', 401, OpenAI.AuthenticationError, () => stranger.models.list());

  // An aborted stream frees the only slot: the next request runs instead of getting 503.
  const long = await client.completions.create({ model: 'pk-tiny', prompt, max_tokens: 400, stream: true });
  let pieces = 0;
  for await (const chunk of long) { if (++pieces === 2) { long.controller.abort(); break; } void chunk; }
  let next = null;
  for (let i = 0; i < 50 && !next; i++) {
    try { next = await client.completions.create({ model: 'pk-tiny', prompt, max_tokens: 2 }); }
    catch (e) { if (e.status !== 503) throw e; await new Promise((res) => setTimeout(res, 100)); }
  }
  check(next && next.choices[0].text.length > 0, 'a request after the aborted stream');
} catch (e) {
  check(false, `unexpected: ${e.stack || e}`);
} finally {
  child.kill('SIGTERM');
}
console.log(`serve_openai: ${passed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
