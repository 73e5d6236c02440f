/**
 * Which building-block API a pluggable component serves, from the gRPC services its socket
 * lists. A component type is `<api>.<socket name>`, e.g. `state.my-store`.
 */
import { COMPONENTS_PACKAGE } from './protos.ts';

export type PluggableApi = 'state' | 'pubsub' | 'bindings' | 'secretstores';

export const PLUGGABLE_APIS: PluggableApi[] = ['state', 'pubsub', 'bindings', 'secretstores'];

/** Full gRPC service names, as reflection lists them. */
export const SERVICES = {
  StateStore: `${COMPONENTS_PACKAGE}.StateStore`,
  TransactionalStateStore: `${COMPONENTS_PACKAGE}.TransactionalStateStore`,
  QueriableStateStore: `${COMPONENTS_PACKAGE}.QueriableStateStore`,
  PubSub: `${COMPONENTS_PACKAGE}.PubSub`,
  InputBinding: `${COMPONENTS_PACKAGE}.InputBinding`,
  OutputBinding: `${COMPONENTS_PACKAGE}.OutputBinding`,
  SecretStore: `${COMPONENTS_PACKAGE}.SecretStore`,
} as const;

/** The services that make a socket serve an API (any one of them is enough). */
export const API_SERVICES: Record<PluggableApi, string[]> = {
  state: [SERVICES.StateStore],
  pubsub: [SERVICES.PubSub],
  bindings: [SERVICES.InputBinding, SERVICES.OutputBinding],
  secretstores: [SERVICES.SecretStore],
};

export function apisServed(services: ReadonlySet<string>): PluggableApi[] {
  return PLUGGABLE_APIS.filter((api) => API_SERVICES[api].some((s) => services.has(s)));
}

export function isPluggableApi(category: string | undefined): category is PluggableApi {
  return (PLUGGABLE_APIS as string[]).includes(category ?? '');
}
