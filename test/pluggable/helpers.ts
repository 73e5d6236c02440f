/**
 * Helpers of the pluggable component tests: temp folders, Component YAML, the example
 * component as a real child process, and in-process component servers that misbehave on purpose.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { componentsDefinition, COMPONENTS_PACKAGE } from '../../sidecar/src/pluggable/protos.ts';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';

export const ROOT = join(import.meta.dirname, '../..');
export const EXAMPLE_MAIN = join(ROOT, 'examples/pluggable-state/main.ts');

export interface TempDirs {
  root: string;
  sockets: string;
  resources: string;
  data: string;
  cleanup(): void;
}

/** Short paths: a Unix socket path must stay under ~107 bytes. */
export function tempDirs(): TempDirs {
  const root = mkdtempSync(join(tmpdir(), 'rtpl-'));
  const d = { root, sockets: join(root, 's'), resources: join(root, 'r'), data: join(root, 'd') };
  for (const p of [d.sockets, d.resources, d.data]) mkdirSync(p);
  return { ...d, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

export interface ComponentYaml {
  name: string;
  type: string;
  metadata?: Record<string, string>;
  initTimeout?: string;
  ignoreErrors?: boolean;
  scopes?: string[];
}

export function componentYaml(c: ComponentYaml): string {
  const md = Object.entries(c.metadata ?? {})
    .map(([k, v]) => `  - name: ${k}\n    value: "${v}"`)
    .join('\n');
  return [
    'apiVersion: rt.io/v1alpha1',
    'kind: Component',
    'metadata:',
    `  name: ${c.name}`,
    'spec:',
    `  type: ${c.type}`,
    '  version: v1',
    c.initTimeout ? `  initTimeout: ${c.initTimeout}` : '',
    c.ignoreErrors ? '  ignoreErrors: true' : '',
    md ? `  metadata:\n${md}` : '',
    c.scopes ? `scopes:\n${c.scopes.map((s) => `- ${s}`).join('\n')}` : '',
  ]
    .filter(Boolean)
    .join('\n');
}

export function writeComponents(dir: string, components: ComponentYaml[]): void {
  writeFileSync(join(dir, 'components.yaml'), components.map(componentYaml).join('\n---\n'));
}

export function sidecarFor(dirs: TempDirs, appId = 'pluggable-test', extra: Partial<StartOptions> = {}): Promise<Sidecar> {
  return startSidecar({
    ...extra,
    appId,
    httpPort: 0,
    grpcPort: 0,
    dataDir: dirs.data,
    componentsSocketsFolder: dirs.sockets,
    resourcesPaths: [dirs.resources],
    logger: extra.logger ?? pino({ level: 'silent' }),
  });
}

export interface ExampleProcess {
  proc: ChildProcess;
  socket: string;
  stop(): Promise<void>;
}

/** Starts examples/pluggable-state as its own process and waits until it listens. */
export async function startExample(folder: string, name = 'memstore'): Promise<ExampleProcess> {
  const proc = spawn(process.execPath, [EXAMPLE_MAIN, '--folder', folder, '--name', name], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`example component did not start: ${output}`)), 20_000);
    const onData = (b: Buffer) => {
      output += b.toString();
      if (output.includes('listening on')) {
        clearTimeout(t);
        resolve();
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    proc.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`example component exited with ${code}: ${output}`));
    });
  });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  };
  return { proc, socket: join(folder, `${name}.sock`), stop };
}

/** A component server in this process, serving the given services with their handlers. */
export async function startTestServer(
  socketPath: string,
  services: Record<string, grpc.UntypedServiceImplementation>,
  reflected = Object.keys(services),
): Promise<grpc.Server> {
  const def = componentsDefinition();
  const server = new grpc.Server();
  for (const [name, impl] of Object.entries(services)) server.addService(def[`${COMPONENTS_PACKAGE}.${name}`] as grpc.ServiceDefinition, impl);
  new ReflectionService(def, { services: reflected.map((s) => (s.includes('.') ? s : `${COMPONENTS_PACKAGE}.${s}`)) }).addToServer(server);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  return server;
}

export const ok = <T>(value: T): grpc.handleUnaryCall<unknown, T> => (_call, cb) => cb(null, value);

/** A JSON POST for fetch. */
export const json = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

export interface ExampleEnv {
  dirs: TempDirs;
  example: ExampleProcess;
  sidecar: Sidecar;
  /** http://127.0.0.1:<port> of the sidecar. */
  base: string;
}

/**
 * For a describe block: the example component (socket memstore) as a real process and a sidecar
 * loading `components`, started before the tests and stopped after them.
 */
export function useExampleSidecar(components: ComponentYaml[], appId: string): ExampleEnv {
  const env = {} as ExampleEnv;
  beforeAll(async () => {
    env.dirs = tempDirs();
    env.example = await startExample(env.dirs.sockets, 'memstore');
    writeComponents(env.dirs.resources, components);
    env.sidecar = await sidecarFor(env.dirs, appId);
    env.base = `http://127.0.0.1:${env.sidecar.httpPort}`;
  });
  afterAll(async () => {
    await env.sidecar?.close();
    await env.example?.stop();
    env.dirs?.cleanup();
  });
  return env;
}
