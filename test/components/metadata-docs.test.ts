/**
 * The field tables of the docs and the components' metadata declarations (the index in
 * components/metadata/declarations.ts) say the same, both ways: every declared field and alias of a
 * built-in component is named in its row of docs/compatibility.md (the event-routing binding: in
 * the Metadata section of docs/bindings-eventgrid.md), and every field a row's "what rt reads"
 * names is declared, with the alias, default, range and required-ness the docs give it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { builtinCatalog, ComponentCatalog } from '../../sidecar/src/components/catalog.ts';
import type { Field } from '../../sidecar/src/components/metadata/decode.ts';
import { DECLARATIONS, declarationsOf } from '../../sidecar/src/components/metadata/declarations.ts';
import { parseDuration } from '../../shared/duration.ts';

const EVENT_ROUTER = 'bindings.cloud.eventrouter';

/** Fields the docs name that a category's runtime reads itself, not through a declaration. */
const READ_ELSEWHERE: Record<string, string[]> = {
  // the state block reads and checks it at start (sidecar/src/state/keys.ts, docs/state.md)
  state: ['keyPrefix'],
};

/** Event-routing fields whose documented default the binding fills in itself (the field reads as unset). */
const DEFAULT_IN_CODE = ['azureAuthorityHost', 'armEndpoint'];

/** Built-in types that read no metadata. */
const NONE = ['state.in-memory', 'pubsub.in-memory'];

const compatibility = readFileSync(new URL('../../docs/compatibility.md', import.meta.url), 'utf8');
const eventgrid = readFileSync(new URL('../../docs/bindings-eventgrid.md', import.meta.url), 'utf8');

/** Where a type's fields are documented. */
function docOf(type: string): string {
  if (type === 'bindings.cloud.eventrouter' || type === 'bindings.azure.eventgrid') return /## Metadata\n([\s\S]*?)\n## /.exec(eventgrid)?.[1] ?? '';
  return compatibility.split('\n').find((l) => l.startsWith(`| \`${type}\``)) ?? '';
}

/** Every field a Component of `type` is decoded by (the state stores' runtime fields too), by name. */
function fieldsOf(type: string): Map<string, Field> {
  return new Map(declarationsOf(type).flatMap((d) => Object.entries(d.fields)));
}

/** A compatibility row's second column, "what rt reads". */
function readsColumn(row: string): string {
  return row.replace(/\\\|/g, '¦').split('|')[2] ?? '';
}

/**
 * The fields a "what rt reads" cell names: the backticked names at the top level of its first
 * clause (before the first `;` outside parentheses; what follows is request or subscription
 * metadata, operations), each with the parenthesised note right after it, if any.
 */
function rowFields(cell: string): { name: string; note?: string }[] {
  let depth = 0;
  let top = '';
  const notes: string[] = [];
  for (const ch of cell) {
    if (ch === '(' && depth++ === 0) {
      top += `(${notes.length})`;
      notes.push('');
      continue;
    }
    if (ch === ')' && depth > 0 && --depth === 0) continue;
    if (depth > 0) notes[notes.length - 1] += ch;
    else if (ch === ';') break;
    else top += ch;
  }
  return [...top.matchAll(/`([A-Za-z][A-Za-z0-9_]*)`(?:\s*\((\d+)\))?/g)].map((m) => ({ name: m[1]!, note: m[2] === undefined ? undefined : notes[Number(m[2])] }));
}

/** Whether a field's declared default is the docs' text of it. */
function sameDefault(f: Field, text: string): boolean {
  if (!('default' in f) || f.default === undefined) return false;
  if (f.type === 'duration') return parseDuration(text) === f.default;
  if (f.type === 'list') return (f.default ?? []).join(',') === text.split(',').map((s) => s.trim()).join(',');
  return String(f.default) === text;
}

function numberOf(f: Field, key: 'min' | 'max'): number | undefined {
  return f.type === 'integer' || f.type === 'duration' ? f[key] : undefined;
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

  it('declares every field a row names, with the alias, default and range it gives', () => {
    for (const d of DECLARATIONS.filter((x) => !x.types.includes(EVENT_ROUTER))) {
      const type = d.types[0]!;
      const fields = fieldsOf(type);
      for (const { name, note } of rowFields(readsColumn(docOf(type)))) {
        if (READ_ELSEWHERE[ComponentCatalog.categoryOf(type) ?? '']?.includes(name)) continue;
        const f = fields.get(name);
        expect.soft(f, `${type}: docs/compatibility.md names \`${name}\`, which is not declared`).toBeDefined();
        if (!f || !note) continue;
        const where = `${type}: \`${name}\` (${note})`;
        for (const alias of note.matchAll(/\balias `([^`]+)`/g)) expect.soft(f.aliases ?? [], `${where}: alias not declared`).toContain(alias[1]);
        const dflt = /\bdefault `([^`]+)`/.exec(note);
        if (dflt) expect.soft(sameDefault(f, dflt[1]!), `${where}: the declared default is ${JSON.stringify('default' in f ? f.default : undefined)}`).toBe(true);
        const range = /^(-?\d+)–(-?\d+)$/.exec(note);
        if (range) expect.soft([numberOf(f, 'min'), numberOf(f, 'max')], `${where}: declared range`).toEqual([Number(range[1]), Number(range[2])]);
      }
    }
  });

  it('declares every field of the event-routing binding\'s table as the table says it', () => {
    const fields = fieldsOf(EVENT_ROUTER);
    const rows = docOf(EVENT_ROUTER).split('\n').filter((l) => l.startsWith('| `'));
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) {
      const [names, direction, rule] = row.split('|').slice(1, 4).map((c) => c.trim()) as [string, string, string];
      for (const [, name] of names.matchAll(/`([^`]+)`/g)) {
        const f = fields.get(name!);
        const where = `${EVENT_ROUTER}: \`${name}\``;
        expect.soft(f, `${where} is in docs/bindings-eventgrid.md but not declared`).toBeDefined();
        if (!f) continue;
        // "input, required": required on that side only (checked by the binding's own rule)
        if (/\boptional\b/.test(direction)) expect.soft(f.required, `${where}: the table says optional`).not.toBe(true);
        if (direction === 'required') expect.soft(f.required, `${where}: the table says required`).toBe(true);
        const dflt = /\bdefault `([^`]+)`/.exec(rule);
        if (dflt && !DEFAULT_IN_CODE.includes(name!)) expect.soft(sameDefault(f, dflt[1]!), `${where}: the table's default ${dflt[1]}, declared ${JSON.stringify('default' in f ? f.default : undefined)}`).toBe(true);
        const range = /(\S+)–(\S+?)[;,.]?(?:\s|$)/.exec(rule);
        if (range && (f.type === 'integer' || f.type === 'duration')) {
          const value = (t: string) => (f.type === 'duration' ? parseDuration(t) : Number(t));
          expect.soft([numberOf(f, 'min'), numberOf(f, 'max')], `${where}: the table's range ${range[1]}–${range[2]}`).toEqual([value(range[1]!), value(range[2]!)]);
        }
      }
    }
  });
});
