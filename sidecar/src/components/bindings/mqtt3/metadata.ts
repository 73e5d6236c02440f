/**
 * The metadata of bindings.mqtt3: the MQTT connection fields (pubsub.mqtt3's), the topic, the
 * client id the binding's two connections are named after, and how often an event the app
 * refused is offered again. Kept apart from the component's code (no MQTT.js).
 */
import { defineMetadata } from '../../metadata/decode.ts';
import { CERT_WITH_KEY, MQTT_CONNECTION } from '../../pubsub/mqtt3/metadata.ts';

export const METADATA = defineMetadata(
  'bindings.mqtt3',
  {
    ...MQTT_CONNECTION,
    topic: { type: 'string', required: true, doc: 'the topic events are read from and, by default, published to' },
    consumerID: { type: 'string', required: true, doc: 'the client id: the connections are "<consumerID>-consumer" and "<consumerID>-producer"' },
    /** Retries of an event the app refused, 5 s apart; -1 retries until it is taken. */
    backOffMaxRetries: { type: 'integer', default: 0, min: -1 },
    /** Which sides the binding serves; default both. */
    direction: { type: 'list', values: ['input', 'output'], default: ['input', 'output'] },
    /** Deprecated in the reference, which always uses QoS 1: read and ignored. */
    qos: { type: 'string' },
  },
  [CERT_WITH_KEY],
);
