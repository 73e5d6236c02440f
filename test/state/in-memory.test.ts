import { factory } from '../../sidecar/src/components/state/in-memory/index.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { describeStateStoreConformance } from '../conformance/state-store.ts';
import { componentContext, spec } from './helpers.ts';

describeStateStoreConformance(
  'state.in-memory',
  async () => {
    const s = factory() as StateStore;
    await s.init(spec('state.in-memory'), componentContext);
    return s;
  },
  (s) => s.close(),
);
