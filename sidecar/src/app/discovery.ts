/**
 * Asks the app what it declares: programmatic subscriptions (GET /rt/subscribe, else
 * /dapr/subscribe) and actor types (GET /rt/config, else /dapr/config).
 */
import { parseActorsConfig, type ActorsConfig } from '../actors/config.ts';
import { parseBulkSubscribe, type SubscriptionInfo } from '../resources/types.ts';
import type { AppChannel } from './channel.ts';

export async function discoverSubscriptions(app: AppChannel): Promise<SubscriptionInfo[]> {
  // an empty list is no declaration either: a catch-all route may answer [] to any path
  const body = await app.discover('/rt/subscribe', '/dapr/subscribe', (b) => Array.isArray(b) && b.length > 0);
  if (!Array.isArray(body)) return [];
  const out: SubscriptionInfo[] = [];
  for (const s of body) {
    if (typeof s !== 'object' || s === null) continue;
    const o = s as Record<string, unknown>;
    if (typeof o.pubsubname !== 'string' || typeof o.topic !== 'string') continue;
    const rules: SubscriptionInfo['rules'] = [];
    const routes = o.routes as Record<string, unknown> | undefined;
    if (routes && typeof routes === 'object') {
      if (Array.isArray(routes.rules)) {
        for (const r of routes.rules) {
          if (r && typeof r === 'object' && typeof (r as Record<string, unknown>).path === 'string') {
            const rr = r as Record<string, unknown>;
            rules.push({ match: typeof rr.match === 'string' ? rr.match : '', path: rr.path as string });
          }
        }
      }
      if (typeof routes.default === 'string') rules.push({ match: '', path: routes.default });
    } else if (typeof o.route === 'string') {
      rules.push({ match: '', path: o.route });
    }
    const metadata: Record<string, string> = {};
    if (o.metadata && typeof o.metadata === 'object') for (const [k, v] of Object.entries(o.metadata)) metadata[k] = String(v);
    out.push({
      pubsubname: o.pubsubname,
      topic: o.topic,
      metadata,
      rules,
      deadLetterTopic: typeof o.deadLetterTopic === 'string' ? o.deadLetterTopic : '',
      type: 'PROGRAMMATIC',
      ...bulkOf(o.bulkSubscribe),
    });
  }
  return out;
}

/** The app's bulkSubscribe entry; one that is malformed is ignored (one message at a time). */
function bulkOf(v: unknown): Pick<SubscriptionInfo, 'bulkSubscribe'> {
  try {
    const b = parseBulkSubscribe(v, (field, problem) => {
      throw new Error(`${field} ${problem}`);
    });
    return b ? { bulkSubscribe: b } : {};
  } catch {
    return {};
  }
}

/** The actor types the app hosts and their settings (actors/config.ts reads them). */
export async function discoverConfig(app: AppChannel): Promise<ActorsConfig> {
  return parseActorsConfig(await app.discover('/rt/config', '/dapr/config', hasEntities));
}

function hasEntities(b: unknown): b is { entities: unknown[] } {
  return !!b && typeof b === 'object' && Array.isArray((b as Record<string, unknown>).entities);
}
