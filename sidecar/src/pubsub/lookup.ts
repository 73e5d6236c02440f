/**
 * Finding a loaded pub/sub component by name; for the APIs 404 ERR_PUBSUB_NOT_FOUND (an empty
 * name: ERR_PUBSUB_EMPTY), which the gRPC API answers INVALID_ARGUMENT, as the reference does.
 */
import type { ComponentRegistry } from '../components/registry.ts';
import { isPubSub, type PubSub } from '../components/pubsub/types.ts';
import { ApiError } from '../http/errors.ts';

export function pubsubByName(components: ComponentRegistry, name: string): PubSub | undefined {
  const c = components.get(name);
  if (!c || !c.spec.type.startsWith('pubsub.')) return undefined;
  return isPubSub(c.instance) ? c.instance : undefined;
}

export function requirePubsub(components: ComponentRegistry, name: string): PubSub {
  const p = pubsubByName(components, name);
  if (p) return p;
  if (!name) throw new ApiError(404, 'ERR_PUBSUB_EMPTY', 'the pub/sub name is empty');
  const loaded = components.namesOf('pubsub');
  throw new ApiError(404, 'ERR_PUBSUB_NOT_FOUND', `pub/sub "${name}" is not loaded; loaded pub/subs: ${loaded.join(', ') || 'none'}${components.notLoadedNote(name)}`);
}
