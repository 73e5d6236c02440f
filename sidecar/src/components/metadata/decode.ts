/**
 * The one decoder of component metadata. Each built-in component declares its fields once
 * (`defineMetadata`: name, type, default, required, aliases, secret) and `decodeMetadata` turns a
 * Component's `spec.metadata` into the typed object, with one set of rules (docs/components.md):
 *
 * - names match case-insensitively; the declared spelling wins over another one, and the name
 *   over its aliases (as components-contrib's `DecodeMetadata` with `mapstructurealiases`); a blank
 *   value never hides a filled one given under another spelling;
 * - an absent, empty or whitespace-only value is unset: the default applies;
 * - boolean: Go's `strconv.ParseBool` set plus dapr/kit's `IsTruthy` set, any case:
 *   true/t/1/yes/y/on → true, false/f/0/no/n/off → false; anything else is an error (the reference
 *   reads it as false);
 * - duration: a Go duration (`30s`, `1m30s`, `500ms`) or a bare whole number of seconds, as the
 *   reference's `toTimeDurationHookFunc`; decoded to milliseconds;
 * - integer: decimal digits with an optional sign; enum: one of the values, any case; list:
 *   comma-separated, each item trimmed, empty items dropped;
 * - string: kept as written;
 * - keys nobody declared are left alone (a component reads or ignores them as before);
 * - rules across fields (`anyOf`: at least one of some fields is set) run after the required
 *   check, before the values are decoded.
 *
 * Every problem is a MetadataError naming the field and the value (never a secret's value); the
 * registry adds the component's name when it fails to load.
 */
import { formatDuration, parseDuration } from '../../../../shared/duration.ts';

/** A field's problem; `field` is the declared name. */
export class MetadataError extends Error {
  /** The (first) field at fault. */
  readonly field: string;
  constructor(field: string, problem: string, message?: string) {
    super(message ?? `metadata field "${field}" ${problem}`);
    this.name = 'MetadataError';
    this.field = field;
  }
}

interface FieldBase {
  /** Other names of the field (the reference's `mapstructurealiases`), matched in this order. */
  aliases?: readonly string[];
  /** Start fails when unset. */
  required?: boolean;
  /** May hold a credential: its value never appears in a message. */
  secret?: boolean;
  /** One line for the docs. */
  doc?: string;
}
export interface StringField extends FieldBase {
  type: 'string';
  default?: string;
}
export interface BooleanField extends FieldBase {
  type: 'boolean';
  default?: boolean;
}
export interface IntegerField extends FieldBase {
  type: 'integer';
  default?: number;
  min?: number;
  max?: number;
}
/** Decoded to milliseconds; min and max in milliseconds too. */
export interface DurationField extends FieldBase {
  type: 'duration';
  default?: number;
  min?: number;
  max?: number;
}
export interface EnumField extends FieldBase {
  type: 'enum';
  values: readonly string[];
  default?: string;
}
export interface ListField extends FieldBase {
  type: 'list';
  /** When set, each item must be one of these (any case). */
  values?: readonly string[];
  default?: readonly string[];
}
export type Field = StringField | BooleanField | IntegerField | DurationField | EnumField | ListField;
export type Fields = Readonly<Record<string, Field>>;

type ValueOf<F> = F extends { type: 'string' }
  ? string
  : F extends { type: 'boolean' }
    ? boolean
    : F extends { type: 'integer' | 'duration' }
      ? number
      : F extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : F extends { type: 'list'; values: readonly (infer V)[] }
          ? V[]
          : F extends { type: 'list' }
            ? string[]
            : never;
type Always<F> = F extends { required: true } ? true : F extends { default: unknown } ? true : false;

/** The typed result of decoding fields F: unset fields without a default are undefined. */
export type Decoded<F extends Fields> = { -readonly [K in keyof F]: Always<F[K]> extends true ? ValueOf<F[K]> : ValueOf<F[K]> | undefined };

/**
 * A rule across fields that a single field's `required` cannot say: given the metadata and the
 * declared fields that are set, it throws a MetadataError when broken. The operator runs it too.
 */
export type MetadataRule = (md: Readonly<Record<string, string>>, present: ReadonlySet<string>) => void;

export interface MetadataDeclaration<F extends Fields> {
  /** The component types that read these fields (`state.sqlite`). */
  readonly types: readonly string[];
  readonly fields: F;
  readonly rules: readonly MetadataRule[];
}

