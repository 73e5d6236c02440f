/**
 * The workflows building block: picks the state store (the component flagged
 * `actorStateStore: "true"`, else an embedded SQLite file under the data dir), wires the
 * engine to the scheduler's internal jobs, and serves the gRPC and HTTP APIs.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SidecarContext } from '../context.ts';
import type { StateStore } from '../components/types.ts';
import { resourceApplier } from '../resources/setup.ts';
import { lockFileWithin } from './data-dir-lock.ts';
import { Engine } from './engine.ts';
import { taskHubImplementation } from './grpc.ts';
import { InstanceTable } from './instances.ts';
import { taskHubService } from './proto.ts';
import { ReplicaRegistry } from './replicas.ts';
import { registerRoutes } from './routes.ts';
import { Timers } from './timers.ts';
import { Workers } from './workers.ts';
import { WorkflowTracing } from '../tracing/workflows.ts';

/** How long a busy data-dir lock is waited for before the store is shared (see data-dir-lock.ts). */
const LOCK_WAIT_MS = 10_000;

/** Work items in flight per connected worker (the SDK workers queue at most ~110 before dropping). */
export const MAX_ITEMS_PER_WORKER = 100;

export async function setup(ctx: SidecarContext): Promise<{ workflows: Engine }> {
  const log = ctx.log.child({ scope: 'workflows' });
  const { appId, namespace, dataDir } = ctx.options;
  const fileBase = `workflows-${encodeURIComponent(appId)}`;

  let store: StateStore;
  let shared: boolean;
  let replicaId: string;
  let closeStore: (() => Promise<void>) | undefined;
  let unlock: (() => void) | undefined;
  const actor = ctx.components.actorStateStore();
  if (actor) {
    store = actor.store;
    shared = true;
    replicaId = stableReplicaId(dataDir, fileBase);
    log.info({ store: actor.name, replicaId }, 'workflow state in the actor state store');
  } else {
    const path = join(dataDir, `${fileBase}.db`);
    const { factory } = await import('../components/state/sqlite/index.ts');
    store = factory() as StateStore;
    await store.init(
      {
        name: 'rt-workflows',
        type: 'state.sqlite',
        version: 'v1',
        metadata: { connectionString: path, tableName: 'workflows' },
        secretKeys: [],
        initTimeoutMs: 30_000,
        ignoreErrors: false,
        scopes: [],
        annotations: {},
        source: 'embedded',
      },
      { appId, namespace, log },
    );
    closeStore = () => store.close();
    // the embedded file is ours alone unless another live sidecar of this app uses the same data
    // dir (`.owner`, not the `.lock` pid file of older versions, which is no SQLite file)
    const lock = await lockFileWithin(join(dataDir, `${fileBase}.owner`), LOCK_WAIT_MS, () =>
      log.info({ path }, 'the workflow data dir is locked (by a sidecar that is still running or just died): waiting'),
    );
    unlock = lock ?? undefined;
    shared = lock === undefined;
    replicaId = shared ? randomUUID() : 'local';
    if (shared) log.warn({ path }, 'another sidecar of this app uses the same data dir: workflow state is written with etag checks');
    log.info({ path }, 'workflow state in the embedded SQLite store');
  }

  const table = new InstanceTable({ store, prefix: `${appId}||wf||`, shared, replicaId, log });
  const workers = new Workers(log, MAX_ITEMS_PER_WORKER);
  const timers = new Timers(ctx.services.internalJobs, log);
  // tracing on: the engine's orchestration and activity spans (tracing/workflows.ts)
  const tracing = ctx.services.tracing ? new WorkflowTracing(ctx.services.tracing) : undefined;
  const engine = new Engine(table, workers, timers, log, appId, undefined, tracing);
  watchActorStore(ctx, engine, actor?.name, log);

  ctx.grpc.addService(() => ({ definition: taskHubService(), implementation: taskHubImplementation(engine, ctx.grpc) }));
  await registerRoutes(ctx.http, engine);

  const base = `rt.internal.${namespace}.${appId}`;
  ctx.metadata.addActorProvider(() => [
    { type: `${base}.workflow`, count: table.activeCount() },
    { type: `${base}.activity`, count: workers.activityCount() },
  ]);
  ctx.metadata.setWorkflowWorkersProvider(() => workers.connected);

  // replicas sharing a store watch each other and adopt the instances of one that dies
  const registry = shared ? new ReplicaRegistry(store, table.replicasKey, replicaId, log, async (dead) => void (await engine.adopt(dead))) : undefined;

  ctx.onClose(async () => {
    await registry?.leave();
    workers.endAll();
    await table.drain();
    engine.close();
    await closeStore?.();
    unlock?.();
  });

  await table.catalog.init();
  await engine.recover();
  await registry?.start();
  return { workflows: engine };
}

/**
 * In a pod, workflow state in the embedded file would be lost with the pod: without an actor state
 * store, new workflows are refused. The store is chosen at start; a change later (a resource hot
 * update) is reported and refused until the sidecar restarts, so running instances keep theirs:
 * the store in use is held (an update or removal of its Component is not applied, and shows in
 * /v1.0/healthz/outbound and the metadata), and another store flagged later is not taken up.
 */
function watchActorStore(ctx: SidecarContext, engine: Engine, inUse: string | undefined, log: SidecarContext['log']): void {
  const kubernetes = ctx.options.mode === 'kubernetes';
  if (kubernetes && !inUse) {
    engine.refuseStarts =
      'no actor state store is configured: in a pod, workflow state would live in the pod\'s filesystem and be lost with it; add a state store Component with metadata actorStateStore: "true" and restart the pod';
    log.warn(`workflows are refused: ${engine.refuseStarts}`);
  }
  ctx.metadata.setExtended('workflowStateStore', inUse ?? 'embedded');
  if (inUse) {
    resourceApplier(ctx)?.hold(inUse, 'workflows use it as their actor state store and cannot move their running instances; restart the sidecar to use the new version', (refused) =>
      ctx.metadata.setExtended('workflowStateStore', refused ? `${inUse} (a change of it was refused: restart to use it)` : inUse),
    );
  }
  ctx.components.onChange(() => {
    const now = ctx.components.actorStateStore()?.name;
    if (now === inUse) return;
    log.error(`the actor state store changed from ${inUse ?? 'none (embedded file)'} to ${now ?? 'none'}: workflows keep using ${inUse ?? 'the embedded file'} until the sidecar restarts`);
    ctx.metadata.setExtended('workflowStateStore', `${inUse ?? 'embedded'} (${now ?? 'none'} configured: restart to use it)`);
  });
}

/** The replica id kept in the data dir, so a restarted sidecar recognises its own leases. */
function stableReplicaId(dataDir: string, fileBase: string): string {
  const path = join(dataDir, `${fileBase}.replica`);
  try {
    const id = readFileSync(path, 'utf8').trim();
    if (/^[A-Za-z0-9-]{8,64}$/.test(id)) return id;
  } catch {
    // first start
  }
  const id = randomUUID();
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(path, id);
  return id;
}
