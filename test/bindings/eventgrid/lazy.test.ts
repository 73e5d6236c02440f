/**
 * The cloud SDKs are heavy: a sidecar without an input event-routing binding must never load
 * them. Checked in a fresh Node process that records every module it resolves.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../services/net.ts';
import { componentYaml, q } from './helpers.ts';

const SIDECAR = resolve(import.meta.dirname, '../../../sidecar/src/sidecar.ts');
const SUB = '6b0c5a3e-1f2d-4c3b-9a8e-7d6c5b4a3f21';

/** Starts a sidecar with the given resources in a child process; returns the @azure modules it resolved. */
function azureModulesLoaded(files: Record<string, string>): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'rt-eg-lazy-'));
  try {
    for (const [n, t] of Object.entries(files)) writeFileSync(join(dir, n), t);
    const script = `
      import { registerHooks } from 'node:module';
      const seen = new Set();
      registerHooks({ resolve(spec, ctx, next) { if (spec.startsWith('@azure/')) seen.add(spec); return next(spec, ctx); } });
      const { startSidecar } = await import(${JSON.stringify(SIDECAR)});
      const pino = (await import('pino')).default;
      const s = await startSidecar({ appId: 'lazy', httpPort: 0, grpcPort: 0, resourcesPaths: [${JSON.stringify(dir)}], dataDir: ${JSON.stringify(join(dir, 'data'))}, logger: pino({ level: 'silent' }) });
      await s.close();
      console.log(JSON.stringify([...seen]));
      process.exit(0);
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: resolve(import.meta.dirname, '../../..') });
    if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as string[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('event-routing binding loads the cloud SDKs lazily', () => {
  it('a sidecar without the binding, or with an output-only one, never loads them; an input one does', async () => {
    expect(azureModulesLoaded({})).toEqual([]);
    const out = componentYaml('out', { topicEndpoint: q('https://t.example.com/api/events'), accessKey: q('k') });
    expect(azureModulesLoaded({ 'out.yaml': out })).toEqual([]);
    const input = componentYaml('in', {
      cloudTenantId: q('contoso.onmicrosoft.com'),
      cloudSubscriptionId: q(SUB),
      cloudClientId: q('app'),
      cloudClientSecret: q('s'),
      subscriberEndpoint: q('https://hooks.example.com/e'),
      handshakePort: q(String(await freePort())),
      handshakeAddress: q('127.0.0.1'),
      scope: q(`/subscriptions/${SUB}/`),
      // nothing listens there: the start that follows init fails fast and stays on loopback
      azureAuthorityHost: q('https://127.0.0.1:1'),
      armEndpoint: q('https://127.0.0.1:1'),
    });
    expect(azureModulesLoaded({ 'in.yaml': input })).toEqual(expect.arrayContaining(['@azure/identity', '@azure/arm-eventgrid']));
  }, 90_000);
});
