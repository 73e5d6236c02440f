/**
 * Where a sidecar's resources come from: files (`--resources-path`, watched for changes) or, on a
 * cluster, the operator's stream. A source hands over the whole desired state each time; the
 * ResourceApplier diffs it against what is loaded, so both sources behave alike.
 */
import type { Resources } from './types.ts';

export interface ResourceSource {
  /** For logs: "files in ./resources", "operator at host:port". */
  readonly description: string;
  /** The desired state now (throws when it cannot be read). */
  list(): Promise<Resources>;
  /** Calls onChange with the whole desired state after every change, until close(). */
  watch(onChange: (desired: Resources) => void): void;
  /** Why the source cannot be reached right now, for /v1.0/healthz/outbound; undefined = fine. */
  problem(): string | undefined;
  close(): Promise<void>;
}

export function emptyResources(): Resources {
  return { components: [], subscriptions: [], httpEndpoints: [] };
}
