/** Test helpers: a small app that records what the sidecar delivers, and resource files. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { EventRouterBinding } from '../../../sidecar/src/components/bindings/eventgrid/index.ts';
import { startSidecar, type Sidecar } from '../../../sidecar/src/sidecar.ts';
import type { AzureStandIns } from '../../services/azure-standins.ts';
import { freePort } from '../../services/net.ts';

export interface Delivery {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface TestApp {
  port: number;
  received: Delivery[];
  /** Status the app answers deliveries with (default 200). */
  status: number;
  close(): Promise<void>;
}

export async function startTestApp(): Promise<TestApp> {
  const app: TestApp = { port: 0, received: [], status: 200, close: async () => undefined };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST') {
        app.received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.statusCode = app.status;
      } else {
        res.statusCode = 404; // discovery paths
      }
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  app.port = (server.address() as { port: number }).port;
  app.close = () =>
    new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return app;
}

/**
 * A Component resource file for the binding, metadata given as name → YAML scalar text.
 * `secrets` maps metadata names to secret names read from the secret store `secretStore`.
 */
export function componentYaml(
  name: string,
  metadata: Record<string, string>,
  type = 'bindings.cloud.eventrouter',
  secrets: { store: string; refs: Record<string, string> } = { store: '', refs: {} },
): string {
  const md = [
    ...Object.entries(metadata).map(([k, v]) => `    - name: ${k}\n      value: ${v}`),
    ...Object.entries(secrets.refs).map(([k, secret]) => `    - name: ${k}\n      secretKeyRef:\n        name: ${secret}`),
  ].join('\n');
  const auth = secrets.store ? `auth:\n  secretStore: ${secrets.store}\n` : '';
  return `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  initTimeout: 20s\n  metadata:\n${md}\n${auth}`;
}

/** A secret store reading environment variables that start with `prefix`. */
export function envSecretStoreYaml(name: string, prefix: string): string {
  return `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: secretstores.local.env\n  version: v1\n  metadata:\n    - name: prefix\n      value: ${prefix}\n`;
}

/** Quotes a value for YAML (JSON strings are valid YAML). */
export const q = (s: string) => JSON.stringify(s);

export interface Started {
  sidecar: Sidecar;
  base: string;
  dir: string;
  stop(): Promise<void>;
}

/** Starts a real sidecar with the given resource files. */
export async function startWith(files: Record<string, string>, appPort = 0, logger?: pino.Logger): Promise<Started> {
  const dir = mkdtempSync(join(tmpdir(), 'rt-eventgrid-'));
  for (const [n, text] of Object.entries(files)) writeFileSync(join(dir, n), text);
  const sidecar = await startSidecar({
    appId: 'egapp',
    httpPort: 0,
    grpcPort: 0,
    appPort,
    resourcesPaths: [dir],
    logger: logger ?? pino({ level: process.env.RT_TEST_LOG ?? 'silent' }),
    dataDir: join(dir, 'data'),
  }).catch((e) => {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  });
  return {
    sidecar,
    base: `http://127.0.0.1:${sidecar.httpPort}`,
    dir,
    stop: async () => {
      await sidecar.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function waitFor(cond: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A logger that keeps every line, to check what was (not) logged. */
export function capturingLogger(): { logger: pino.Logger; text(): string } {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (l: string) => void lines.push(l) });
  return { logger, text: () => lines.join('') };
}

/** The subscriber endpoint the tests configure: the ingress URL the service would call. */
export const ENDPOINT = 'https://events.example.test/api/events';

export const topicScope = (az: AzureStandIns) => `/subscriptions/${az.subscriptionId}/resourceGroups/rg1/providers/Microsoft.EventGrid/topics/orders`;

/** Input-direction metadata pointing at the stand-ins (values quoted for YAML). */
export function inputMetadata(az: AzureStandIns, port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    direction: q('input'),
    cloudTenantId: q(az.entra.tenantId),
    cloudSubscriptionId: q(az.subscriptionId),
    cloudClientId: q(az.clientId),
    cloudClientSecret: q(az.clientSecret),
    subscriberEndpoint: q(ENDPOINT),
    handshakePort: q(String(port)),
    handshakeAddress: q('127.0.0.1'),
    scope: q(topicScope(az)),
    azureAuthorityHost: q(az.entra.url),
    armEndpoint: q(az.arm.url),
    armPollInterval: q('20ms'),
    jwksRefreshCooldown: q('50ms'),
    ...extra,
  };
}

export type StartedInput = Started & { port: number; binding: EventRouterBinding };

/** A sidecar with one input binding, once its event subscription step has finished. */
export async function startInputBinding(
  az: AzureStandIns,
  app: TestApp,
  name: string,
  extra: Record<string, string> = {},
  logger?: pino.Logger,
  secretFrom?: { store: string; prefix: string },
  /** Where the ARM stand-in sends the validation handshake; default this webhook. */
  handshakeTarget?: string,
): Promise<StartedInput> {
  const port = await freePort();
  az.arm.handshakeTarget = handshakeTarget ?? `http://127.0.0.1:${port}/api/events`;
  const md = inputMetadata(az, port, extra);
  const files: Record<string, string> = {};
  if (secretFrom) {
    // the client secret comes from a secret store instead of the file
    delete md.cloudClientSecret;
    files['store.yaml'] = envSecretStoreYaml(secretFrom.store, secretFrom.prefix);
    files['eg.yaml'] = componentYaml(name, md, undefined, { store: secretFrom.store, refs: { cloudClientSecret: 'CLIENT_SECRET' } });
  } else {
    files['eg.yaml'] = componentYaml(name, md);
  }
  const s = await startWith(files, app.port, logger);
  const binding = s.sidecar.ctx.components.get(name)!.instance as EventRouterBinding;
  await waitFor(() => binding.subscriptionStatus !== 'pending' && binding.subscriptionStatus !== 'not-started', 15_000, 'subscription');
  return { ...s, port, binding };
}
