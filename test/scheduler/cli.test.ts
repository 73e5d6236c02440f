import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { GrpcSchedulerClient } from '../../scheduler/src/grpc/client.ts';
import { parseSchedulerArgs, SchedulerUsageError, startScheduler } from '../../scheduler/src/main.ts';
import { freePort } from '../services/net.ts';
import { tempDir, waitFor } from '../jobs/helpers.ts';

describe('rt scheduler options', () => {
  it('reads flags, with SQLite by default and etcd when endpoints are given', () => {
    const o = parseSchedulerArgs(['--port', '0', '--data-dir', '/tmp/x', '--partitions', '8', '--lease-ttl', '3', '--replica-id', 'r1', '--health-port', '0']);
    expect(o).toMatchObject({ port: 0, dataDir: '/tmp/x', etcdEndpoints: [], partitions: 8, leaseTtlSec: 3, replicaId: 'r1', listenAddress: '127.0.0.1' });
    expect(parseSchedulerArgs(['--etcd-endpoints', 'a:2379, b:2379'])).toMatchObject({ etcdEndpoints: ['a:2379', 'b:2379'], port: 50006, partitions: 16 });
    expect(parseSchedulerArgs(['-h'])).toBe('help');
  });

  it('says which flag is wrong', () => {
    expect(() => parseSchedulerArgs(['--port', '70000'])).toThrow(/--port must be a whole number from 0 to 65535/);
    expect(() => parseSchedulerArgs(['--lease-ttl', '1'])).toThrow(/--lease-ttl must be a whole number from 2/);
    expect(() => parseSchedulerArgs(['--nope'])).toThrow(SchedulerUsageError);
  });

  it('serves /healthz on the health port', async () => {
    const dir = tempDir('rt-sched-cli-');
    const healthPort = await freePort();
    const s = await startScheduler(
      { port: 0, listenAddress: '127.0.0.1', healthPort, dataDir: dir.path, etcdEndpoints: [], etcdPrefix: '/rt/scheduler', partitions: 16, leaseTtlSec: 5, replicaId: 'h', logLevel: 'silent' },
      pino({ level: 'silent' }),
    );
    try {
      const res = await fetch(`http://127.0.0.1:${healthPort}/healthz`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'ok', jobs: 0, store: expect.stringMatching(/^sqlite:/) });
    } finally {
      await s.close();
      dir.remove();
    }
  });
});

describe('rt scheduler token', () => {
  it('reads the token from a file or RT_SCHEDULER_TOKEN, and refuses an empty file', () => {
    const dir = tempDir('rt-sched-token-');
    try {
      writeFileSync(join(dir.path, 'token'), 's3cret\n');
      expect(parseSchedulerArgs(['--token-file', join(dir.path, 'token')])).toMatchObject({ token: 's3cret' });
      writeFileSync(join(dir.path, 'empty'), '\n');
      expect(() => parseSchedulerArgs(['--token-file', join(dir.path, 'empty')])).toThrow(/is empty/);
      expect(() => parseSchedulerArgs(['--token-file', join(dir.path, 'missing')])).toThrow(/--token-file/);
    } finally {
      dir.remove();
    }
  });

  it('answers calls without the token UNAUTHENTICATED; a sidecar with RT_SCHEDULER_TOKEN works', async () => {
    const dir = tempDir('rt-sched-token-');
    const s = await startScheduler(
      { port: 0, listenAddress: '127.0.0.1', dataDir: dir.path, etcdEndpoints: [], etcdPrefix: '/rt/scheduler', partitions: 16, leaseTtlSec: 5, replicaId: 't', logLevel: 'silent', token: 'tok-123' },
      pino({ level: 'silent' }),
    );
    const without = new GrpcSchedulerClient([s.server.address], { log: pino({ level: 'silent' }) });
    const wrong = new GrpcSchedulerClient([s.server.address], { log: pino({ level: 'silent' }), token: 'nope' });
    const right = new GrpcSchedulerClient([s.server.address], { log: pino({ level: 'silent' }), token: 'tok-123' });
    const key = { namespace: 'default', appId: 'a', owner: '', name: 'j' };
    try {
      await expect(without.schedule(key, { dueTime: '1h' }, false)).rejects.toMatchObject({ message: expect.stringMatching(/scheduler token/) });
      await expect(wrong.get(key)).rejects.toMatchObject({ message: expect.stringMatching(/scheduler token/) });
      await right.schedule(key, { dueTime: '1h', dataJson: '1' }, false);
      expect((await right.get(key)).spec.dataJson).toBe('1');
      // a stream without the token is refused, so it never shows as connected
      without.watch({ namespace: 'default', appId: 'a' }, async () => true);
      right.watch({ namespace: 'default', appId: 'a' }, async () => true);
      await waitFor(() => right.connectedAddresses().length === 1, 5000, 'token stream connected');
      expect(without.connectedAddresses()).toEqual([]);
    } finally {
      await without.close();
      await wrong.close();
      await right.close();
      await s.close();
      dir.remove();
    }
  });
});
