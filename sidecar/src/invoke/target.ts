/** The `<app-id>` segment of an invocation: an app id, optionally `.<namespace>`. */
export interface AppTarget {
  appId: string;
  namespace: string;
}

const APP_ID = /^[A-Za-z0-9]([A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$/;

/**
 * `orders` → {orders, <own namespace>}; `orders.prod` → {orders, prod}. The last dot splits, as
 * app ids have none. Undefined when the text is no app id at all.
 */
export function parseAppTarget(text: string, ownNamespace: string): AppTarget | undefined {
  const dot = text.lastIndexOf('.');
  const appId = dot < 0 ? text : text.slice(0, dot);
  const namespace = dot < 0 ? ownNamespace : text.slice(dot + 1);
  if (!APP_ID.test(appId) || !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(namespace)) return undefined;
  return { appId, namespace };
}