/** Fields shared by several declarations, spread into each (literal types kept). */
export function metadataFields<const F extends Fields>(fields: F): F {
  return fields;
}

/** A component's metadata, declared once, with its rules across fields. */
export function defineMetadata<const F extends Fields>(types: string | readonly string[], fields: F, rules: readonly MetadataRule[] = []): MetadataDeclaration<F> {
  return { types: typeof types === 'string' ? [types] : types, fields, rules };
}

/** The rule that at least one of `fields` is set: `set "a" or "b" (or both): why`. */
export function anyOf(fields: readonly string[], why: string): MetadataRule {
  const names = fields.map((f) => `"${f}"`);
  const list = names.length > 2 ? `one of ${names.join(', ')}` : `${names.join(' or ')} (or both)`;
  return (_md, present) => {
    if (!fields.some((f) => present.has(f))) throw new MetadataError(fields[0], '', `set ${list}: ${why}`);
  };
}

/** Decodes `md` by the declaration; throws MetadataError (missing required fields first, all named at once). */
export function decodeMetadata<F extends Fields>(decl: MetadataDeclaration<F>, md: Readonly<Record<string, string>>): Decoded<F> {
  const raw = rawValues(decl, md);
  const missing = Object.entries(decl.fields).filter(([name, f]) => f.required && raw[name] === undefined).map(([name]) => name);
  if (missing.length) throw new MetadataError(missing[0], '', requiredMessage(missing, decl.fields));
  if (decl.rules.length) {
    const present = setFields(raw);
    for (const rule of decl.rules) rule(md, present);
  }
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(decl.fields)) {
    const v = raw[name];
    if (v !== undefined) out[name] = decodeValue(name, field, v);
    else out[name] = Array.isArray(field.default) ? [...(field.default as readonly string[])] : field.default;
  }
  return out as Decoded<F>;
}

/** The declared fields that are set (under any spelling or alias), without decoding them. */
export function presentFields(decl: MetadataDeclaration<Fields>, md: Readonly<Record<string, string>>): Set<string> {
  return setFields(rawValues(decl, md));
}

function setFields(raw: Record<string, Found | undefined>): Set<string> {
  return new Set(Object.keys(raw).filter((k) => raw[k] !== undefined));
}

/**
 * A text the field accepts: what stands for a value that cannot be read where the metadata is
 * checked (the operator's stand-in for a `secretKeyRef`).
 */
export function acceptedText(field: Field): string {
  switch (field.type) {
    case 'string':
      return 'x';
    case 'boolean':
      return 'false';
    case 'integer':
      return String(field.min ?? Math.min(0, field.max ?? 0));
    case 'duration':
      return `${field.min ?? Math.min(0, field.max ?? 0)}ms`;
    case 'enum':
      return field.values[0];
    case 'list':
      return field.values?.[0] ?? 'x';
  }
}

/** The declared field that key `key` sets (its name or an alias, any case); undefined when none. */
export function fieldOfKey(decl: MetadataDeclaration<Fields>, key: string): Field | undefined {
  const l = key.toLowerCase();
  return Object.entries(decl.fields).find(([name, f]) => [name, ...(f.aliases ?? [])].some((n) => n.toLowerCase() === l))?.[1];
}

/** A value as found: the key it was given under, and its text. */
interface Found {
  key: string;
  text: string;
}

/** Each declared field's value as found (see `lookup`), undefined when unset. */
function rawValues(decl: MetadataDeclaration<Fields>, md: Readonly<Record<string, string>>): Record<string, Found | undefined> {
  const byLower = new Map<string, string[]>();
  for (const k of Object.keys(md)) {
    const l = k.toLowerCase();
    const list = byLower.get(l);
    if (list) list.push(k);
    else byLower.set(l, [k]);
  }
  const out: Record<string, Found | undefined> = {};
  for (const [name, field] of Object.entries(decl.fields)) out[name] = lookup(md, byLower, name, field.aliases ?? []);
  return out;
}

/** `metadata field "a" is required (what it is)`, or `metadata fields "a", "b" are required`. */
export function requiredMessage(missing: readonly string[], fields: Fields, suffix = ''): string {
  const names = missing.map((m) => `"${m}"`).join(', ');
  if (missing.length > 1) return `metadata fields ${names} are required${suffix}`;
  const doc = fields[missing[0]]?.doc;
  return `metadata field ${names} is required${suffix}${doc ? ` (${doc})` : ''}`;
}

