/**
 * What the sidecar asks of the app for its actors, as the reference runtime asks it (and the
 * SDKs' actor hosts serve it):
 *   PUT    /actors/<type>/<id>/method/<method>          the call's body and content type
 *   PUT    /actors/<type>/<id>/method/remind/<name>     {"data", "dueTime", "period"}
 *   PUT    /actors/<type>/<id>/method/timer/<name>      {"data", "callback", "dueTime", "period"}
 *   DELETE /actors/<type>/<id>                          deactivation
 * Over HTTP only: the reference's gRPC app callback has no actor methods, so an app served over
 * gRPC cannot host actors (the runtime says so when such an app declares types).
 */
import type { AppChannel, AppResponse } from '../app/channel.ts';

const DEACTIVATE_TIMEOUT_MS = 5000;

export const REENTRANCY_HEADERS = ['dapr-reentrancy-id', 'rt-reentrancy-id'] as const;

const seg = (s: string) => encodeURIComponent(s);
const actorPath = (type: string, id: string) => `/actors/${seg(type)}/${seg(id)}`;

export interface ReminderPayload {
  data: unknown;
  dueTime: string;
  period: string;
}

export interface TimerPayload extends ReminderPayload {
  callback: string;
}

export class ActorApp {
  private readonly app: AppChannel;
  /** Aborts the calls still at the app when the sidecar stops (the app channel's close waits for them). */
  private readonly stopping = new AbortController();

  constructor(app: AppChannel) {
    this.app = app;
  }

  invokeMethod(type: string, id: string, method: string, body: Uint8Array, headers: Record<string, string>): Promise<AppResponse> {
    return this.app.invoke({ method: 'PUT', path: `${actorPath(type, id)}/method/${seg(method)}`, body, headers, signal: this.stopping.signal });
  }

  fireReminder(type: string, id: string, name: string, payload: ReminderPayload): Promise<AppResponse> {
    return this.putJson(`${actorPath(type, id)}/method/remind/${seg(name)}`, payload);
  }

  fireTimer(type: string, id: string, name: string, payload: TimerPayload): Promise<AppResponse> {
    return this.putJson(`${actorPath(type, id)}/method/timer/${seg(name)}`, payload);
  }

  /** Bounded: a deactivation that hangs must not hold a shutdown. */
  deactivate(type: string, id: string): Promise<AppResponse> {
    return this.app.invoke({ method: 'DELETE', path: actorPath(type, id), timeoutMs: DEACTIVATE_TIMEOUT_MS, signal: this.stopping.signal });
  }

  private putJson(path: string, value: unknown): Promise<AppResponse> {
    return this.app.invoke({ method: 'PUT', path, body: JSON.stringify(value), headers: { 'content-type': 'application/json' }, signal: this.stopping.signal });
  }

  /** Ends every call still at the app (shutdown, after the drain). */
  abort(): void {
    this.stopping.abort(new Error('the sidecar is shutting down'));
  }
}
