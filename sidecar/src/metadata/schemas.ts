/** The metadata and shutdown HTTP routes' schemas (http/schema.ts). */
import { route } from '../http/schema.ts';

export const METADATA_GET = route('metadata.get', "The sidecar's metadata: app id, components, subscriptions, actors, extended attributes", {
  responses: { '200': 'the metadata document' },
});

export const METADATA_PUT = route('metadata.put', 'Set an extended metadata attribute', {
  params: { name: 'the attribute name' },
  anyBody: 'the value, as text',
  responses: { '204': 'set' },
});

export const SHUTDOWN = route('metadata.shutdown', 'Stop the sidecar gracefully (answers first)', { anyBody: 'ignored', responses: { '204': 'stopping' } });

export const METADATA_SCHEMAS = [METADATA_GET, METADATA_PUT, SHUTDOWN];
