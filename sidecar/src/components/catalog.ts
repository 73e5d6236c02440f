/**
 * The catalog of component types this sidecar can instantiate, keyed by `spec.type`.
 * Built-in types are listed here with lazy loaders; pluggable components add their
 * discovered types at start (pluggable/), so the registry treats both alike.
 */
import type { ComponentCategory, ComponentTypeInfo } from './types.ts';

export class ComponentCatalog {
  private readonly types = new Map<string, ComponentTypeInfo>();

  add(type: string, info: ComponentTypeInfo): void {
    this.types.set(type, info);
  }

  get(type: string): ComponentTypeInfo | undefined {
    return this.types.get(type);
  }

  has(type: string): boolean {
    return this.types.has(type);
  }

  list(): string[] {
    return [...this.types.keys()].sort();
  }

  static categoryOf(type: string): ComponentCategory | undefined {
    const cat = type.split('.')[0];
    const known: ComponentCategory[] = ['state', 'bindings', 'secretstores', 'pubsub', 'configuration', 'lock', 'crypto', 'workflow', 'middleware'];
    return (known as string[]).includes(cat) ? (cat as ComponentCategory) : undefined;
  }
}

/**
 * Built-in component types. Each loader imports its module only when a Component of that
 * type is loaded. Add a new built-in component here.
 */
export function builtinCatalog(): ComponentCatalog {
  const c = new ComponentCatalog();
  c.add('secretstores.local.file', { category: 'secretstores', load: async () => (await import('./secretstores/local.file/index.ts')).factory });
  c.add('secretstores.local.env', { category: 'secretstores', load: async () => (await import('./secretstores/local.env/index.ts')).factory });
  c.add('bindings.cloud.eventrouter', { category: 'bindings', load: async () => (await import('./bindings/eventgrid/index.ts')).factory });
  c.add('bindings.azure.eventgrid', { category: 'bindings', load: async () => (await import('./bindings/eventgrid/index.ts')).factory });
  c.add('state.in-memory', { category: 'state', load: async () => (await import('./state/in-memory/index.ts')).factory });
  c.add('state.sqlite', { category: 'state', load: async () => (await import('./state/sqlite/index.ts')).factory });
  c.add('state.redis', { category: 'state', load: async () => (await import('./state/redis/index.ts')).factory });
  c.add('state.postgresql', { category: 'state', load: async () => (await import('./state/postgresql/index.ts')).factory });
  c.add('pubsub.in-memory', { category: 'pubsub', load: async () => (await import('./pubsub/in-memory/index.ts')).factory });
  c.add('pubsub.redis', { category: 'pubsub', load: async () => (await import('./pubsub/redis/index.ts')).factory });
  c.add('pubsub.mqtt3', { category: 'pubsub', load: async () => (await import('./pubsub/mqtt3/index.ts')).factory });
  c.add('bindings.mqtt3', { category: 'bindings', load: async () => (await import('./bindings/mqtt3/index.ts')).factory });
  c.add('configuration.redis', { category: 'configuration', load: async () => (await import('./configuration/redis/index.ts')).factory });
  c.add('configuration.postgresql', { category: 'configuration', load: async () => (await import('./configuration/postgresql/index.ts')).factory });
  c.add('bindings.sftp', { category: 'bindings', load: async () => (await import('./bindings/sftp/index.ts')).factory });
  c.add('bindings.redis', { category: 'bindings', load: async () => (await import('./bindings/redis/index.ts')).factory });
  c.add('lock.redis', { category: 'lock', load: async () => (await import('./lock/redis/index.ts')).factory });
  c.add('crypto.dapr.localstorage', { category: 'crypto', load: async () => (await import('./crypto/localstorage/index.ts')).factory });
  c.add('crypto.dapr.jwks', { category: 'crypto', load: async () => (await import('./crypto/jwks/index.ts')).factory });
  return c;
}
