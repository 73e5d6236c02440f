/**
 * The shapes of the actor operations, shared by the runtime (service.ts), its transports and the
 * calls between hosts (peer-calls.ts), so none of them imports another for its types.
 */
import type { AppResponse } from '../app/channel.ts';
import type { ActorHost } from './placement/types.ts';
import type { StoredReminder } from './reminders.ts';

export interface ActorStateOperation {
  operation: string;
  key: string;
  /** upsert: the value's bytes. */
  value?: Uint8Array;
  metadata?: Record<string, string>;
}

export interface ScheduleRequest {
  dueTime?: string;
  period?: string;
  ttl?: string;
  data?: unknown;
}

export interface TimerRequest extends ScheduleRequest {
  callback?: string;
}

/**
 * The operations that run where the actor is active, sent to its host's sidecar. Each rejects
 * with the host's own ApiError when the host answered one, with HostUnreachable when the call
 * never reached it (safe to send again), and with any other error when it broke off midway.
 */
export interface ActorPeers {
  invoke(host: ActorHost, type: string, id: string, method: string, body: Uint8Array, headers: Record<string, string>): Promise<AppResponse>;
  getState(host: ActorHost, type: string, id: string, key: string): Promise<Uint8Array | undefined>;
  transact(host: ActorHost, type: string, id: string, ops: ActorStateOperation[]): Promise<void>;
  createTimer(host: ActorHost, type: string, id: string, name: string, req: TimerRequest): Promise<void>;
  deleteTimer(host: ActorHost, type: string, id: string, name: string): Promise<void>;
  fireReminder(host: ActorHost, r: StoredReminder): Promise<void>;
  close(): Promise<void>;
}

/** The host's sidecar could not be reached: the call was never sent (refused, no route, no socket). */
export class HostUnreachable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HostUnreachable';
  }
}

/**
 * The host's sidecar got the call but does not host the actor by its own table (the two tables
 * differ while placement moves actors): the caller waits for its table to change and tries again.
 */
export const NOT_HOSTED_HERE = 'ERR_ACTOR_NOT_HOSTED_HERE';
