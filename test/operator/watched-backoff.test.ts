/**
 * The informer's restart backoff (shared/kube/watched.ts on shared/backoff.ts), without a cluster:
 * a client that fails, then lists. The waits grow from 200 ms, a success starts them over, and
 * stop() ends a wait at once instead of sitting it out.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../../shared/kube/client.ts';
import { Watched, type KubeObject } from '../../shared/kube/watched.ts';
import { waitFor } from '../jobs/helpers.ts';

/** A client whose list fails `failures` times, then answers; its first `watchFailures` watches fail, the others end when aborted. */
function flakyClient(failures: number, watchFailures = 0) {
  const calls = { get: 0, watch: 0 };
  const client = {
    get: async () => {
      if (calls.get++ < failures) throw new Error('connect ECONNREFUSED');
      return { metadata: { resourceVersion: '1' }, items: [] };
    },
    watch: (_path: string, _q: unknown, _on: unknown, signal: AbortSignal) => {
      if (calls.watch++ < watchFailures) return Promise.reject(new Error('connection reset'));
      return new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
    },
  };
  return { client: client as unknown as KubeClient, calls };
}

function recordingLog() {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push((JSON.parse(l) as { msg: string }).msg) });
  return { log, lines };
}

describe('informer restart backoff', () => {
  it('waits 200 ms, then 400 ms, lists once the server answers, and starts over at 200 ms', async () => {
    const { client, calls } = flakyClient(2, 1);
    const { log, lines } = recordingLog();
    const w = new Watched<KubeObject>(client, 'things', '/api/v1/things', log, () => {});
    w.start();
    await w.whenSynced();
    expect(calls.get).toBe(3);
    // the first watch fails: the waits start over
    await waitFor(() => calls.watch === 2, 5000, 'the second watch');
    expect(lines.filter((l) => l.includes('starting again')).map((l) => /in (\d+) ms/.exec(l)?.[1])).toEqual(['200', '400', '200']);
    expect(lines).toContain('watch of things resumed');
    await w.stop();
  });

  it('stop() ends a backoff wait at once', async () => {
    const { client, calls } = flakyClient(Infinity);
    const { log, lines } = recordingLog();
    const w = new Watched<KubeObject>(client, 'things', '/api/v1/things', log, () => {});
    w.start();
    await waitFor(() => lines.some((l) => l.includes('starting again in 200 ms')), 5000, 'the first wait');
    // the wait has 200 ms to go; a timer of 150 ms cannot fire before stop() is done
    const first = await Promise.race([w.stop().then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still waiting'), 150))]);
    expect(first).toBe('stopped');
    expect(calls.get).toBe(1);
  });
});
