/**
 * secretstores.local.file: secrets from a JSON file (`secretsFile`). Nested objects are
 * flattened with `nestedSeparator` (default ":"); `multiValued: "true"` (a boolean) keeps top-level
 * objects as one secret with several keys.
 */
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { decodeMetadata, defineMetadata } from '../../metadata/decode.ts';
import type { ComponentSpec, SecretStore } from '../../types.ts';

export const METADATA = defineMetadata('secretstores.local.file', {
  secretsFile: { type: 'string', required: true, doc: 'path of a JSON file' },
  nestedSeparator: { type: 'string', default: ':' },
  multiValued: { type: 'boolean', default: false },
});

class LocalFileSecretStore implements SecretStore {
  private secrets: Record<string, Record<string, string>> = {};

  async init(spec: ComponentSpec): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const file = md.secretsFile;
    const path = isAbsolute(file) ? file : resolve(file);
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(path, 'utf8'));
    } catch (e) {
      throw new Error(`cannot read secrets file ${path}: ${(e as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`secrets file ${path} must hold a JSON object`);
    const sep = md.nestedSeparator;
    const multi = md.multiValued;
    const secrets: Record<string, Record<string, string>> = {};
    for (const [k, v] of Object.entries(parsed as Record<string, unknown>)) {
      if (multi && typeof v === 'object' && v !== null) {
        const flat: Record<string, string> = {};
        flatten(v, '', sep, flat);
        secrets[k] = flat;
      } else {
        const flat: Record<string, string> = {};
        flatten(v, k, sep, flat);
        for (const [fk, fv] of Object.entries(flat)) secrets[fk] = { [fk]: fv };
      }
    }
    this.secrets = secrets;
  }

  capabilities(): string[] {
    return [];
  }

  async getSecret(name: string): Promise<Record<string, string> | undefined> {
    return this.secrets[name];
  }

  async bulkGetSecret(): Promise<Record<string, Record<string, string>>> {
    return { ...this.secrets };
  }

  async close(): Promise<void> {}
}

function flatten(v: unknown, prefix: string, sep: string, out: Record<string, string>): void {
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    for (const [k, inner] of Object.entries(v)) flatten(inner, prefix ? `${prefix}${sep}${k}` : k, sep, out);
  } else {
    out[prefix] = typeof v === 'string' ? v : JSON.stringify(v);
  }
}

export const factory = () => new LocalFileSecretStore();
