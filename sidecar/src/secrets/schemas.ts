/** The secrets HTTP routes' schemas (http/schema.ts). */
import { route } from '../http/schema.ts';

export const GET = route('secrets.get', 'Get a secret', {
  params: { store: 'the secret store component', key: 'the secret name' },
  metadata: true,
  responses: { '200': 'the secret: {key: value, …}', '204': 'the store has no such secret' },
});

export const BULK = route('secrets.bulk', 'Get every secret of a store', {
  params: { store: 'the secret store component' },
  metadata: true,
  responses: { '200': '{secretName: {key: value}, …}' },
});

export const SECRETS_SCHEMAS = [GET, BULK];
