import { describe, expect, it } from 'vitest';
import { startSidecar } from '../sidecar/src/sidecar.ts';
import pino from 'pino';

describe('sidecar smoke', () => {
  it('starts on free ports, answers healthz and metadata, and stops', async () => {
    const s = await startSidecar({ appId: 'smoke', httpPort: 0, grpcPort: 0, logger: pino({ level: 'silent' }) });
    try {
      const base = `http://127.0.0.1:${s.httpPort}`;
      expect((await fetch(`${base}/v1.0/healthz`)).status).toBe(204);
      const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { id: string; scheduler: unknown };
      expect(md.id).toBe('smoke');
      expect(md.scheduler).toEqual({ connected_addresses: [] });
    } finally {
      await s.close();
    }
  });
});
