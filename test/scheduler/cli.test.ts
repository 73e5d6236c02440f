import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseSchedulerArgs, SchedulerUsageError, startScheduler } from '../../scheduler/src/main.ts';
import { freePort } from '../services/net.ts';
import { tempDir } from '../jobs/helpers.ts';

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
