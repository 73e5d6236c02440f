/**
 * The shared state-store conformance suite against the example pluggable component, a real
 * process on a real socket, reached through the sidecar's pluggable state adapter.
 */
import { describeStateStoreConformance } from '../conformance/state-store.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { sidecarFor, startExample, tempDirs, writeComponents, type ExampleProcess, type TempDirs } from './helpers.ts';

let dirs: TempDirs;
let example: ExampleProcess;
let sidecar: Sidecar;

describeStateStoreConformance(
  'pluggable example component (examples/pluggable-state over a Unix socket)',
  async () => {
    dirs = tempDirs();
    example = await startExample(dirs.sockets, 'memstore');
    writeComponents(dirs.resources, [{ name: 'conformance', type: 'state.memstore' }]);
    sidecar = await sidecarFor(dirs);
    return sidecar.ctx.components.stateStore('conformance')!;
  },
  async (_s: StateStore) => {
    await sidecar?.close();
    await example?.stop();
    dirs?.cleanup();
  },
);
