/**
 * A burst of triggers due at once reaches the app through the lean delivery path (undici's
 * dispatch API): every fire exactly once, with its body, due-time header and the app API token;
 * and each fire's progress is stored (batched writes), so that a restart fires nothing again.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJob, sidecarFor, tempDir, waitFor, waitJobDone } from './helpers.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';

const BURST = 2000;

describe('a burst of job triggers delivered to the app', () => {
  const got: { name: string; body: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (!req.url?.startsWith('/job/')) {
        res.statusCode = 404; // the sidecar's discovery calls
        res.end();
        return;
      }
      const name = decodeURIComponent(req.url.slice(5));
      got.push({ name, body: Buffer.concat(chunks).toString(), headers: req.headers });
      // one job answers 500 to show statuses still come back through the lean path
      res.statusCode = name === 'b-fails' ? 500 : 200;
      res.end('ignored body');
    });
  });
  let sc: (Sidecar & { base: string }) | undefined;
  const dir = tempDir();
  let port = 0;

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
    sc = await sidecarFor({ appPort: port, dataDir: dir.path, appApiToken: 'app-token-1' });
  });
  afterAll(async () => {
    await sc?.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    dir.remove();
  });

  const listJobs = async () => ((await (await fetch(`${sc!.base}/v1.0-alpha1/jobs`)).json()) as { jobs: { name: string }[] }).jobs;

  it(`delivers ${BURST} fires due at once, each exactly once, with token, data and due time; failures are retried`, async () => {
    const due = new Date(Date.now() + 3000).toISOString();
    const names = Array.from({ length: BURST }, (_, i) => `b-${i}`);
    for (let i = 0; i < names.length; i += 100) {
      const rs = await Promise.all(names.slice(i, i + 100).map((n) => postJob(sc!.base, n, { dueTime: due, data: { n } })));
      expect(rs.every((r) => r.status === 204)).toBe(true);
    }
    expect((await postJob(sc!.base, 'b-fails', { dueTime: due, failurePolicy: { constant: { interval: '100ms', maxRetries: 1 } } })).status).toBe(204);
    await waitFor(() => got.length >= BURST + 2, 30_000, 'every fire and the retry');
    // every job done (no next fire stored): nothing more can be delivered
    await waitFor(async () => (await listJobs()).length === 0, 10_000, 'every job done');
    const byName = new Map<string, number>();
    for (const g of got) byName.set(g.name, (byName.get(g.name) ?? 0) + 1);
    expect(names.filter((n) => byName.get(n) !== 1)).toEqual([]);
    expect(byName.get('b-fails')).toBe(2); // a 500, then the one retry of its policy
    const one = got.find((g) => g.name === 'b-7')!;
    expect(JSON.parse(one.body)).toEqual({ n: 'b-7' });
    expect(one.headers['content-type']).toBe('application/json');
    expect(one.headers['rt-api-token']).toBe('app-token-1');
    expect(one.headers['rt-job-due-time']).toBe(due);
  }, 60_000);

  it('stored the progress of every fire: after a restart nothing fires again', async () => {
    await sc!.close();
    const before = got.length;
    sc = await sidecarFor({ appPort: port, dataDir: dir.path, appApiToken: 'app-token-1' });
    // no job has a next fire in the store, and a job made now is delivered (and done) alone
    expect(await listJobs()).toEqual([]);
    expect((await postJob(sc.base, 'after-restart', { dueTime: '0s' })).status).toBe(204);
    await waitJobDone(sc.base, 'after-restart');
    expect(got.slice(before).map((g) => g.name)).toEqual(['after-restart']);
    expect(((await (await fetch(`${sc.base}/v1.0-alpha1/jobs/b-1`)).json()) as { errorCode?: string }).errorCode).toBeDefined();
  }, 30_000);
});
