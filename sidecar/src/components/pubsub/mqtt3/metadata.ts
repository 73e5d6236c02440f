/**
 * The metadata of pubsub.mqtt3 and bindings.mqtt3, as the reference's components read it: the
 * broker connection (url with credentials, TLS material, client id, clean session, retain) shared
 * by both, and each one's own (the pub/sub's qos; the binding's topic and redelivery count). Kept
 * apart from the components' code, so that the operator reads the declarations without MQTT.js.
 */
import { MetadataError, defineMetadata, metadataFields, type MetadataRule } from '../../metadata/decode.ts';

/** The connection fields of both MQTT components. */
export const MQTT_CONNECTION = metadataFields({
  url: { type: 'string', required: true, secret: true, doc: 'the broker: tcp://[user][:password]@host[:port], or ssl:// for TLS' },
  retain: { type: 'boolean', default: false },
  cleanSession: { type: 'boolean', default: false },
  caCert: { type: 'string' },
  clientCert: { type: 'string', secret: true },
  clientKey: { type: 'string', secret: true },
});

/** A client certificate is used with its key: one without the other is a mistake, said at load. */
export const CERT_WITH_KEY: MetadataRule = (_md, present) => {
  if (present.has('clientCert') !== present.has('clientKey')) {
    const [set, unset] = present.has('clientCert') ? ['clientCert', 'clientKey'] : ['clientKey', 'clientCert'];
    throw new MetadataError(unset, '', `metadata field "${set}" is set but "${unset}" is not: a TLS client certificate needs its key, and the key its certificate`);
  }
};

export const METADATA = defineMetadata(
  'pubsub.mqtt3',
  {
    ...MQTT_CONNECTION,
    /** The client id at the broker; default the app id. */
    consumerID: { type: 'string' },
    qos: { type: 'integer', default: 1, min: 0, max: 2 },
  },
  [CERT_WITH_KEY],
);
