/**
 * The actors building block: the actor runtime on this host (service.ts), its HTTP routes, and
 * the app's actor types and settings, asked once the app is reachable (app/discovery.ts).
 * Reminders are jobs in the scheduler when one is configured (the jobs block's internalJobs).
 * Standalone every hosted type is served here (placement/local.ts); with --placement-host-address
 * the placement service's table decides (placement/connect.ts), and operations of actors hosted
 * by another sidecar go to it over the internal invocation port (peer-calls.ts), whose forwarded
 * calls this sidecar serves too. Neither is loaded without a placement address.
 */
import { defineBlock } from '../block-graph.ts';
import { discoverConfig } from '../app/discovery.ts';
import { ActorApp } from './app-calls.ts';
import type { ActorPeers } from './calls.ts';
import { connectPlacement } from './placement/connect.ts';
import { LocalPlacement } from './placement/local.ts';
import type { ActorPlacement } from './placement/types.ts';
import { ActorReminders } from './reminders.ts';
import { actorRoutes } from './routes.ts';
import { parseAnyDuration } from './schedule.ts';
import { ActorsService } from './service.ts';

export const block = defineBlock({
  name: 'actors',
  uses: ['internalJobs', 'internalPort', 'resiliency'],
  provides: ['actors'],
  async setup(ctx) {
    const log = ctx.log.child({ scope: 'rt.actors' });
    const o = ctx.options;
    const port = ctx.services.internalPort;
    let placement: ActorPlacement = new LocalPlacement(o.appId);
    let peers: ActorPeers | undefined;
    let peerCalls: typeof import('./peer-calls.ts') | undefined;
    if (o.placementAddresses?.length && !port) log.error('actors: --placement-host-address is given but the internal invocation port is not running: actors are served locally only');
    else if (o.placementAddresses?.length && port) {
      placement = connectPlacement({ addresses: o.placementAddresses, appId: o.appId, namespace: o.namespace, mode: o.mode, listenAddress: o.listenAddress, port: port.listening, log, identity: ctx.identity });
      peerCalls = await import('./peer-calls.ts');
      const { HttpTransport } = await import('../invoke/internal-http.ts');
      peers = new peerCalls.PeerActors(new HttpTransport(ctx.identity), { app_id: o.appId, namespace: o.namespace, trust_domain: ctx.identity?.id.trustDomain ?? '' }, o.namespace);
    }
    const jobs = ctx.services.internalJobs;
    const actors = new ActorsService({
      appId: ctx.options.appId,
      log,
      components: ctx.components,
      placement,
      app: new ActorApp(ctx.app),
      reminders: jobs ? new ActorReminders(jobs) : undefined,
      peers,
      resiliency: ctx.services.resiliency,
      turnWaitMs: turnWaitMs(log),
    });
    if (peerCalls && port) port.serveActorCalls(peerCalls.peerCallHandler(actors));
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
    // a shutdown leaves placement first, while the HTTP server still finishes its calls in flight
    ctx.http.addHook('preClose', (done) => {
      void actors.leave();
      done();
    });
    ctx.onClose(async () => {
      await actors.close();
      await placement.close();
      await peers?.close();
    });
    return { actors };
  },
});

/** RT_ACTOR_TURN_TIMEOUT (a Go or ISO duration): how long a method call waits for its actor's turn. */
function turnWaitMs(log: { warn(msg: string): void }): number | undefined {
  const text = process.env.RT_ACTOR_TURN_TIMEOUT;
  if (!text) return undefined;
  const ms = parseAnyDuration(text);
  if (ms === undefined || ms <= 0) log.warn(`RT_ACTOR_TURN_TIMEOUT "${text.slice(0, 40)}" is not a positive duration: the default (60s) applies`);
  return ms && ms > 0 ? ms : undefined;
}
