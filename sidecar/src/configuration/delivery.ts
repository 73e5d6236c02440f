/**
 * How an HTTP subscription's changes reach the app, as the reference runtime sends them: for
 * each changed key, `POST /configuration/<store>/<key>` with `{"id": <subscription>, "items":
 * {<key>: {value, version, metadata}}}` (store and key percent-encoded here, so that a key
 * holding `/` or `?` stays one path segment). Any 2xx is taken; otherwise, or when the app does
 * not answer, the POST is sent again a few times, then the change is logged and dropped. A
 * key's next change waits for this one (order per key).
 */
import type { Logger } from 'pino';
import type { AppChannel } from '../app/channel.ts';
import type { ConfigurationItems } from '../components/configuration/types.ts';
import { errorMessage } from '../http/errors.ts';
import { itemsJson } from './items.ts';
import type { ConfigurationSink } from './service.ts';

/** Waits between attempts of one POST (ms): four attempts in all. */
const BACKOFF = [100, 400, 1600];

export function appPath(store: string, key: string): string {
  return `/configuration/${encodeURIComponent(store)}/${encodeURIComponent(key)}`;
}

export function appSink(app: AppChannel, store: string, log: Logger): ConfigurationSink {
  return async (id: string, items: ConfigurationItems) => {
    for (const key of Object.keys(items)) {
      const path = appPath(store, key);
      const body = { id, items: itemsJson({ [key]: items[key] }) };
      for (let attempt = 0; ; attempt++) {
        let why: string;
        try {
          const res = await app.postJson(path, body);
          if (res.status >= 200 && res.status < 300) break;
          why = `status ${res.status}`;
        } catch (e) {
          why = errorMessage(e);
        }
        if (attempt >= BACKOFF.length) {
          log.warn({ store, subscription: id, key, err: why }, 'the app did not take a configuration change; dropped');
          break;
        }
        await new Promise((r) => setTimeout(r, BACKOFF[attempt]).unref());
      }
    }
  };
}
