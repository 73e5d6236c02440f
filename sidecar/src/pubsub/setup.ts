/**
 * The pub/sub building block: the publish API (HTTP here, gRPC in grpc/runtime/pubsub.ts over
 * the same PublishService), and the app's subscriptions: DECLARATIVE (Subscription resources)
 * and PROGRAMMATIC (the app's GET /rt/subscribe, else /dapr/subscribe) delivered over HTTP,
 * STREAMING ones opened by the app over gRPC (streaming.ts). Metadata lists all three.
 */
import { discoverSubscriptions } from '../app/discovery.ts';
import type { SidecarContext } from '../context.ts';
import { PublishService } from './publish.ts';
import { publishRoutes } from './routes.ts';
import { SubscriptionManager } from './subscriptions.ts';

export async function setup(ctx: SidecarContext): Promise<void> {
  const publisher = new PublishService(ctx.components, ctx.options.appId);
  ctx.services.pubsub = publisher;
  await publishRoutes(ctx.http, publisher);

  const declarative = () => ctx.resources.subscriptions.filter((s) => s.type === 'DECLARATIVE');
  const manager = new SubscriptionManager(ctx.components, declarative, ctx.app, ctx.log.child({ block: 'pubsub' }));
  ctx.metadata.addSubscriptionProvider(() => manager.programmaticList());
  ctx.onClose(() => manager.close());
  ctx.onAppReady(async () => {
    if (!ctx.app.enabled) return;
    const programmatic = await discoverSubscriptions(ctx.app);
    manager.setProgrammatic(programmatic);
    if (ctx.options.appProtocol !== 'http') {
      ctx.log.warn('pub/sub: subscriptions are delivered over HTTP; with --app-protocol grpc only streaming subscriptions (SubscribeTopicEventsAlpha1) receive messages');
      return;
    }
    await manager.start(programmatic);
  });
}
