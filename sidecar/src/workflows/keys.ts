/**
 * Where an app's workflow state lives in the store, under `<appId>||wf||`: per instance its
 * record (`<id>||m`) and journal batches (`<id>||h<n>`); per replica the index shards of its
 * active instances; the registry of replicas sharing the store. (The catalog's keys: catalog.ts.)
 */
export class Keys {
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  record(id: string): string {
    return `${this.prefix}${id}||m`;
  }

  batch(id: string, n: number): string {
    return `${this.prefix}${id}||h${n}`;
  }

  index(replica: string, shard: number): string {
    return `${this.prefix}index||${replica}||${shard}`;
  }

  get replicas(): string {
    return `${this.prefix}replicas`;
  }
}

/** JSON bytes of a value, as every key holds them. */
export const encode = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

export function decode<T>(value: Uint8Array): T {
  return JSON.parse(Buffer.from(value).toString('utf8')) as T;
}
