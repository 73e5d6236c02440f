/**
 * secretstores.local.env: secrets are environment variables of the sidecar.
 * Metadata `prefix` limits and strips a prefix (e.g. prefix APP_ exposes APP_DB as "DB").
 */
import { decodeMetadata, defineMetadata } from '../../metadata/decode.ts';
import type { ComponentSpec, SecretStore } from '../../types.ts';

export const METADATA = defineMetadata('secretstores.local.env', {
  prefix: { type: 'string', default: '' },
});

class LocalEnvSecretStore implements SecretStore {
  private prefix = '';

  async init(spec: ComponentSpec): Promise<void> {
    this.prefix = decodeMetadata(METADATA, spec.metadata).prefix;
  }

  capabilities(): string[] {
    return [];
  }

  async getSecret(name: string): Promise<Record<string, string> | undefined> {
    const v = process.env[this.prefix + name];
    return v === undefined ? undefined : { [name]: v };
  }

  async bulkGetSecret(): Promise<Record<string, Record<string, string>>> {
    const out: Record<string, Record<string, string>> = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (v !== undefined && k.startsWith(this.prefix)) {
        const name = k.slice(this.prefix.length);
        out[name] = { [name]: v };
      }
    }
    return out;
  }

  async close(): Promise<void> {}
}

export const factory = () => new LocalEnvSecretStore();
