/**
 * The field tables of the docs come from the components' metadata declarations: every declared
 * field and alias of a built-in component (the index in components/metadata/declarations.ts) is
 * named in its row of docs/compatibility.md (the event-routing binding: in the Metadata section
 * of docs/bindings-eventgrid.md).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { builtinCatalog } from '../../sidecar/src/components/catalog.ts';
import { DECLARATIONS } from '../../sidecar/src/components/metadata/declarations.ts';

/** Built-in types that read no metadata. */
const NONE = ['state.in-memory', 'pubsub.in-memory'];

const compatibility = readFileSync(new URL('../../docs/compatibility.md', import.meta.url), 'utf8');
const eventgrid = readFileSync(new URL('../../docs/bindings-eventgrid.md', import.meta.url), 'utf8');

/** Where a type's fields are documented. */
function docOf(type: string): string {
  if (type === 'bindings.cloud.eventrouter' || type === 'bindings.azure.eventgrid') return /## Metadata\n([\s\S]*?)\n## /.exec(eventgrid)?.[1] ?? '';
  return compatibility.split('\n').find((l) => l.startsWith(`| \`${type}\``)) ?? '';
}

describe('component metadata docs', () => {
  it('every built-in type has a declaration, or reads no metadata', () => {
    const declared = new Set(DECLARATIONS.flatMap((d) => d.types));
    for (const t of builtinCatalog().list()) expect(declared.has(t) || NONE.includes(t), t).toBe(true);
  });

  it('names every declared field and alias in the component\'s row', () => {
    for (const d of DECLARATIONS) {
      const doc = docOf(d.types[0]);
      expect(doc, `no row for ${d.types[0]} in docs/compatibility.md`).not.toBe('');
      for (const [name, f] of Object.entries(d.fields)) {
        // `name`, or `name: value` as an example
        for (const n of [name, ...(f.aliases ?? [])]) expect(doc.includes(`\`${n}\``) || doc.includes(`\`${n}: `), `${d.types[0]}: \`${n}\` is not in its docs row`).toBe(true);
      }
    }
  });
});
