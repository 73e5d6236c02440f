/**
 * What the operator checks on a Component beyond what the API server can: the type is a built-in
 * one (or a pluggable one), and its metadata decodes by the component's declaration
 * (sidecar/src/components/metadata/declarations.ts) as the sidecar will decode it: required
 * fields under any spelling or alias, each plain value by its field's type, the declaration's
 * rules across fields, with the decoder's own message. A value the operator cannot read here
 * (`secretKeyRef`, `envRef`, a `{env:…}`-style template) counts as set and is not decoded.
 * The CRD's own rules run again too, for objects stored before the CRD had them.
 */
import { validateResource } from '../../crds/validate.ts';
import type { ComponentObject, MetadataEntry } from '../../crds/types.ts';
import { acceptedText, builtinCatalog, ComponentCatalog, declarationsOf, decodeMetadata, fieldOfKey, hasTemplate, isPluggableApi, MetadataError } from '../../sidecar/src/index.ts';

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
  const builtin = builtins.includes(type);
  if (!builtin && !isPluggableApi(category)) {
    const known = builtins.filter((t) => t.startsWith(`${category}.`));
    return {
      ready: false,
      reason: 'Invalid',
      message: `spec.type: unknown type "${type}"; built-in types${category ? ` of ${category}` : ''}: ${(known.length ? known : builtins).join(', ')}`,
    };
  }
  const problem = metadataProblem(type, obj.spec.metadata ?? []);
  if (problem) return { ready: false, reason: 'Invalid', message: `spec.metadata: ${problem}` };
  if (!builtin) {
    const socket = type.slice(category!.length + 1);
    return { ready: true, reason: 'Pluggable', message: `not a built-in type: served by a pluggable component on socket "${socket}.sock" in the app's pod` };
  }
  return { ready: true, reason: 'Valid', message: `${type} component is valid` };
}

/** A value as the sidecar's loader will have it, or undefined when only the sidecar can know it. */
function plainValue(e: MetadataEntry): string | undefined {
  if (e.secretKeyRef !== undefined || e.envRef !== undefined) return undefined;
  const v: unknown = e.value;
  const text = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v as string | number | boolean);
  return hasTemplate(text) ? undefined : text;
}

/** The decoder's message for the first declaration `entries` break, undefined when none. */
function metadataProblem(type: string, entries: readonly MetadataEntry[]): string | undefined {
  const decls = declarationsOf(type);
  if (!decls.length) return undefined;
  // as the sidecar loads them: a later entry wins, and secret references are resolved last
  const values = new Map<string, string | undefined>();
  for (const e of entries) if (e.secretKeyRef === undefined) values.set(e.name, plainValue(e));
  for (const e of entries) if (e.secretKeyRef !== undefined) values.set(e.name, undefined);
  for (const decl of decls) {
    const md: Record<string, string> = {};
    for (const [key, v] of values) {
      const field = v === undefined ? fieldOfKey(decl, key) : undefined;
      md[key] = v ?? (field ? acceptedText(field) : 'x');
    }
    try {
      decodeMetadata(decl, md);
    } catch (e) {
      if (e instanceof MetadataError) return e.message;
      throw e;
    }
  }
  return undefined;
}
