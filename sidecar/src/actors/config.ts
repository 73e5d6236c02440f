/**
 * The app's actor settings, from its config discovery (GET /rt/config, else /dapr/config; see
 * app/discovery.ts): the types it hosts and how the runtime treats them. Durations are Go
 * durations as the reference reads them; a value that does not parse keeps its default (the
 * app's answer is not a request we can refuse), and the runtime logs which.
 */
import { parseDuration } from '../../../shared/duration.ts';

export interface ReentrancyConfig {
  enabled: boolean;
  /** Calls of one reentrant chain that may be in one actor at once. */
  maxStackDepth: number;
}

export interface ActorTypeConfig {
  idleTimeoutMs: number;
  drainOngoingCallTimeoutMs: number;
  drainRebalancedActors: boolean;
  reentrancy: ReentrancyConfig;
  remindersStoragePartitions: number;
}

export interface ActorsConfig {
  entities: string[];
  scanIntervalMs: number;
  /** Settings per hosted type: the app's defaults, overridden by its entitiesConfig entry. */
  types: Map<string, ActorTypeConfig>;
  /** Values that did not parse, for a warning. */
  ignored: string[];
}

/** The reference runtime's defaults. */
export const DEFAULTS: ActorTypeConfig & { scanIntervalMs: number } = {
  idleTimeoutMs: 60 * 60_000,
  scanIntervalMs: 30_000,
  drainOngoingCallTimeoutMs: 60_000,
  drainRebalancedActors: true,
  reentrancy: { enabled: false, maxStackDepth: 32 },
  remindersStoragePartitions: 0,
};

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads the app's answer; anything not an object gives no types. */
export function parseActorsConfig(body: unknown): ActorsConfig {
  const ignored: string[] = [];
  const root = isObj(body) ? body : {};
  const entities = strings(root.entities);
  const base = typeConfig(root, { ...DEFAULTS, reentrancy: { ...DEFAULTS.reentrancy } }, '', ignored);
  const scanIntervalMs = durationOf(root.actorScanInterval, DEFAULTS.scanIntervalMs, 'actorScanInterval', ignored, true);
  const types = new Map<string, ActorTypeConfig>();
  for (const t of entities) types.set(t, base);
  if (Array.isArray(root.entitiesConfig)) {
    root.entitiesConfig.forEach((e, i) => {
      if (!isObj(e)) return;
      const own = typeConfig(e, base, `entitiesConfig[${i}].`, ignored);
      for (const t of strings(e.entities)) if (types.has(t)) types.set(t, own);
    });
  }
  return { entities, scanIntervalMs, types, ignored };
}

/**
 * remindersStoragePartitions split the reference's reminders into several state records; since
 * reminders moved to its scheduler the setting has no effect there, nor here (reminders are
 * jobs). Accepted, and said at debug level: the line to log, or undefined when no type sets it.
 */
export function reminderPartitionsNote(c: ActorsConfig): string | undefined {
  const set = [...c.types].filter(([, t]) => t.remindersStoragePartitions > 0).map(([type, t]) => `${type}: ${t.remindersStoragePartitions}`);
  if (set.length === 0) return undefined;
  return `remindersStoragePartitions (${set.join(', ')}) has no effect: reminders are jobs in the scheduler, not records in the actor state store`;
}

function typeConfig(o: Obj, base: ActorTypeConfig, where: string, ignored: string[]): ActorTypeConfig {
  const r = isObj(o.reentrancy) ? o.reentrancy : undefined;
  return {
    idleTimeoutMs: durationOf(o.actorIdleTimeout, base.idleTimeoutMs, `${where}actorIdleTimeout`, ignored, true),
    drainOngoingCallTimeoutMs: durationOf(o.drainOngoingCallTimeout, base.drainOngoingCallTimeoutMs, `${where}drainOngoingCallTimeout`, ignored, false),
    drainRebalancedActors: typeof o.drainRebalancedActors === 'boolean' ? o.drainRebalancedActors : base.drainRebalancedActors,
    reentrancy: {
      enabled: typeof r?.enabled === 'boolean' ? r.enabled : base.reentrancy.enabled,
      maxStackDepth: positiveInt(r?.maxStackDepth) ?? base.reentrancy.maxStackDepth,
    },
    remindersStoragePartitions: positiveInt(o.remindersStoragePartitions) ?? base.remindersStoragePartitions,
  };
}

function durationOf(v: unknown, fallback: number, name: string, ignored: string[], positive: boolean): number {
  if (v === undefined || v === null || v === '') return fallback;
  const ms = typeof v === 'string' ? parseDuration(v) : undefined;
  if (ms === undefined || ms < 0 || (positive && ms === 0)) {
    ignored.push(`${name} ${JSON.stringify(v)}`);
    return fallback;
  }
  return ms;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? [...new Set(v.filter((e): e is string => typeof e === 'string' && e !== ''))] : [];
}
