/**
 * What every pluggable component adapter shares: finding its socket (waiting up to initTimeout),
 * checking the socket serves its API, Init with the spec's metadata, health (Ping) and
 * reconnecting, with Init again, when the component process comes back.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Component, ComponentContext, ComponentSpec } from '../components/types.ts';
import { Backoff } from '../../../shared/backoff.ts';
import { API_SERVICES, type PluggableApi } from './apis.ts';
import { Connection } from './connection.ts';
import type { SocketDirectory, SocketInfo } from './discovery.ts';
import { isServiceError, isUnavailable, toComponentError, type CallContext } from './errors.ts';

export interface PluggableHost {
  sockets: SocketDirectory;
  log: Logger;
  /** Added to the "socket not found" error (e.g. that the type is not built in either). */
  missingHint?: string;
  /** Ping period while healthy; default 5 s. */
  healthIntervalMs?: number;
}

const PING_TIMEOUT_MS = 2000;
/** Pings of an unhealthy component: 100 ms doubling to 2 s. */
const RETRY_BACKOFF = { initialMs: 100, maxMs: 2000 };

/** Part of initTimeout spent waiting for the socket, leaving time for Init itself. */
export function socketWaitBudget(initTimeoutMs: number): number {
  return Math.max(0, initTimeoutMs - Math.min(1000, Math.floor(initTimeoutMs / 5)));
}

export abstract class PluggableComponent implements Component {
  protected readonly host: PluggableHost;
  /** `<name>` of the socket `<name>.sock`. */
  readonly socketName: string;
  protected abstract readonly api: PluggableApi;
  protected spec!: ComponentSpec;
  protected ctx!: ComponentContext;
  protected conn!: Connection;
  protected services = new Set<string>();
  private healthy = true;
  private recovering: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly retry = new Backoff(RETRY_BACKOFF);
  private closed = false;
  private readonly recoveredHooks: (() => void)[] = [];

  constructor(host: PluggableHost, socketName: string) {
    this.host = host;
    this.socketName = socketName;
  }

  /** Init (and Features) on every service this adapter uses; run again after a reconnect. */
  protected abstract initialize(): Promise<void>;
  /** The service whose Ping tells the component's health. */
  protected abstract pingService(): string;
  abstract capabilities(): string[];

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    this.spec = spec;
    this.ctx = ctx;
    const info: SocketInfo = await this.host.sockets.locate(this.socketName, Date.now() + socketWaitBudget(spec.initTimeoutMs)).catch((e: Error) => {
      throw this.host.missingHint ? new Error(`${e.message}; ${this.host.missingHint}`) : e;
    });
    this.services = info.services;
    if (!API_SERVICES[this.api].some((s) => info.services.has(s))) {
      const served = [...info.services].sort().join(', ') || 'no services';
      throw new Error(
        `the socket ${info.path} does not serve the ${this.api} API (${API_SERVICES[this.api].join(' or ')}); it serves: ${served}`,
      );
    }
    this.conn = new Connection(info.path, spec.name);
    try {
      await this.initialize();
    } catch (e) {
      throw toComponentError(e, { what: this.describe(), path: info.path, method: 'Init' });
    }
    this.conn.watchConnection(() => this.markUnhealthy(new Error('the connection to the socket was lost')));
    this.schedule(this.host.healthIntervalMs ?? 5000);
  }

  protected describe(): string {
    return `${this.api} component "${this.spec.name}" (${this.spec.type})`;
  }

  /** A unary call that maps errors and notices a dead socket. */
  protected async call<Res>(service: string, method: string, req: unknown, c: Partial<CallContext> = {}): Promise<Res> {
    if (!this.healthy) await this.recover().catch(() => undefined); // one quick try; the call reports the error
    try {
      return await this.conn.unary<Res>(service, method, req);
    } catch (e) {
      if (isUnavailable(e)) this.markUnhealthy(e as Error);
      throw toComponentError(e, { what: this.describe(), path: this.conn.path, method, ...c });
    }
  }

  /** Init request of every component service: the spec's metadata as properties. */
  protected initRequest(): { metadata: { properties: Record<string, string> } } {
    return { metadata: { properties: { ...this.spec.metadata } } };
  }

  /** Init with the spec's metadata, then Features: what the component reports it supports. */
  protected async initAndFeatures(service: string): Promise<string[]> {
    await this.conn.unary(service, 'Init', this.initRequest());
    try {
      return (await this.conn.unary<{ features: string[] }>(service, 'Features', {})).features;
    } catch (e) {
      if (isServiceError(e) && e.code === grpc.status.UNIMPLEMENTED) return []; // a component without Features has none
      throw e;
    }
  }

  /** Fails while the component is unreachable; reconnects (and re-runs Init) when it is back. */
  async ping(): Promise<void> {
    if (!this.healthy) {
      await this.recover();
      return;
    }
    try {
      await this.conn.unary(this.pingService(), 'Ping', {}, PING_TIMEOUT_MS);
    } catch (e) {
      this.markUnhealthy(e as Error);
      throw toComponentError(e, { what: this.describe(), path: this.conn.path, method: 'Ping' });
    }
  }

  isHealthy(): boolean {
    return this.healthy;
  }

  /** Run after a reconnect (e.g. to reopen an input binding's stream). */
  protected onRecovered(fn: () => void): void {
    this.recoveredHooks.push(fn);
  }

  protected markUnhealthy(why: Error): void {
    if (this.closed || !this.healthy) return;
    this.healthy = false;
    this.retry.reset();
    this.host.log.warn({ component: this.spec.name, socket: this.conn.path }, `pluggable ${this.describe()} is unhealthy: ${why.message}; reconnecting`);
    this.schedule(this.retry.next());
  }

  /** One attempt: Ping, then Init again (a restarted component has lost its Init). */
  private recover(): Promise<void> {
    this.recovering ??= (async () => {
      try {
        await this.conn.unary(this.pingService(), 'Ping', {}, PING_TIMEOUT_MS);
        await this.initialize();
        if (!this.healthy && !this.closed) {
          this.healthy = true;
          this.host.log.info({ component: this.spec.name, socket: this.conn.path }, `pluggable ${this.describe()} is reachable again`);
          for (const fn of this.recoveredHooks) fn();
        }
      } catch (e) {
        throw toComponentError(e, { what: this.describe(), path: this.conn.path, method: 'Ping' });
      } finally {
        this.recovering = undefined;
      }
    })();
    return this.recovering;
  }

  /** The background health loop: Ping every interval while healthy, retry with backoff while not. */
  private schedule(ms: number): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const interval = this.host.healthIntervalMs ?? 5000;
    try {
      await this.ping();
      this.schedule(interval);
    } catch {
      this.schedule(this.healthy ? interval : this.retry.next());
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.conn?.close();
  }
}
