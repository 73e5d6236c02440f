/**
 * The pub/sub building block: the publish API (HTTP here, gRPC in grpc/runtime/pubsub.ts over
 * the same PublishService), and the app's subscriptions: DECLARATIVE (Subscription resources)
 * and PROGRAMMATIC (the app's GET /rt/subscribe, else /dapr/subscribe; for an app speaking gRPC
 * its ListTopicSubscriptions), delivered over the app's protocol (HTTP POST, or gRPC
 * OnTopicEvent), STREAMING ones opened by the app over gRPC (streaming.ts). Metadata lists all
 * three, each while it is open; publishes wait for the app's own to open (gate.ts).
 */
import { discoverSubscriptions } from '../app/discovery.ts';
import type { SidecarContext } from '../context.ts';
import { httpTargets } from './delivery.ts';
import { grpcTargets, listGrpcSubscriptions } from './grpc-app.ts';
import { HOLD_LIMIT_MS, PublishGate } from './gate.ts';
import { PublishService } from './publish.ts';
import { publishRoutes } from './routes.ts';
import { SubscriptionManager } from './subscriptions.ts';

export async function setup(ctx: SidecarContext): Promise<{ pubsub: PublishService }> {
  const log = ctx.log.child({ block: 'pubsub' });
  // with an app, publishes wait (a while) for its subscriptions: see gate.ts
  const gate = new PublishGate(ctx.app.enabled ? HOLD_LIMIT_MS : undefined, log);
  const publisher = new PublishService(ctx.components, ctx.options.appId, gate, ctx.services.resiliency, ctx.services.tracing);
  await publishRoutes(ctx.http, publisher);

  const grpcApp = ctx.app.grpc;
  const targets = grpcApp ? grpcTargets(grpcApp, log, ctx.services.tracing) : httpTargets(ctx.app, log, ctx.services.tracing);
  const declarative = () => ctx.resources.subscriptions.filter((s) => s.type === 'DECLARATIVE');
  const manager = new SubscriptionManager(ctx.components, declarative, targets, log, undefined, ctx.services.resiliency);
  ctx.metadata.addSubscriptionProvider(() => manager.openList());
  // at shutdown a publish still waiting goes on (before the HTTP server waits for it) rather than holding the stop
  ctx.http.addHook('preClose', async () => gate.open());
  ctx.onClose(() => manager.close());
  ctx.onAppReady(async () => {
    if (!ctx.app.enabled) return;
    try {
      const programmatic = grpcApp ? await listGrpcSubscriptions(grpcApp, log) : await discoverSubscriptions(ctx.app);
      await manager.start(programmatic);
    } finally {
      gate.open();
    }
  });
  return { pubsub: publisher };
}
