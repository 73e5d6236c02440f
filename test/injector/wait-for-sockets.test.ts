/**
 * The sidecar side of classic (non-native) injection: `--wait-for-sockets` makes the runtime
 * wait for its component containers' sockets instead of racing them. The component is the
 * repo's example pluggable state store, as a real process started after the sidecar.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { parseSidecarArgs } from '../../cli/options.ts';
import { waitForSockets } from '../../sidecar/src/pluggable/wait.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { json, sidecarFor, startExample, tempDirs, writeComponents, type ExampleProcess, type TempDirs } from '../pluggable/helpers.ts';

let dirs: TempDirs | undefined;
let sidecar: Sidecar | undefined;
let example: ExampleProcess | undefined;
afterEach(async () => {
  await sidecar?.close();
  await example?.stop();
  dirs?.cleanup();
  sidecar = example = dirs = undefined;
});

describe('--wait-for-sockets', () => {
  it('the flag and RT_WAIT_FOR_SOCKETS give the socket names', () => {
    expect(parseSidecarArgs(['--app-id', 'a', '--wait-for-sockets', 'one, two'], false).options.waitForSockets).toEqual(['one', 'two']);
    expect(parseSidecarArgs(['--app-id', 'a'], false).options.waitForSockets).toBeUndefined();
  });

  it('a sidecar started before its component waits for the socket and then loads it', async () => {
    dirs = tempDirs();
    writeComponents(dirs.resources, [{ name: 'store', type: 'state.memstore', initTimeout: '1s' }]);
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const started = sidecarFor(dirs, 'waiter', { waitForSockets: ['memstore'], logger });
    let settled = false;
    void started.then(
      () => (settled = true),
      () => (settled = true),
    );
    // the component container starting late, on purpose: only once the sidecar looked and waits for it
    await vi.waitFor(() => expect(lines.some((l) => l.includes('waiting for pluggable component sockets: memstore'))).toBe(true), { timeout: 10_000, interval: 20 });
    expect(settled).toBe(false);
    example = await startExample(dirs.sockets, 'memstore');
    sidecar = await started;
    const base = `http://127.0.0.1:${sidecar.httpPort}`;
    expect((await fetch(`${base}/v1.0/state/store`, json([{ key: 'k', value: { v: 1 } }]))).status).toBe(204);
    expect(await (await fetch(`${base}/v1.0/state/store/k`)).json()).toEqual({ v: 1 });
  });

  it('gives up after its timeout and names the sockets still missing', async () => {
    dirs = tempDirs();
    const t0 = Date.now();
    expect(await waitForSockets(dirs.sockets, ['never', 'nope'], pino({ level: 'silent' }), 300)).toEqual(['never', 'nope']);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
  });
});
