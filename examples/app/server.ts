/**
 * The example app `npm start` runs next to its sidecar. It shows the sidecar's APIs from the
 * app's side: it writes and reads state, sets a metadata attribute, and receives job triggers
 * (POST /job/<name>) and input-binding events, and runs a workflow worker (workflows.ts).
 */
import { createServer } from 'node:http';
import { startWorkflowWorker } from './workflows.ts';

const port = Number(process.env.APP_PORT ?? 3000);
const sidecar = `http://127.0.0.1:${process.env.RT_HTTP_PORT ?? 3500}`;

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    if (req.method === 'POST' && req.url?.startsWith('/job/')) {
      console.log(`[app] job ${decodeURIComponent(req.url.slice(5))} fired with data ${body}`);
      res.writeHead(200).end();
      return;
    }
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200).end('ok');
      return;
    }
    if (req.method === 'POST') {
      console.log(`[app] event on ${req.url}: ${body.slice(0, 200)}`);
      res.writeHead(200).end();
      return;
    }
    res.writeHead(404).end();
  });
});

server.listen(port, '127.0.0.1', async () => {
  console.log(`[app] listening on ${port}; sidecar at ${sidecar}`);
  try {
    await fetch(`${sidecar}/v1.0/metadata/example-started`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: new Date().toISOString() });
    const save = await fetch(`${sidecar}/v1.0/state/statestore`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ key: 'greeting', value: { hello: 'world', at: Date.now() } }]),
    });
    console.log(`[app] saved state: HTTP ${save.status}`);
    const read = await fetch(`${sidecar}/v1.0/state/statestore/greeting`);
    console.log(`[app] read state: HTTP ${read.status} ${await read.text()}`);
  } catch (e) {
    console.error(`[app] could not reach the sidecar: ${(e as Error).message}`);
  }
  try {
    const worker = await startWorkflowWorker();
    console.log('[app] workflow worker ready (workflow "greet")');
    stopWorker = () => worker.stop();
  } catch (e) {
    console.error(`[app] workflow worker not started: ${(e as Error).message}`);
  }
  console.log(`[app] try: curl ${sidecar}/v1.0/metadata`);
});

let stopWorker: () => Promise<void> = async () => {};
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    void stopWorker()
      .catch(() => undefined)
      .finally(() => server.close(() => process.exit(0)));
  });
