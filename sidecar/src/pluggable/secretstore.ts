/** A pluggable secret store: the SecretStore interface over dapr.proto.components.v1.SecretStore. */
import * as grpc from '@grpc/grpc-js';
import type { SecretStore } from '../components/types.ts';
import { SERVICES } from './apis.ts';
import { PluggableComponent } from './component.ts';

export class PluggableSecretStore extends PluggableComponent implements SecretStore {
  protected readonly api = 'secretstores';
  private featureList: string[] = [];

  protected async initialize(): Promise<void> {
    this.featureList = await this.initAndFeatures(SERVICES.SecretStore);
  }

  protected pingService(): string {
    return SERVICES.SecretStore;
  }

  /** The contract shows capabilities for state stores and bindings only. */
  capabilities(): string[] {
    return [];
  }

  /** What the component's Features call reported. */
  features(): string[] {
    return [...this.featureList];
  }

  async getSecret(name: string, metadata: Record<string, string> = {}): Promise<Record<string, string> | undefined> {
    try {
      const res = await this.call<{ data: Record<string, string> }>(SERVICES.SecretStore, 'Get', { key: name, metadata });
      return res.data;
    } catch (e) {
      // NOT_FOUND is how a component says "no such secret"
      if ((e as Error).cause && ((e as Error).cause as grpc.ServiceError).code === grpc.status.NOT_FOUND) return undefined;
      throw e;
    }
  }

  async bulkGetSecret(metadata: Record<string, string> = {}): Promise<Record<string, Record<string, string>>> {
    const res = await this.call<{ data: Record<string, { secrets: Record<string, string> }> }>(SERVICES.SecretStore, 'BulkGet', { metadata });
    return Object.fromEntries(Object.entries(res.data).map(([name, s]) => [name, s.secrets]));
  }
}
