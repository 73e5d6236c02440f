/**
 * Step 1 of a sidecar's start: picks the resource source (files, or the operator in kubernetes
 * mode with a control-plane address), reads the first desired state, and later keeps applying the
 * source's changes to the running sidecar.
 */
import type { SidecarContext } from '../context.ts';
import { ResourceApplier } from './apply.ts';
import { FileSource } from './file-source.ts';
import { loadConfigurationFile } from './loader.ts';
import type { ResourceSource } from './source.ts';
import type { ConfigurationResource, Resources } from './types.ts';

export interface SidecarResources {
  source: ResourceSource;
  applier: ResourceApplier;
  /** The first desired state (applied by the caller once component types are known). */
  initial: Resources;
  /** Starts applying the source's changes. */
  follow(): void;
  close(): Promise<void>;
}

/** Each running sidecar's applier, for building blocks that hold a component (workflows' actor state store). */
const appliers = new WeakMap<SidecarContext, ResourceApplier>();
export const resourceApplier = (ctx: SidecarContext): ResourceApplier | undefined => appliers.get(ctx);

export async function openResources(ctx: SidecarContext): Promise<SidecarResources> {
  const { options, log } = ctx;
  const loadOpts = { appId: options.appId, namespace: options.namespace };
  let source: ResourceSource;
  const fromOperator = options.mode === 'kubernetes' && !!options.controlPlaneAddress;
  if (fromOperator) {
    const { OperatorSource } = await import('./operator-source.ts');
    source = new OperatorSource(options, log, process.env, ctx.identity);
  } else {
    source = new FileSource(options.resourcesPaths, loadOpts, log);
  }
  // --config names one Configuration file that wins over the source's (on a cluster: a Configuration's name)
  const pinned: ConfigurationResource | undefined = options.configFile && !fromOperator ? await loadConfigurationFile(options.configFile, loadOpts) : undefined;
  const withConfig = (r: Resources): Resources => (pinned ? { ...r, configuration: pinned } : r);
  const applier = new ResourceApplier(ctx.components, ctx.metadata, ctx.resources, log, options.mode === 'kubernetes' ? 'kubernetes' : undefined);
  appliers.set(ctx, applier);
  const initial = withConfig(await source.list());
  Object.assign(ctx.resources, initial);
  return {
    source,
    applier,
    initial,
    follow: () => source.watch((d) => void applier.submit(withConfig(d))),
    close: async () => {
      await source.close();
      await applier.idle();
    },
  };
}
