/**
 * A pluggable component whose socket appears after the sidecar started is taken up when a
 * Component naming it is added to the resource files, and a changed one is re-initialised: the
 * registry asks the pluggable block about types it does not know instead of failing.
 */
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { ok, sidecarFor, startTestServer, tempDirs, writeComponents, type TempDirs } from '../pluggable/helpers.ts';

describe('hot reload: pluggable components', () => {
  let dirs: TempDirs;
  let sidecar: Sidecar;
  const servers: grpc.Server[] = [];
  const inits: Record<string, string>[] = [];

  beforeAll(async () => {
    dirs = tempDirs();
    writeComponents(dirs.resources, [{ name: 'mem', type: 'state.in-memory' }]);
    sidecar = await sidecarFor(dirs, 'hot-pluggable');
  });

  afterAll(async () => {
    await sidecar?.close();
    for (const s of servers) s.forceShutdown();
    dirs?.cleanup();
  });

  it('a socket that appeared after start is discovered when a Component names it; an update re-initialises it; a removal unloads it', async () => {
    servers.push(
      await startTestServer(join(dirs.sockets, 'late.sock'), {
        StateStore: {
          Init: (call: grpc.ServerUnaryCall<{ metadata: { properties: Record<string, string> } }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
            inits.push(call.request.metadata.properties);
            cb(null, {});
          },
          Features: ok({ features: ['ETAG'] }),
          Ping: ok({}),
          Get: ok({ data: Buffer.from('"from-late"'), etag: { value: '1' } }),
        },
      }),
    );
    const base = `http://127.0.0.1:${sidecar.httpPort}`;
    writeComponents(dirs.resources, [{ name: 'mem', type: 'state.in-memory' }, { name: 'late', type: 'state.late', metadata: { v: '1' } }]);
    await vi.waitFor(() => expect(sidecar.ctx.components.get('late')).toBeDefined(), { timeout: 10_000 });
    const got = await fetch(`${base}/v1.0/state/late/k`);
    expect(got.status).toBe(200);
    expect(await got.json()).toBe('from-late');

    writeComponents(dirs.resources, [{ name: 'mem', type: 'state.in-memory' }, { name: 'late', type: 'state.late', metadata: { v: '2' } }]);
    await vi.waitFor(() => expect(inits).toEqual([{ v: '1' }, { v: '2' }]), { timeout: 10_000 });

    writeComponents(dirs.resources, [{ name: 'mem', type: 'state.in-memory' }]);
    await vi.waitFor(() => expect(sidecar.ctx.components.get('late')).toBeUndefined(), { timeout: 10_000 });
    expect((await fetch(`${base}/v1.0/state/late/k`)).status).toBe(400);
  });
});
