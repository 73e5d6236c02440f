/**
 * What the actor runtime gets of the internal invocation port (invoke/setup.ts provides it as the
 * `internalPort` service): the port once it listens, which other sidecars reach this one at, and
 * the calls of the actor runtime that other sidecars forward here (marked ACTOR_CALL,
 * internal-http.ts), served by the internal server (internal-server.ts) instead of the app.
 */
import type { Readable } from 'node:stream';
import type { InvokeAnswer } from './call.ts';
import type { RequestHead } from './proto.ts';

/**
 * Serves a call of the actor runtime that another sidecar forwarded to this one (its head and
 * body); its answer, or an ApiError the calling sidecar gets as is.
 */
export type ActorCallHandler = (head: RequestHead, body: Readable | undefined) => Promise<InvokeAnswer>;

export interface InternalPort {
  /** Resolves once the port listens (with mTLS after the first certificate). */
  listening: Promise<{ port: number }>;
  serveActorCalls(handler: ActorCallHandler): void;
}
