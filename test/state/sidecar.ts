/** Starts a real sidecar on free ports with state store components written to a temp folder. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { ComponentCatalog } from '../../sidecar/src/components/catalog.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

export interface StoreDef {
  name: string;
  type: string;
  metadata?: Record<string, string>;
}

export interface StateSidecar {
  sidecar: Sidecar;
  base: string;
  dir: string;
  stop(): Promise<void>;
}

export async function startStateSidecar(appId: string, stores: StoreDef[], catalog?: ComponentCatalog): Promise<StateSidecar> {
  const dir = mkdtempSync(join(tmpdir(), 'rt-state-'));
  const resources = join(dir, 'resources');
  const yaml = stores
    .map((s) => {
      const md = Object.entries(s.metadata ?? {}).map(([n, v]) => `    - name: ${n}\n      value: ${JSON.stringify(v)}`);
      return `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${s.name}\nspec:\n  type: ${s.type}\n  version: v1\n  metadata:${md.length ? `\n${md.join('\n')}` : ' []'}\n`;
    })
    .join('---\n');
  mkdirSync(resources);
  writeFileSync(join(resources, 'stores.yaml'), yaml);
  const sidecar = await startSidecar({
    appId,
    httpPort: 0,
    grpcPort: 0,
    dataDir: join(dir, 'data'),
    resourcesPaths: [resources],
    logger: pino({ level: 'silent' }),
    catalog,
  }).catch((e) => {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  });
  return {
    sidecar,
    base: `http://127.0.0.1:${sidecar.httpPort}`,
    dir,
    stop: async () => {
      await sidecar.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
