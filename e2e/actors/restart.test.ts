/**
 * Actors through the real `rt sidecar` process: an app in the test hosting a type, state on a
 * real PostgreSQL (actorStateStore), a reminder that fires, then fires again after the sidecar
 * process is stopped and a new one starts on the same data dir (the embedded scheduler's file);
 * the counter kept in actor state reads back through the new process.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { componentYaml } from '../../test/grpc/harness.ts';
import { eventually } from '../../test/configuration/helpers.ts';
import { requireService } from '../../test/services/ci.ts';
import { freePort } from '../../test/services/net.ts';
import { dropStateTables, postgresTarget } from '../../test/services/postgres.ts';
import { startActorApp, type ActorTestApp } from '../../test/actors/app.ts';
import { runRt, until, type RtProcess } from '../rt-process.ts';

const pg = await postgresTarget();
const havePg = requireService('PostgreSQL', pg.available, `nothing answers at ${pg.url}`);

let dir: string;
let app: ActorTestApp;
let rt: RtProcess | undefined;
let httpPort: number;
const appId = `actors-e2e-${randomUUID().slice(0, 8)}`;
const table = `actors_${randomUUID().slice(0, 8)}`;

async function startRt(): Promise<void> {
  httpPort = await freePort();
  const grpcPort = await freePort();
  app.sidecarPort = httpPort;
  rt = runRt(['sidecar', '--app-id', appId, '--app-port', String(app.port), '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--metrics-port', '0', '--resources-path', join(dir, 'resources'), '--data-dir', join(dir, 'data'), '--log-level', 'warn'], { RT_HOME: join(dir, 'home') });
  let known = false;
  const poll = setInterval(() => {
    fetch(`http://127.0.0.1:${httpPort}/v1.0/metadata`)
      .then((r) => r.json())
      .then((md) => (known = !!(md as { actors?: { type: string }[] }).actors?.some((a) => a.type === 'Counter')))
      .catch(() => undefined);
  }, 100);
  try {
    await until(rt, () => known, 30_000);
  } finally {
    clearInterval(poll);
  }
}

beforeAll(async () => {
  if (!havePg) return;
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-e2e-'));
  await mkdir(join(dir, 'resources'));
  await writeFile(join(dir, 'resources', 'store.yaml'), componentYaml('actorstore', 'state.postgresql', { connectionString: pg.url, tableName: table, actorStateStore: 'true' }));
  app = await startActorApp({ entities: ['Counter'] });
  await startRt();
}, 60_000);

afterAll(async () => {
  await rt?.stop();
  await app?.close();
  if (havePg) await dropStateTables(pg.url, [table]);
  if (dir) await rm(dir, { recursive: true, force: true });
}, 30_000);

describe.runIf(havePg)('actors through the rt sidecar process', () => {
  it('a reminder fires after the sidecar restarts, and actor state reads back', async () => {
    const id = randomUUID();
    const base = () => `http://127.0.0.1:${httpPort}`;
    for (let i = 1; i <= 2; i++) expect(await (await fetch(`${base()}/v1.0/actors/Counter/${id}/method/count`, { method: 'POST' })).json()).toBe(i);
    const put = await fetch(`${base()}/v1.0/actors/Counter/${id}/reminders/ping`, { method: 'PUT', body: JSON.stringify({ dueTime: '0s', period: '1s', data: 'hi' }) });
    expect(put.status).toBe(204);
    await eventually(() => app.log.reminders.some((r) => r.id === id), 'the first fire', 10_000);
    expect(await rt!.stop()).toBe(0);
    // the old process drained its actors: the app was told
    expect(app.log.deactivated.some((d) => d.id === id)).toBe(true);
    const before = app.log.reminders.filter((r) => r.id === id).length;
    await startRt();
    await eventually(() => app.log.reminders.filter((r) => r.id === id).length > before, 'a fire after the restart', 10_000);
    expect(app.log.reminders.at(-1)!.body).toEqual({ data: 'hi', dueTime: '0s', period: '1s' });
    expect(await (await fetch(`${base()}/v1.0/actors/Counter/${id}/state/n`)).text()).toBe('2');
    expect((await fetch(`${base()}/v1.0/actors/Counter/${id}/reminders/ping`, { method: 'DELETE' })).status).toBe(204);
  }, 60_000);
});
