/** Test helpers for the jobs suites: a recording app, sidecars on temp data dirs, polling. */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';

export interface Received {
  name: string;
  body: string;
  contentType?: string;
  /** The rt-job-due-time header: with the name, the fire's idempotency key. */
  dueTime?: string;
  at: number;
}

export interface RecordingApp {
  port: number;
  received: Received[];
  /** Status to answer per job name (default 200); a function may vary it per call. */
  status: (name: string, n: number) => number;
  close(): Promise<void>;
}

/** A stand-in app that records every POST /job/<name>. */
export async function startRecordingApp(): Promise<RecordingApp> {
  const received: Received[] = [];
  const counts = new Map<string, number>();
  const app: RecordingApp = {
    port: 0,
    received,
    status: () => 200,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const m = /^\/job\/(.+)$/.exec(req.url ?? '');
      if (req.method === 'POST' && m) {
        const name = decodeURIComponent(m[1]);
        const n = (counts.get(name) ?? 0) + 1;
        counts.set(name, n);
        received.push({ name, body: Buffer.concat(chunks).toString('utf8'), contentType: req.headers['content-type'], dueTime: req.headers['rt-job-due-time'] as string | undefined, at: Date.now() });
        res.statusCode = app.status(name, n);
      } else res.statusCode = 404;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  app.port = (server.address() as { port: number }).port;
  return app;
}

export function tempDir(prefix = 'rt-jobs-'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export async function sidecarFor(opts: Partial<StartOptions> & { dataDir: string }): Promise<Sidecar & { base: string }> {
  const s = await startSidecar({ appId: 'jobs-test', httpPort: 0, grpcPort: 0, logger: pino({ level: process.env.RT_TEST_LOG ?? 'silent' }), ...opts });
  return Object.assign(s, { base: `http://127.0.0.1:${s.httpPort}` });
}

export async function waitFor<T>(fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Waits until the job is gone from the scheduler's store: every fire it will ever have is done
 * (acked, or given up on), so no later delivery of it can come. GET answers JOB_NOT_FOUND.
 */
export async function waitJobDone(base: string, name: string, timeoutMs = 5000): Promise<void> {
  await waitFor(
    async () => {
      const res = await fetch(`${base}/v1.0-alpha1/jobs/${name}`);
      return res.status === 500 && /not found/.test(await res.text());
    },
    timeoutMs,
    `job ${name} done`,
  );
}

export async function postJob(base: string, name: string, body: unknown, prefix = '/v1.0-alpha1'): Promise<Response> {
  return fetch(`${base}${prefix}/jobs/${name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}
