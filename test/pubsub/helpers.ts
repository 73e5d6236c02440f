/** A real sidecar with pub/sub resources in a temp folder, and a real HTTP app that records deliveries. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { expect, vi } from 'vitest';
import { builtinCatalog, type ComponentCatalog } from '../../sidecar/src/components/catalog.ts';
import type { PubSub, PubSubMessage } from '../../sidecar/src/components/pubsub/types.ts';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';

export interface Delivery {
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  at: number;
}

export type Answer = (d: Delivery) => { status: number; body?: unknown } | Promise<{ status: number; body?: unknown }>;

export interface TestApp {
  port: number;
  deliveries: Delivery[];
  /** Decides each answer; default 200 {"status":"SUCCESS"}. */
  answer: Answer;
  /** What GET /dapr/subscribe answers (the rt path answers 404, as an app built for the ecosystem does). */
  subscribe: unknown[];
  /** Resolves once the sidecar asked for the app's subscriptions (they open right after). */
  discovered: Promise<void>;
  /**
   * Resolves once the sidecar at `base` asked for the app's subscriptions and lists every one of
   * them, and `topics` besides (the metadata lists a subscription once it is open on its component).
   */
  opened(base: string, topics?: string[]): Promise<void>;
  waitFor(pred: (ds: Delivery[]) => boolean, timeoutMs?: number): Promise<Delivery[]>;
  close(): Promise<void>;
}

/** `port`: where to listen (a free one when absent). */
export async function startApp(port = 0): Promise<TestApp> {
  let onDiscovered: () => void = () => undefined;
  const discovered = new Promise<void>((r) => (onDiscovered = r));
  const app: TestApp = {
    discovered,
    async opened(base, topics = []) {
      await discovered;
      const want = [...(app.subscribe as { topic: string }[]).map((s) => s.topic), ...topics];
      await vi.waitFor(
        async () => {
          const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string }[] };
          expect(want.filter((t) => !md.subscriptions.some((s) => s.topic === t))).toEqual([]);
        },
        { timeout: 10_000, interval: 20 },
      );
    },
    port: 0,
    deliveries: [],
    answer: () => ({ status: 200, body: { status: 'SUCCESS' } }),
    subscribe: [],
    async waitFor(pred, timeoutMs = 10_000) {
      const end = Date.now() + timeoutMs;
      while (!pred(app.deliveries)) {
        if (Date.now() > end) throw new Error(`timed out; deliveries so far: ${JSON.stringify(app.deliveries.map((d) => [d.path, d.body.id]))}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return app.deliveries;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        if (req.method === 'GET' && req.url === '/dapr/subscribe') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(app.subscribe));
          onDiscovered();
          return;
        }
        if (req.method !== 'POST') {
          res.writeHead(404).end();
          return;
        }
        const text = Buffer.concat(chunks).toString('utf8');
        const d: Delivery = { path: req.url ?? '', headers: req.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, at: Date.now() };
        app.deliveries.push(d);
        const a = await app.answer(d);
        res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body === undefined ? '' : JSON.stringify(a.body));
      })();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  app.port = (server.address() as { port: number }).port;
  return app;
}

export interface PubSubSidecar {
  sidecar: Sidecar;
  base: string;
  /** The resources folder the sidecar follows (hot updates). */
  resources: string;
  close(): Promise<void>;
}

/** Writes `yaml` into a resources folder and starts a sidecar on it; close() removes the folder. */
export async function startPubSubSidecar(yaml: string, opts: Partial<StartOptions> & { appId: string }): Promise<PubSubSidecar> {
  const dir = mkdtempSync(join(tmpdir(), 'rt-pubsub-'));
  mkdirSync(join(dir, 'resources'));
  writeFileSync(join(dir, 'resources', 'resources.yaml'), yaml);
  let sidecar: Sidecar;
  try {
    sidecar = await startSidecar({ httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [join(dir, 'resources')], logger: pino({ level: 'silent' }), ...opts });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    sidecar,
    base: `http://127.0.0.1:${sidecar.httpPort}`,
    resources: join(dir, 'resources'),
    close: async () => {
      await sidecar.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function component(name: string, type: string, metadata: Record<string, string> = {}): string {
  const md = Object.entries(metadata).map(([n, v]) => `    - name: ${n}\n      value: ${JSON.stringify(v)}`);
  return `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  metadata:${md.length ? `\n${md.join('\n')}` : ' []'}\n`;
}

/** A v1alpha1 Subscription of `topic` on pub/sub `mem`, delivered to `route`. */
export function subscription(name: string, topic: string, route: string): string {
  return `apiVersion: rt.io/v1alpha1\nkind: Subscription\nmetadata:\n  name: ${name}\nspec:\n  pubsubname: mem\n  topic: ${topic}\n  route: ${route}\n`;
}

export interface WatchedPubSub {
  /** The built-in catalog with pubsub.in-memory watched: pass it as the sidecar's `catalog`. */
  catalog: ComponentCatalog;
  /** Resolves once every message the subscriptions took is acknowledged (their handler resolved). */
  settled(timeoutMs?: number): Promise<void>;
  /** Subscriptions open on the component for `topic`: a publish reaches these, and only these. */
  open(topic: string): number;
}

/**
 * pubsub.in-memory as the sidecar gets it, watched: the messages each subscription's handler took
 * and has not acknowledged yet (a handler that rejects leaves its message to be delivered again).
 * With none left the component has nothing more to deliver: what must not happen (a delivery
 * again, a retry) is checked on that settled state, not by waiting a while.
 */
export function watchedInMemory(): WatchedPubSub {
  const catalog = builtinCatalog();
  const real = catalog.get('pubsub.in-memory')!;
  const unacked = new Set<Set<PubSubMessage>>();
  const open = new Map<string, number>();
  catalog.add('pubsub.in-memory', {
    ...real,
    load: async () => {
      const factory = await real.load();
      return () => {
        const c = factory() as PubSub;
        const subscribe = c.subscribe.bind(c);
        c.subscribe = (topic, metadata, handler) => {
          const taken = new Set<PubSubMessage>();
          unacked.add(taken);
          const sub = subscribe(topic, metadata, (m) => {
            taken.add(m);
            return handler(m).then(() => void taken.delete(m));
          });
          open.set(topic, (open.get(topic) ?? 0) + 1);
          let closed = false;
          return {
            close: () => {
              if (!closed) open.set(topic, open.get(topic)! - 1);
              closed = true;
              sub.close();
            },
          };
        };
        return c;
      };
    },
  });
  return {
    catalog,
    open: (topic) => open.get(topic) ?? 0,
    settled: (timeoutMs = 10_000) =>
      vi.waitFor(
        () => {
          const left = [...unacked].reduce((n, t) => n + t.size, 0);
          if (left > 0) throw new Error(`${left} message(s) not acknowledged`);
        },
        { timeout: timeoutMs, interval: 20 },
      ),
  };
}
