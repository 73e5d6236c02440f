/**
 * The sidecar ↔ rt scheduler link over TLS: the scheduler serves its certificate, the sidecar
 * verifies it against the CA in RT_SCHEDULER_TLS_CA_FILE; a client without the CA is refused.
 */
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerService } from '../../scheduler/src/grpc/proto.ts';
import { parseSchedulerArgs, startScheduler, type RunningScheduler, type SchedulerProcessOptions } from '../../scheduler/src/main.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { freePort } from '../services/net.ts';
import { postJob, sidecarFor, startRecordingApp, tempDir, waitFor, type RecordingApp } from '../jobs/helpers.ts';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

describe('scheduler gRPC over TLS (test CA from the openssl CLI)', () => {
  const dir = tempDir('rt-sched-tls-');
  let ca: TestCa;
  let sched: RunningScheduler;
  let app: RecordingApp;
  let sc: (Sidecar & { base: string }) | undefined;
  let port: number;

  beforeAll(async () => {
    ca = makeTestCa();
    writeFileSync(join(dir.path, 'server.crt'), ca.cert);
    writeFileSync(join(dir.path, 'server.key'), ca.key);
    port = await freePort();
    const opts = parseSchedulerArgs([
      '--port', String(port), '--data-dir', dir.path, '--log-level', 'error',
      '--tls-cert-file', join(dir.path, 'server.crt'), '--tls-key-file', join(dir.path, 'server.key'),
    ]) as SchedulerProcessOptions;
    expect(opts.tls?.cert.toString()).toBe(ca.cert);
    sched = await startScheduler(opts, pino({ level: 'silent' }));
    app = await startRecordingApp();
  });
  afterAll(async () => {
    await sc?.close();
    await sched?.close();
    await app?.close();
    ca?.remove();
    dir.remove();
  });

  it('a sidecar with the CA connects, schedules and receives a trigger', async () => {
    process.env.RT_SCHEDULER_TLS_CA_FILE = ca.caFile;
    try {
      sc = await sidecarFor({ appPort: app.port, dataDir: dir.path, appId: 'tls-app', schedulerAddresses: [`127.0.0.1:${port}`] });
    } finally {
      delete process.env.RT_SCHEDULER_TLS_CA_FILE;
    }
    expect((await postJob(sc.base, 'over-tls', { dueTime: '0s', data: { via: 'tls' } })).status).toBe(204);
    const got = await waitFor(() => app.received.find((r) => r.name === 'over-tls'), 15_000, 'the trigger over TLS');
    expect(JSON.parse(got.body)).toEqual({ via: 'tls' });
  });

  it('a client that does not trust the CA cannot talk to it, nor can a plaintext one', async () => {
    const Ctor = schedulerService();
    for (const creds of [grpc.credentials.createSsl(), grpc.credentials.createInsecure()]) {
      const client = new Ctor(`127.0.0.1:${port}`, creds) as unknown as grpc.Client;
      await expect(new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 1500, (e) => (e ? reject(e) : resolve())))).rejects.toThrow();
      client.close();
    }
  });

  it('refuses half a TLS configuration with a usage error', () => {
    expect(() => parseSchedulerArgs(['--tls-cert-file', join(dir.path, 'server.crt')])).toThrow(/needs both --tls-cert-file and --tls-key-file/);
    expect(() => parseSchedulerArgs(['--tls-cert-file', '/nope.crt', '--tls-key-file', '/nope.key'])).toThrow(/--tls-cert-file \/nope\.crt: ENOENT/);
  });
});