/** Blank: absent, empty or whitespace only. */
function blank(v: string | undefined): v is undefined {
  return v === undefined || v.trim() === '';
}

/**
 * The value of a field: its own name as written, then other spellings of it, then each alias
 * likewise; the first that is not blank. Undefined when none is.
 */
function lookup(md: Readonly<Record<string, string>>, byLower: Map<string, string[]>, name: string, aliases: readonly string[]): Found | undefined {
  for (const n of [name, ...aliases]) {
    const exact = Object.hasOwn(md, n) ? md[n] : undefined;
    if (typeof exact === 'string' && !blank(exact)) return { key: n, text: exact };
    for (const k of byLower.get(n.toLowerCase()) ?? []) {
      const v = md[k];
      if (k !== n && typeof v === 'string' && !blank(v)) return { key: k, text: v };
    }
  }
  return undefined;
}

/** The value of field `name`; a problem names the key as the user wrote it (an alias, another case). */
function decodeValue(name: string, field: Field, found: Found): unknown {
  const raw = found.text;
  const shown = field.secret ? '(a secret value, not shown)' : quote(raw);
  const fail = (problem: string): never => {
    throw new MetadataError(name, '', `metadata field "${found.key}" ${shown} ${problem}`);
  };
  switch (field.type) {
    case 'string':
      return raw;
    case 'boolean': {
      const b = parseBoolean(raw);
      return b ?? fail('is not a boolean: use true or false (1/0, t/f, yes/no, y/n, on/off are read too)');
    }
    case 'integer': {
      const n = parseInteger(raw);
      if (n === undefined) return fail('is not a whole number');
      return inRange(n, field.min, field.max) ? n : fail(`is out of range: ${rangeText(field.min, field.max, String)}`);
    }
    case 'duration': {
      const ms = parseMetadataDuration(raw);
      if (ms === undefined) return fail('is not a duration: use a Go duration such as 30s, 1m30s or 500ms, or a whole number of seconds');
      return inRange(ms, field.min, field.max) ? ms : fail(`is out of range: ${rangeText(field.min, field.max, formatDuration)}`);
    }
    case 'enum':
      return oneOf(raw.trim(), field.values) ?? fail(`is not one of ${field.values.map((v) => `"${v}"`).join(', ')}`);
    case 'list': {
      const items = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
      if (!field.values) return items;
      const values = field.values;
      return items.map((i) => oneOf(i, values) ?? fail(`is not a comma-separated list of ${values.map((v) => `"${v}"`).join(', ')}`));
    }
  }
}

const TRUE = new Set(['true', 't', '1', 'yes', 'y', 'on']);
const FALSE = new Set(['false', 'f', '0', 'no', 'n', 'off']);

/** A metadata boolean (see the module comment); undefined when the text is none. */
export function parseBoolean(text: string): boolean | undefined {
  const s = text.trim().toLowerCase();
  if (TRUE.has(s)) return true;
  if (FALSE.has(s)) return false;
  return undefined;
}

/** Decimal digits with an optional sign, within the safe integers; undefined otherwise. */
export function parseInteger(text: string): number | undefined {
  const s = text.trim();
  if (!/^[+-]?\d{1,16}$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** A Go duration, or a bare whole number of seconds; milliseconds, undefined when neither. */
export function parseMetadataDuration(text: string): number | undefined {
  const s = text.trim();
  if (/^[+-]?\d+$/.test(s)) {
    const n = parseInteger(s);
    return n === undefined ? undefined : n * 1000;
  }
  return parseDuration(s);
}

function oneOf<V extends string>(v: string, values: readonly V[]): V | undefined {
  const l = v.toLowerCase();
  return values.find((x) => x.toLowerCase() === l);
}

function inRange(n: number, min: number | undefined, max: number | undefined): boolean {
  return (min === undefined || n >= min) && (max === undefined || n <= max);
}

function rangeText(min: number | undefined, max: number | undefined, f: (n: number) => string): string {
  if (min !== undefined && max !== undefined) return `from ${f(min)} to ${f(max)}`;
  return min !== undefined ? `at least ${f(min)}` : `at most ${f(max!)}`;
}

/** A value as it appears in a message: quoted, control characters escaped, at most 80 characters. */
function quote(v: string): string {
  return JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v);
}
