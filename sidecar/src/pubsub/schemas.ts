/**
 * The publish routes' schemas (http/schema.ts). Both read their body raw: publish takes any
 * content as the event; bulk publish's JSON array is checked once parsed (its member names
 * matched case-insensitively first, as clients of the ecosystem's API rely on: entryID).
 */
import { route, STRING_MAP } from '../http/schema.ts';

const TARGET = { pubsub: 'the pub/sub component', '*:topic': 'the topic (may hold /)' };

export const PUBLISH = route('pubsub.publish', 'Publish an event', {
  params: TARGET,
  metadata: true,
  anyBody: 'the event, any content type; JSON and text become the CloudEvent data, a CloudEvent (application/cloudevents+json) is sent as is',
  responses: { '204': 'published' },
});

export const BULK_PUBLISH = route('pubsub.bulk', 'Publish several events (alpha)', {
  params: TARGET,
  metadata: true,
  ownBody: {
    type: 'array',
    items: {
      type: 'object',
      required: ['entryId', 'event'],
      properties: { entryId: { type: 'string', minLength: 1 }, event: { description: 'any JSON value, or a string' }, contentType: { type: ['string', 'null'] }, metadata: STRING_MAP },
    },
    description: 'send a JSON array of {entryId, event, contentType, metadata}',
  },
  responses: { '204': 'all published', '500': 'some failed: ERR_PUBSUB_PUBLISH_MESSAGE with failedEntries' },
});

export const PUBSUB_SCHEMAS = [PUBLISH, BULK_PUBLISH];
