/** Errors a state store throws; the state API maps them to the ecosystem's statuses. */

/** The stored etag differs from the one sent (→ 409 ERR_STATE_SAVE / ERR_STATE_DELETE). */
export class EtagMismatchError extends Error {
  readonly key: string;
  constructor(key: string, message = `possible etag mismatch for key "${key}": the item was changed or removed`) {
    super(message);
    this.name = 'EtagMismatchError';
    this.key = key;
  }
}

/** The etag sent cannot be an etag of this store (→ 400). */
export class EtagInvalidError extends Error {
  readonly key: string;
  constructor(key: string, message = `invalid etag for key "${key}"`) {
    super(message);
    this.name = 'EtagInvalidError';
    this.key = key;
  }
}

/** A request a store cannot accept (e.g. a bad ttlInSeconds, a key too long) (→ 400). */
export class StateRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateRequestError';
  }
}
