/** What the suites that export a sidecar's spans to a real Jaeger share: polling, the Configuration, a gRPC app, the sidecar. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { PROTO_DIR } from '../../sidecar/src/grpc/runtime/proto.ts';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';
import type { Jaeger } from '../services/jaeger.ts';

/** Polls `get` until it gives a value (deadline, no fixed sleeps of 100 ms or more). */
export async function eventually<T>(get: () => T | undefined, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts workflow `flow` as instance `id` on `sidecar` over HTTP, with input 1, under `traceparent`. */
export function startFlow(sidecar: Sidecar, id: string, traceparent: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/workflows/dapr/flow/start?instanceID=${id}`, { method: 'POST', headers: { traceparent }, body: '1' });
}

/** Waits (20 s at most) until workflow instance `id` on `sidecar` has `status`; the status it last had. */
export async function workflowStatus(sidecar: Sidecar, id: string, status: string, ms = 20_000): Promise<string> {
  const read = async () => ((await (await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/workflows/dapr/${id}`)).json()) as { runtimeStatus: string }).runtimeStatus;
  let now = '';
  for (const end = Date.now() + ms; (now = await read()) !== status && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
  return now;
}

/** Writes a Configuration that samples every trace and exports it to `jaeger` over OTLP/gRPC. */
export function writeTracingConfig(path: string, jaeger: Jaeger): Promise<void> {
  return writeFile(path, stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'tracing' }, spec: { tracing: { samplingRate: '1', otel: { endpointAddress: jaeger.otlpGrpcEndpoint, isSecure: false, protocol: 'grpc' } } } }));
}

/** A gRPC app on loopback serving these AppCallback methods (and `more`, other services); its server and port. */
export async function startCallbackApp(callbacks: grpc.UntypedServiceImplementation, more: (server: grpc.Server) => void = () => undefined): Promise<{ server: grpc.Server; port: number }> {
  const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, includeDirs: [join(import.meta.dirname, '../../sidecar/src/app/proto'), PROTO_DIR] });
  const server = new grpc.Server();
  server.addService(def['dapr.proto.runtime.v1.AppCallback'] as grpc.ServiceDefinition, callbacks);
  more(server);
  const port = await new Promise<number>((res, rej) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  return { server, port };
}

/** A sidecar of `appId` on free ports with the resources in `<dir>/r` and the Configuration at `<dir>/config.yaml`, quiet. */
export function startTracedSidecar(dir: string, appId: string, app?: { port: number; protocol: 'grpc' | 'http' }, extra: Partial<StartOptions> = {}): Promise<Sidecar> {
  return startSidecar({
    ...extra,
    appId,
    ...(app ? { appPort: app.port, appProtocol: app.protocol } : {}),
    httpPort: 0,
    grpcPort: 0,
    enableMetrics: false,
    dataDir: extra.dataDir ?? join(dir, 'd'),
    resourcesPaths: [join(dir, 'r')],
    configFile: join(dir, 'config.yaml'),
    logger: pino({ level: 'silent' }),
  });
}

/**
 * A temp folder for a traced sidecar: RT_HOME inside it, these components in `r/`, the tracing
 * Configuration toward `jaeger`; `remove` puts RT_HOME back and deletes the folder.
 */
export async function tracingFolder(prefix: string, jaeger: Jaeger, components: Record<string, unknown>[]): Promise<{ dir: string; remove(): Promise<void> }> {
  const prevHome = process.env.RT_HOME;
  const dir = await mkdtemp(join(tmpdir(), prefix));
  process.env.RT_HOME = join(dir, 'home');
  const remove = async () => {
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await mkdir(join(dir, 'r'));
    for (const c of components) await writeFile(join(dir, 'r', `${(c.metadata as { name: string }).name}.yaml`), stringify(c));
    await writeTracingConfig(join(dir, 'config.yaml'), jaeger);
    return { dir, remove };
  } catch (e) {
    await remove();
    throw e;
  }
}
