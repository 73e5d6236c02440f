/**
 * Where an actor lives. The sidecar's actor runtime asks this; standalone (`rt run`, or no placement
 * address configured) every registered type is served locally; with a placement service the table
 * it disseminates decides.
 */
export interface ActorHost {
  /** The app id of the host's sidecar. */
  appId: string;
  /** host:port of that sidecar's internal invocation server (mutual TLS when identity is on). */
  address: string;
  /** True when this sidecar is the host. */
  local: boolean;
}

export interface ActorPlacement {
  /** The actor types this sidecar hosts (from the app's /dapr/config); placement is told them. */
  setHostedTypes(types: string[]): void;
  /** Who serves this actor now; undefined when no host of the type is known. */
  lookup(actorType: string, actorId: string): ActorHost | undefined;
  /** True while lookups are held (ready() would wait): callers skip the wait otherwise. */
  readonly locked: boolean;
  /** Resolves when lookups may be answered (the table is known and not being updated). */
  ready(signal?: AbortSignal): Promise<void>;
  /**
   * Called when a new table comes, while lookups are held, before it is acknowledged to the
   * placement service (which unlocks every host once all have): the runtime ends the local actors
   * that moved away first. Absent where tables are not disseminated (local.ts).
   */
  onTable?(listener: () => Promise<void>): () => void;
  /** Called after every table change: the runtime deactivates local actors that moved away. */
  onChange(listener: () => void): () => void;
  close(): Promise<void>;
}
