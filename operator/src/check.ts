/**
 * What the operator checks on a Component beyond what the API server can: the type is a built-in
 * one (or a pluggable one), and the metadata each built-in type cannot do without is there.
 * The CRD's own rules run again too, for objects stored before the CRD had them.
 */
import { validateResource } from '../../crds/validate.ts';
import type { ComponentObject } from '../../crds/types.ts';
import { builtinCatalog, ComponentCatalog } from '../../sidecar/src/components/catalog.ts';
import { isPluggableApi } from '../../sidecar/src/pluggable/apis.ts';

/** Metadata a built-in type needs (one of each inner list). Kept beside the catalog's types. */
const REQUIRED_METADATA: Record<string, string[][]> = {
  'state.redis': [['redisHost']],
  'state.postgresql': [['connectionString']],
  'state.sqlite': [['connectionString']],
  'secretstores.local.file': [['secretsFile']],
  'bindings.sftp': [['rootPath'], ['address'], ['username'], ['password', 'privateKey']],
  // Event Grid needs one side's fields: output (accessKey, topicEndpoint) or input (see its metadata.ts)
  'bindings.azure.eventgrid': [['accessKey', 'cloudClientId']],
  'bindings.cloud.eventrouter': [['accessKey', 'cloudClientId']],
};

export interface Verdict {
  ready: boolean;
  reason: 'Valid' | 'Pluggable' | 'Invalid';
  message: string;
}

const builtins = builtinCatalog().list();

export function checkComponent(obj: ComponentObject): Verdict {
  const [rule] = validateResource(obj as unknown as Record<string, unknown>);
  if (rule) return { ready: false, reason: 'Invalid', message: `${rule.field}: ${rule.message}` };
  const type = obj.spec.type;
  const category = ComponentCatalog.categoryOf(type);
  if (!builtins.includes(type)) {
    if (isPluggableApi(category)) {
      const socket = type.slice(category!.length + 1);
      return { ready: true, reason: 'Pluggable', message: `not a built-in type: served by a pluggable component on socket "${socket}.sock" in the app's pod` };
    }
    const known = builtins.filter((t) => t.startsWith(`${category}.`));
    return {
      ready: false,
      reason: 'Invalid',
      message: `spec.type: unknown type "${type}"; built-in types${category ? ` of ${category}` : ''}: ${(known.length ? known : builtins).join(', ')}`,
    };
  }
  const have = new Set((obj.spec.metadata ?? []).map((m) => m.name));
  for (const oneOf of REQUIRED_METADATA[type] ?? []) {
    if (!oneOf.some((n) => have.has(n))) {
      return { ready: false, reason: 'Invalid', message: `spec.metadata: ${type} needs ${oneOf.length > 1 ? `one of ${oneOf.join(', ')}` : `"${oneOf[0]}"`}` };
    }
  }
  return { ready: true, reason: 'Valid', message: `${type} component is valid` };
}
