/**
 * Pre-component hook: discovers the pluggable components listening in the socket folder and adds
 * their types (`<api>.<socket name>`, pluggable: true) to the catalog, so the registry creates
 * them like built-in ones. A Component whose type names no known type and no socket yet gets a
 * pluggable type too: its init waits up to initTimeout for the socket to appear.
 */
import { ComponentCatalog } from '../components/catalog.ts';
import type { Component } from '../components/types.ts';
import type { SidecarContext } from '../context.ts';
import { apisServed, isPluggableApi, type PluggableApi } from './apis.ts';
import type { PluggableHost } from './component.ts';
import { SocketDirectory } from './discovery.ts';
import { PluggableBinding } from './bindings.ts';
import { PluggablePubSub } from './pubsub.ts';
import { PluggableSecretStore } from './secretstore.ts';
import { PluggableStateStore } from './state.ts';
import { waitForSockets } from './wait.ts';

const ADAPTERS: Record<PluggableApi, (host: PluggableHost, socketName: string) => Component> = {
  state: (host, name) => new PluggableStateStore(host, name),
  bindings: (host, name) => new PluggableBinding(host, name),
  secretstores: (host, name) => new PluggableSecretStore(host, name),
  pubsub: (host, name) => new PluggablePubSub(host, name),
};

export async function setup(ctx: SidecarContext): Promise<void> {
  const host: PluggableHost = { sockets: new SocketDirectory(ctx.options.componentsSocketsFolder, ctx.log), log: ctx.log };
  const catalog = ctx.components.catalog;
  const register = (api: PluggableApi, socketName: string, h: PluggableHost = host): string | undefined => {
    const make = ADAPTERS[api];
    if (socketName === '') return undefined;
    const type = `${api}.${socketName}`;
    const existing = catalog.get(type);
    if (existing && !existing.pluggable) ctx.log.warn({ type }, `pluggable component socket "${socketName}" replaces the built-in type ${type}`);
    catalog.add(type, { category: api, pluggable: true, load: async () => () => make(h, socketName) });
    return type;
  };

  await waitForSockets(host.sockets.folder, ctx.options.waitForSockets ?? [], ctx.log);
  for (const socket of await host.sockets.discoverAll()) {
    const apis = apisServed(socket.services);
    if (apis.length === 0) {
      const served = [...socket.services].sort().join(', ') || 'none';
      ctx.log.warn({ socket: socket.path }, `socket ${socket.path} serves no pluggable component API (services: ${served}); ignored`);
      continue;
    }
    const types = apis.map((api) => register(api, socket.name));
    ctx.log.info({ socket: socket.path, types }, `pluggable component discovered: ${types.join(', ')}`);
  }

  // components whose socket is not there yet: their init waits for it (up to initTimeout)
  const registerMissing = (type: string): void => {
    const category = ComponentCatalog.categoryOf(type);
    if (!isPluggableApi(category) || catalog.has(type)) return;
    const builtins = catalog.list().filter((t) => t.startsWith(`${category}.`));
    const hint = `"${type}" is not a built-in type either (built-in ${category} types: ${builtins.join(', ') || 'none'})`;
    register(category, type.slice(category.length + 1), { ...host, missingHint: hint });
  };
  for (const c of ctx.resources.components) registerMissing(c.spec.type);
  // a Component added later (hot update) may name a socket that appeared since start
  ctx.components.onUnknownType(registerMissing);
}
