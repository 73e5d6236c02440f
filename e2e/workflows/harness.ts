/**
 * Shared pieces of the workflow suites: a sidecar on free ports with its own data dir, quiet
 * SDK logging, and small HTTP helpers for the workflow API.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import pino from 'pino';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';
import { PROTO_PATH, type WorkItem } from '../../sidecar/src/workflows/proto.ts';

export interface TestSidecar {
  sidecar: Sidecar;
  grpcAddress: string;
  base: string;
  dataDir: string;
  stop(): Promise<void>;
}

export async function sidecarForTest(appId: string, extra: Partial<StartOptions> = {}): Promise<TestSidecar> {
  const dataDir = extra.dataDir ?? mkdtempSync(join(tmpdir(), `rt-wf-${appId}-`));
  const sidecar = await startSidecar({ appId, httpPort: 0, grpcPort: 0, dataDir, logger: pino({ level: process.env.RT_TEST_LOG ?? 'silent' }), ...extra });
  return {
    sidecar,
    dataDir,
    grpcAddress: `127.0.0.1:${sidecar.grpcPort}`,
    base: `http://127.0.0.1:${sidecar.httpPort}`,
    stop: async () => {
      await sidecar.close();
      if (!extra.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The SDKs log every work item with console.log/info; tests keep their output readable. */
export function quietSdkLogs(): () => void {
  const saved = { log: console.log, info: console.info, error: console.error, warn: console.warn };
  console.log = () => undefined;
  console.info = () => undefined;
  if (!process.env.RT_TEST_LOG) {
    console.error = () => undefined;
    console.warn = () => undefined;
  }
  return () => Object.assign(console, saved);
}

export async function waitUntil<T>(fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface HttpInstance {
  instanceID: string;
  workflowName: string;
  createdAt: string;
  lastUpdatedAt: string;
  runtimeStatus: string;
  properties: Record<string, string>;
}

export async function getInstance(base: string, id: string): Promise<HttpInstance | undefined> {
  const res = await fetch(`${base}/v1.0/workflows/rt/${encodeURIComponent(id)}`);
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw new Error(`GET instance ${id}: ${res.status} ${await res.text()}`);
  return (await res.json()) as HttpInstance;
}

export async function waitForStatus(base: string, id: string, statuses: string[], timeoutMs = 20_000): Promise<HttpInstance> {
  return waitUntil(async () => {
    const i = await getInstance(base, id);
    return i && statuses.includes(i.runtimeStatus) ? i : undefined;
  }, timeoutMs, `instance ${id} to reach ${statuses.join('/')}`);
}

const WORKER = fileURLToPath(new URL('./fixtures/worker.ts', import.meta.url));

/** Starts the durabletask-js worker fixture in its own process (see fixtures/worker.ts). */
export function startWorker(address: string, markers: string, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [WORKER, address, markers], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } });
}

/** Lines the worker fixture wrote for one activity (one per execution). */
export function lines(markers: string, name: string): string[] {
  try {
    return readFileSync(join(markers, `${name}.log`), 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

/** kill -9 and wait for the exit. */
export async function killed(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  await new Promise<void>((r) => {
    p.once('exit', () => r());
    p.kill('SIGKILL');
  });
}

type RawCall = (req: unknown, cb: (err: grpc.ServiceError | null, res?: unknown) => void) => void;

/**
 * A TaskHubSidecarService client built from the sidecar's own proto: for the fields and RPCs
 * the installed SDKs do not have (recursive flags, versions, history, raw worker answers).
 */
export interface RawTaskHub {
  call<T = Record<string, unknown>>(rpc: string, req: unknown): Promise<{ err: grpc.ServiceError | null; res?: T }>;
  /** Calls a server-streaming RPC. */
  stream<T>(rpc: string, req: unknown): grpc.ClientReadableStream<T>;
  /** Opens a GetWorkItems stream. */
  workItems(): grpc.ClientReadableStream<WorkItem>;
  close(): void;
}

export function rawTaskHub(address: string): RawTaskHub {
  const def = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true });
  const Svc = (grpc.loadPackageDefinition(def) as unknown as Record<string, grpc.ServiceClientConstructor>).TaskHubSidecarService;
  const client = new Svc(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & Record<string, RawCall>;
  const stream = <T>(rpc: string, req: unknown) => (client as unknown as Record<string, (r: unknown) => grpc.ClientReadableStream<T>>)[rpc](req);
  return {
    stream,
    call: <T>(rpc: string, req: unknown) => new Promise<{ err: grpc.ServiceError | null; res?: T }>((resolve) => client[rpc](req, (err, res) => resolve({ err, res: res as T }))),
    workItems: () => stream<WorkItem>('GetWorkItems', {}),
    close: () => client.close(),
  };
}
