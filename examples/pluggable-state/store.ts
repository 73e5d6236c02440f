/**
 * The data side of the example pluggable state store: an in-memory key/value map with etags,
 * TTLs and all-or-nothing transactions. It knows nothing about gRPC, so you can swap it for
 * your own database client and keep main.ts as it is.
 */

/** Thrown for etag problems; main.ts turns them into the gRPC statuses rt expects. */
export class EtagError extends Error {
  readonly kind: 'mismatch' | 'invalid';
  constructor(kind: 'mismatch' | 'invalid', message: string) {
    super(message);
    this.kind = kind;
  }
}

/** Thrown for a bad request (e.g. a ttlInSeconds that is not a number). */
export class BadRequestError extends Error {}

export interface Entry {
  value: Buffer;
  /** A version number as text; every write makes a new one. */
  etag: string;
  contentType: string;
  /** Epoch ms; undefined = never expires. */
  expiresAt?: number;
}

export interface SetOp {
  kind: 'set';
  key: string;
  value: Buffer;
  etag?: string;
  firstWrite: boolean;
  contentType: string;
  metadata: Record<string, string>;
}

export interface DeleteOp {
  kind: 'delete';
  key: string;
  etag?: string;
  firstWrite: boolean;
}

export type WriteOp = SetOp | DeleteOp;

/** One store per component instance (the `x-component-instance` header). */
export class MemoryStore {
  private readonly items = new Map<string, Entry>();
  private version = 0;

  get(key: string): Entry | undefined {
    const e = this.items.get(key);
    if (e?.expiresAt !== undefined && e.expiresAt <= Date.now()) {
      this.items.delete(key);
      return undefined;
    }
    return e;
  }

  keys(): string[] {
    return [...this.items.keys()].filter((k) => this.get(k) !== undefined).sort();
  }

  /** The live items (for queries). */
  entries(): [string, Entry][] {
    return this.keys().map((k) => [k, this.items.get(k)!]);
  }

  /**
   * Applies the operations all or nothing. Each operation is checked against the state the
   * earlier ones leave (staged in `next`); nothing is stored unless every check passes.
   * (Node runs this synchronously, so no other call can interleave.)
   */
  apply(ops: WriteOp[]): void {
    const next = new Map<string, Entry | undefined>();
    const current = (key: string) => (next.has(key) ? next.get(key) : this.get(key));
    let version = this.version;
    for (const op of ops) {
      checkEtag(op.key, current(op.key), op.etag, op.firstWrite);
      if (op.kind === 'delete') next.set(op.key, undefined);
      else next.set(op.key, { value: op.value, etag: String(++version), contentType: op.contentType, expiresAt: ttl(op.metadata) });
    }
    this.version = version;
    for (const [key, entry] of next) {
      if (entry) this.items.set(key, entry);
      else this.items.delete(key);
    }
  }
}

/**
 * The usual etag rules of state stores:
 * - an etag is given: the key must exist with exactly that etag;
 * - first-write without an etag: the key must not exist yet;
 * - otherwise the last write wins.
 */
function checkEtag(key: string, current: Entry | undefined, etag: string | undefined, firstWrite: boolean): void {
  if (etag !== undefined && etag !== '') {
    if (!/^[1-9][0-9]{0,15}$/.test(etag)) throw new EtagError('invalid', `invalid etag "${etag.slice(0, 40)}" for key "${key}": etags of this store are version numbers`);
    if (!current || current.etag !== etag) throw new EtagError('mismatch', `etag mismatch for key "${key}"`);
  } else if (firstWrite && current) {
    throw new EtagError('mismatch', `key "${key}" exists and no etag was given (first-write)`);
  }
}

/** `ttlInSeconds` metadata → expiry time; absent, empty, 0 or -1 = never. */
function ttl(metadata: Record<string, string>): number | undefined {
  const raw = metadata.ttlInSeconds;
  if (raw === undefined || raw === '') return undefined;
  const n = /^-?\d{1,10}$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!(n >= -1 && n <= 2_147_483_647)) throw new BadRequestError(`ttlInSeconds must be a whole number of seconds from -1 to 2147483647, got "${raw.slice(0, 40)}"`);
  return n <= 0 ? undefined : Date.now() + n * 1000;
}
