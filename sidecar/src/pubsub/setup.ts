/**
 * The pub/sub building block: the publish API (HTTP here, gRPC in grpc/runtime/pubsub.ts over
 * the same PublishService), and the app's subscriptions: DECLARATIVE (Subscription resources)
 * and PROGRAMMATIC (the app's GET /rt/subscribe, else /dapr/subscribe; for an app speaking gRPC
 * its ListTopicSubscriptions), delivered over the app's protocol (HTTP POST, or gRPC
 * OnTopicEvent), STREAMING ones opened by the app over gRPC (streaming.ts). Metadata lists all three.
 */
import { discoverSubscriptions } from '../app/discovery.ts';
import type { SidecarContext } from '../context.ts';
import { httpTargets } from './delivery.ts';
import { grpcTargets, listGrpcSubscriptions } from './grpc-app.ts';
import { PublishService } from './publish.ts';
import { publishRoutes } from './routes.ts';
import { SubscriptionManager } from './subscriptions.ts';

export async function setup(ctx: SidecarContext): Promise<void> {
  const publisher = new PublishService(ctx.components, ctx.options.appId);
  ctx.services.pubsub = publisher;
  await publishRoutes(ctx.http, publisher);

  const log = ctx.log.child({ block: 'pubsub' });
  const grpcApp = ctx.app.grpc;
  const targets = grpcApp ? grpcTargets(grpcApp, log) : httpTargets(ctx.app, log);
  const declarative = () => ctx.resources.subscriptions.filter((s) => s.type === 'DECLARATIVE');
  const manager = new SubscriptionManager(ctx.components, declarative, targets, log);
  ctx.metadata.addSubscriptionProvider(() => manager.programmaticList());
  ctx.onClose(() => manager.close());
  ctx.onAppReady(async () => {
    if (!ctx.app.enabled) return;
    const programmatic = grpcApp ? await listGrpcSubscriptions(grpcApp, log) : await discoverSubscriptions(ctx.app);
    await manager.start(programmatic);
  });
}
