/**
 * GetMetadata / SetMetadata / Shutdown over the gRPC runtime API: the @dapr/dapr SDK client
 * (gRPC) and raw calls, checked field by field against GET /v1.0/metadata of the same sidecar.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canConnect } from '../services/net.ts';
import { startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

let s: RuntimeSidecar;
beforeAll(async () => {
  s = await startRuntimeSidecar({ extended: { cliPID: '1' }, appChannelAddress: '127.0.0.1', appMaxConcurrency: 7 });
});
afterAll(async () => {
  await s?.stop();
});

interface GrpcMetadata {
  id: string;
  runtime_version: string;
  active_actors_count: { type: string; count: number }[];
  registered_components: { name: string; type: string; version: string; capabilities: string[] }[];
  extended_metadata: Record<string, string>;
  subscriptions: unknown[];
  http_endpoints: { name: string }[];
  enabled_features: string[];
  app_connection_properties: Record<string, unknown> & { health: Record<string, unknown> };
  actor_runtime: { runtime_status: number; active_actors: { type: string; count: number }[]; host_ready: boolean; placement: string };
  scheduler: { connected_addresses: string[] };
  workflows: { connected_workers: number };
}

describe('metadata over the gRPC API', () => {
  it('reports every field GET /v1.0/metadata reports', async () => {
    const http = (await (await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/metadata`)).json()) as Record<string, any>;
    const md = await s.call<GrpcMetadata>('GetMetadata', {});
    expect(md.id).toBe(http.id);
    expect(md.runtime_version).toBe(http.runtimeVersion);
    expect(md.extended_metadata).toEqual(http.extended);
    expect(md.enabled_features).toEqual(http.enabledFeatures);
    expect(md.http_endpoints).toEqual(http.httpEndpoints);
    expect(md.subscriptions).toEqual(http.subscriptions);
    expect(md.registered_components).toEqual(http.components);
    expect(md.active_actors_count).toEqual(http.actors);
    expect(md.actor_runtime.active_actors).toEqual(http.actors);
    expect(md.actor_runtime.runtime_status).toBe(2); // RUNNING: the workflow engine's actor types
    expect(md.scheduler.connected_addresses).toEqual(http.scheduler.connected_addresses);
    expect(md.workflows.connected_workers).toBe(0);
    const app = http.appConnectionProperties;
    expect(md.app_connection_properties).toEqual({
      port: app.port,
      protocol: app.protocol,
      channel_address: app.channelAddress,
      max_concurrency: 7,
      health: {
        health_check_path: app.health.healthCheckPath,
        health_probe_interval: app.health.healthProbeInterval,
        health_probe_timeout: app.health.healthProbeTimeout,
        health_threshold: app.health.healthThreshold,
      },
    });
    expect(md.registered_components.map((c) => c.name).sort()).toEqual(['lite', 'mem', 'vault']);
  });

  it('the @dapr/dapr SDK reads and sets metadata over gRPC', async () => {
    const c = s.sdk();
    await c.metadata.set('team', 'blue');
    const md = await c.metadata.get();
    expect(md.id).toBe('grpc-api');
    expect(md.extended).toMatchObject({ team: 'blue' });
    expect(md.components.map((x) => x.name).sort()).toEqual(['lite', 'mem', 'vault']);
    const http = (await (await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/metadata`)).json()) as { extended: Record<string, string> };
    expect(http.extended.team).toBe('blue');
  });

  it('SetMetadata applies the HTTP API rules', async () => {
    for (const req of [{ key: '', value: 'x' }, { key: 'a/b', value: 'x' }, { key: 'runtimeVersion', value: '9' }, { key: 'big', value: 'x'.repeat(64 * 1024 + 1) }]) {
      const e = await s.fail('SetMetadata', req);
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    }
    const md = await s.call<GrpcMetadata>('GetMetadata', {});
    expect(md.extended_metadata.runtimeVersion).not.toBe('9');
  });
});

describe('Shutdown', () => {
  it('answers, then stops the sidecar gracefully', async () => {
    const other = await startRuntimeSidecar();
    try {
      const port = other.sidecar.grpcPort;
      const httpPort = other.sidecar.httpPort;
      expect(await other.call('Shutdown', {})).toEqual({});
      const deadline = Date.now() + 10_000;
      while ((await canConnect('127.0.0.1', httpPort, 200)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await canConnect('127.0.0.1', httpPort, 200)).toBe(false);
      expect(await canConnect('127.0.0.1', port, 200)).toBe(false);
    } finally {
      await other.stop().catch(() => undefined);
    }
  });
});
