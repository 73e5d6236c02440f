/**
 * A real sidecar for the runtime API tests: in-memory and SQLite state stores, a local.file
 * secret store, optional extra components and API token; plus a raw grpc-js client of
 * dapr.proto.runtime.v1.Dapr built from our protos, and the @dapr/dapr SDK client over gRPC.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import pino from 'pino';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';

export interface RuntimeSidecar {
  sidecar: Sidecar;
  dir: string;
  /** A raw client; `call` wraps it. */
  client: grpc.Client;
  call<T = Record<string, unknown>>(method: string, req: unknown, md?: Record<string, string>): Promise<T>;
  /** The call's gRPC error (fails when the call succeeds). */
  fail(method: string, req: unknown, md?: Record<string, string>): Promise<grpc.ServiceError>;
  /** A unary call by path with raw bytes (for methods our protos do not declare). */
  raw(method: string, body: Buffer, md?: Record<string, string>): Promise<Buffer>;
  sdk(token?: string): DaprClient;
  stop(): Promise<void>;
}

export function componentYaml(name: string, type: string, md: Record<string, string> = {}): string {
  const lines = Object.entries(md).map(([k, v]) => `    - name: ${k}\n      value: ${JSON.stringify(v)}`);
  return `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  metadata:${lines.length ? `\n${lines.join('\n')}` : ' []'}\n`;
}

export const SECRETS = { 'db-password': 's3cret', api: { key: 'k-1', region: 'eu' } };

const noop = () => undefined;
const quiet = { error: noop, warn: noop, info: noop, verbose: noop, debug: noop };

export async function startRuntimeSidecar(opts: Partial<StartOptions> & { extraComponents?: string[] } = {}): Promise<RuntimeSidecar> {
  const dir = await mkdtemp(join(tmpdir(), 'rt-grpc-api-'));
  const { extraComponents = [], ...start } = opts;
  try {
    await writeFile(join(dir, 'secrets.json'), JSON.stringify(SECRETS));
    const resources = join(dir, 'resources');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(resources);
    await writeFile(join(resources, 'mem.yaml'), componentYaml('mem', 'state.in-memory'));
    await writeFile(join(resources, 'lite.yaml'), componentYaml('lite', 'state.sqlite', { connectionString: join(dir, 'state.db') }));
    await writeFile(join(resources, 'vault.yaml'), componentYaml('vault', 'secretstores.local.file', { secretsFile: join(dir, 'secrets.json') }));
    for (const [i, y] of extraComponents.entries()) await writeFile(join(resources, `extra-${i}.yaml`), y);
    const sidecar = await startSidecar({
      appId: 'grpc-api',
      httpPort: 0,
      grpcPort: 0,
      dataDir: join(dir, 'data'),
      resourcesPaths: [resources],
      logger: pino({ level: 'silent' }),
      ...start,
    });
    const Client = runtimeClient();
    const client = new Client(`127.0.0.1:${sidecar.grpcPort}`, grpc.credentials.createInsecure());
    const meta = (md?: Record<string, string>) => {
      const m = new grpc.Metadata();
      for (const [k, v] of Object.entries(md ?? {})) m.set(k, v);
      return m;
    };
    const call = <T>(method: string, req: unknown, md?: Record<string, string>) =>
      new Promise<T>((resolve, reject) => {
        const fn = (client as unknown as Record<string, (r: unknown, m: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: T) => void) => void>)[method];
        fn.call(client, req, meta(md), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r)));
      });
    const fail = async (method: string, req: unknown, md?: Record<string, string>) => {
      try {
        await call(method, req, md);
      } catch (e) {
        return e as grpc.ServiceError;
      }
      throw new Error(`${method} succeeded; a failure was expected`);
    };
    const raw = (method: string, body: Buffer, md?: Record<string, string>) =>
      new Promise<Buffer>((resolve, reject) => {
        const id = (b: Buffer) => b;
        client.makeUnaryRequest(`/dapr.proto.runtime.v1.Dapr/${method}`, id, id, body, meta(md), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r as Buffer)));
      });
    let stopped = false;
    const sdks: DaprClient[] = [];
    return {
      sidecar,
      dir,
      client,
      call,
      fail,
      raw,
      sdk: (token?: string) => {
        const c = new DaprClient({
          daprHost: '127.0.0.1',
          daprPort: String(sidecar.grpcPort),
          communicationProtocol: CommunicationProtocolEnum.GRPC,
          daprApiToken: token,
          logger: { level: LogLevel.Error, service: quiet },
        });
        sdks.push(c);
        return c;
      },
      stop: async () => {
        if (stopped) return;
        stopped = true;
        for (const c of sdks) await c.stop().catch(() => undefined);
        client.close();
        await sidecar.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
}
