/**
 * GetMetadata, SetMetadata and Shutdown. GetMetadata reports the same snapshot as
 * GET /v1.0/metadata (metadata/service.ts) in the gRPC API's shape; SetMetadata applies the
 * rules of PUT /v1.0/metadata/<name>.
 */
import type { SidecarContext } from '../../context.ts';
import { ApiError } from '../../http/errors.ts';
import { RESILIENCY_KEY, type MetadataResponse } from '../../metadata/service.ts';
import { requestShutdown } from '../../shutdown.ts';


const SUBSCRIPTION_TYPE: Record<string, number> = { DECLARATIVE: 1, PROGRAMMATIC: 2, STREAMING: 3 };
const ACTOR_RUNTIME = { DISABLED: 1, RUNNING: 2 };

export function toGetMetadataResponse(md: MetadataResponse): Record<string, unknown> {
  const actors = md.actors.map((a) => ({ type: a.type, count: a.count }));
  const app = md.appConnectionProperties;
  const out: Record<string, unknown> = {
    id: md.id,
    active_actors_count: actors,
    registered_components: md.components.map((c) => ({ name: c.name, type: c.type, version: c.version, capabilities: [...c.capabilities] })),
    // rt's resiliency field has no place in the proto: its JSON under a reserved key
    extended_metadata: md.resiliency ? { ...md.extended, [RESILIENCY_KEY]: JSON.stringify(md.resiliency) } : { ...md.extended },
    subscriptions: md.subscriptions.map((s) => ({
      pubsub_name: s.pubsubname,
      topic: s.topic,
      metadata: { ...(s.metadata ?? {}) },
      rules: { rules: (s.rules ?? []).map((r) => ({ match: r.match, path: r.path })) },
      dead_letter_topic: s.deadLetterTopic ?? '',
      type: SUBSCRIPTION_TYPE[s.type ?? ''] ?? 0,
    })),
    http_endpoints: md.httpEndpoints.map((e) => ({ name: e.name })),
    app_connection_properties: {
      port: app.port,
      protocol: app.protocol,
      channel_address: app.channelAddress,
      max_concurrency: app.maxConcurrency,
      health: {
        health_check_path: app.health.healthCheckPath,
        health_probe_interval: app.health.healthProbeInterval,
        health_probe_timeout: app.health.healthProbeTimeout,
        health_threshold: app.health.healthThreshold,
      },
    },
    runtime_version: md.runtimeVersion,
    enabled_features: [...md.enabledFeatures],
    // rt has no actor placement: the actor types it reports are its own (workflow engine) and the app's
    actor_runtime: {
      runtime_status: actors.length > 0 ? ACTOR_RUNTIME.RUNNING : ACTOR_RUNTIME.DISABLED,
      active_actors: actors,
      host_ready: actors.length > 0,
      placement: '',
    },
    scheduler: { connected_addresses: [...md.scheduler.connected_addresses] },
  };
  if (md.workflows) out.workflows = { connected_workers: md.workflows.connectedWorkers };
  return out;
}

export function metadataMethods(ctx: SidecarContext) {
  return {
    async GetMetadata(): Promise<Record<string, unknown>> {
      let md: MetadataResponse;
      try {
        md = ctx.metadata.snapshot();
      } catch (e) {
        throw new ApiError(500, 'ERR_METADATA_GET', `metadata could not be returned: ${(e as Error).message}`);
      }
      return toGetMetadataResponse(md);
    },

    async SetMetadata(req: { key: string; value: string }): Promise<Record<string, never>> {
      const name = req.key ?? '';
      const value = req.value ?? '';
      ctx.metadata.checkAttribute(name, Buffer.byteLength(value));
      ctx.metadata.setExtended(name, value);
      return {};
    },

    /**
     * Answers first, then stops. Under `rt run` (the CLI's pid is in extended.cliPID) the CLI
     * owns the shutdown: a SIGTERM makes it stop the app and the sidecar in order. Otherwise
     * (embedded, tests, `rt sidecar`) the sidecar's own graceful close runs.
     */
    async Shutdown(): Promise<Record<string, never>> {
      requestShutdown(ctx, 'gRPC API');
      return {};
    },
  };
}
