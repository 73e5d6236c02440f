/**
 * The secrets building block for both API surfaces: finds the store (400 listing the loaded
 * ones when unknown), reads one secret or all of them, and maps store failures to 500.
 */
import type { ComponentRegistry } from '../components/registry.ts';
import type { SecretStore } from '../components/types.ts';
import { ApiError, badRequest, errorMessage, malformed } from '../http/errors.ts';
import { componentCall, type ResiliencyService } from '../resiliency/service.ts';

export class SecretsService {
  private readonly components: ComponentRegistry;
  private readonly resiliency?: ResiliencyService;

  constructor(components: ComponentRegistry, resiliency?: ResiliencyService) {
    this.components = components;
    this.resiliency = resiliency;
  }

  /** A call to the store under its outbound policy. */
  private outbound<T>(name: string, call: () => Promise<T>): Promise<T> {
    return componentCall(this.resiliency, this.components, name, 'Outbound', call);
  }

  private store(name: string): SecretStore {
    const store = name ? this.components.secretStore(name) : undefined;
    if (!store) {
      const loaded = this.components.namesOf('secretstores');
      throw badRequest('ERR_SECRET_STORE_NOT_FOUND', `secret store "${name.slice(0, 80)}" is not found; loaded secret stores: ${loaded.join(', ') || 'none'}${this.components.notLoadedNote(name)}`);
    }
    return store;
  }

  /** One secret as a map of its keys to values; undefined when the store does not have it. */
  async get(storeName: string, key: string, metadata?: Record<string, string>): Promise<Record<string, string> | undefined> {
    const store = this.store(storeName);
    if (!key) throw malformed('"key" is required: the name of the secret');
    try {
      const secret = await this.outbound(storeName, () => store.getSecret(key, metadata));
      return secret ? { ...secret } : undefined;
    } catch (e) {
      throw failed(storeName, e);
    }
  }

  /** Every secret of the store: secret name → its keys and values. */
  async bulk(storeName: string, metadata?: Record<string, string>): Promise<Record<string, Record<string, string>>> {
    const store = this.store(storeName);
    try {
      return await this.outbound(storeName, () => store.bulkGetSecret(metadata));
    } catch (e) {
      throw failed(storeName, e);
    }
  }
}

function failed(store: string, e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(500, 'ERR_SECRET_GET', `failed getting secrets from store ${store}: ${errorMessage(e)}`);
}
