/**
 * Services `rt run` starts in-process so that nothing else needs installing
 * (the scheduler, once the jobs building block lands). Each fills in options
 * the sidecar needs (e.g. schedulerAddresses) and returns how to stop it.
 */
import type { StartOptions } from '../sidecar/src/sidecar.ts';

export interface EmbeddedServices {
  close(): Promise<void>;
}

export async function startEmbeddedServices(_options: StartOptions): Promise<EmbeddedServices> {
  return { close: async () => {} };
}
