/** The configuration HTTP routes' schemas (http/schema.ts). */
import { route, type JsonSchema } from '../http/schema.ts';

const STORE = { store: 'the configuration store component' };
/** `key=a&key=b`: repeated for several keys; none: every key. */
const KEYS: Record<string, JsonSchema> = {
  key: { type: ['string', 'array'], items: { type: 'string', minLength: 1 }, minLength: 1, description: 'a key to read; repeat for several; none: every key' },
};

export const GET = route('configuration.get', 'Get configuration items', {
  params: STORE,
  query: KEYS,
  metadata: true,
  responses: { '200': '{key: {value, version, metadata}, …}', '204': 'none of the keys has an item' },
});

export const SUBSCRIBE = route('configuration.subscribe', "Subscribe to changes of configuration items: each goes to the app as POST /configuration/<store>/<key>", {
  params: STORE,
  query: KEYS,
  metadata: true,
  responses: { '200': '{"id": the subscription}' },
});

export const UNSUBSCRIBE = route('configuration.unsubscribe', 'Stop a configuration subscription', {
  params: { ...STORE, id: 'the subscription id subscribe answered' },
  responses: { '200': '{"ok": true}' },
});

export const CONFIGURATION_SCHEMAS = [GET, SUBSCRIBE, UNSUBSCRIBE];
