/**
 * Resolves `secretKeyRef` metadata against a loaded secret store component.
 * Secret values are never logged: ComponentSpec.secretKeys lists the fields they fill.
 */
import type { ComponentRegistry } from '../components/registry.ts';
import type { ComponentSpec } from '../components/types.ts';
import { type RawComponent, ResourceError } from './types.ts';

export async function resolveSecrets(raw: RawComponent, registry: ComponentRegistry, defaultStore?: string): Promise<ComponentSpec> {
  if (raw.secretRefs.length === 0) return raw.spec;
  const label = `Component "${raw.spec.name}"`;
  const storeName = raw.secretStore ?? defaultStore;
  if (!storeName) {
    throw new ResourceError(raw.spec.source, label, 'auth.secretStore', 'metadata uses secretKeyRef, so auth.secretStore must name a secret store component');
  }
  const store = registry.secretStore(storeName);
  if (!store) {
    throw new ResourceError(raw.spec.source, label, 'auth.secretStore', `secret store "${storeName}" is not loaded; loaded secret stores: ${registry.namesOf('secretstores').join(', ') || 'none'}`);
  }
  const metadata = { ...raw.spec.metadata };
  for (const ref of raw.secretRefs) {
    const secret = await store.getSecret(ref.secretName);
    const value = secret?.[ref.key];
    if (value === undefined) {
      throw new ResourceError(raw.spec.source, label, `spec.metadata.${ref.field}.secretKeyRef`, `secret "${ref.secretName}" (key "${ref.key}") not found in secret store "${storeName}"`);
    }
    metadata[ref.field] = value;
  }
  return { ...raw.spec, metadata };
}
