/**
 * A stop asked for through an API (HTTP POST /v1.0/shutdown, gRPC Shutdown). The answer goes
 * out first; then, under `rt run`, the CLI gets SIGTERM so the app and the sidecar stop in their
 * usual order; otherwise the sidecar closes itself. Asking twice stops once.
 */
import type { SidecarContext } from './context.ts';

const requested = new WeakSet<SidecarContext>();

export function requestShutdown(ctx: SidecarContext, via: string): void {
  if (requested.has(ctx)) return;
  requested.add(ctx);
  ctx.log.info(`shutdown requested over the ${via}`);
  setImmediate(() => {
    const stop = ctx.options.extended.cliPID === String(process.pid) ? Promise.resolve(process.kill(process.pid, 'SIGTERM')) : ctx.services.shutdown?.();
    Promise.resolve(stop).catch((e: unknown) => ctx.log.warn({ err: e }, 'shutdown failed'));
  });
}
