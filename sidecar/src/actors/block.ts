/**
 * The actors building block: the actor runtime on this host (service.ts), its HTTP routes, and
 * the app's actor types and settings, asked once the app is reachable (app/discovery.ts).
 * Reminders are jobs in the scheduler when one is configured (the jobs block's internalJobs).
 * Standalone every hosted type is served here (placement/local.ts); a placement service
 * decides otherwise (placement/types.ts).
 */
import { defineBlock } from '../block-graph.ts';
import { discoverConfig } from '../app/discovery.ts';
import { ActorApp } from './app-calls.ts';
import { LocalPlacement } from './placement/local.ts';
import { ActorReminders } from './reminders.ts';
import { actorRoutes } from './routes.ts';
import { ActorsService } from './service.ts';

export const block = defineBlock({
  name: 'actors',
  uses: ['internalJobs'],
  provides: ['actors'],
  async setup(ctx) {
    const log = ctx.log.child({ scope: 'rt.actors' });
    const placement = new LocalPlacement(ctx.options.appId);
    const jobs = ctx.services.internalJobs;
    const actors = new ActorsService({
      appId: ctx.options.appId,
      log,
      components: ctx.components,
      placement,
      app: new ActorApp(ctx.app),
      reminders: jobs ? new ActorReminders(jobs) : undefined,
    });
    await actorRoutes(ctx.http, actors);
    ctx.metadata.addActorProvider(() => actors.activeCounts());
    ctx.onAppReady(async () => {
      // without an app, discovery finds nothing: no types
      const config = await discoverConfig(ctx.app);
      if (config.ignored.length > 0) log.warn({ ignored: config.ignored }, `the app's actor settings hold values that are not Go durations; their defaults apply: ${config.ignored.join(', ')}`);
      if (config.entities.length > 0 && ctx.app.grpc) log.warn('the app declares actor types but speaks gRPC: the actor callbacks (PUT /actors/...) are HTTP only, as in the reference runtime');
      if (config.entities.length > 0) log.info({ types: config.entities }, `hosting actor types ${config.entities.join(', ')}`);
      actors.configure(config);
    });
    ctx.onClose(async () => {
      await actors.close();
      await placement.close();
    });
    return { actors };
  },
});
