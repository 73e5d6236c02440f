/**
 * pubsub.mqtt3 against a real Mosquitto (a broker of this suite's own, test/services/mosquitto.ts):
 * QoS 0 and 1, retain, wildcard subscriptions, acknowledgement only once the handler took the
 * message (a message refused is offered again; one never taken comes back in the next session),
 * a broker restart that loses no QoS 1 message, and metadata errors. Topic matching has a
 * property test of its own.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBrokerUrl } from '../../sidecar/src/components/pubsub/mqtt3/connection.ts';
import { factory } from '../../sidecar/src/components/pubsub/mqtt3/index.ts';
import { MetadataError } from '../../sidecar/src/components/metadata/decode.ts';
import { filterProblem, publishTopicProblem, topicMatches } from '../../sidecar/src/components/pubsub/mqtt3/topics.ts';
import type { PubSub, PubSubMessage } from '../../sidecar/src/components/pubsub/types.ts';
import { ApiError } from '../../sidecar/src/http/errors.ts';
import { requireService } from '../services/ci.ts';
import { makeTestCa } from '../services/ca.ts';
import { mosquittoMissing, startMosquitto, type Mosquitto } from '../services/mosquitto.ts';
import { mosquittoForSuite, sessionBacklog, uniqueMqttName, until } from '../services/mqtt-suite.ts';
import { componentContext, spec } from '../state/helpers.ts';

const missing = mosquittoMissing();
const available = requireService('Mosquitto', !missing, missing ?? '');

let broker: Mosquitto;
const opened = new Set<PubSub>();

async function open(md: Record<string, string> = {}, appId = 'app'): Promise<PubSub> {
  const p = factory() as PubSub;
  try {
    await p.init(spec('pubsub.mqtt3', { url: broker.url, ...md }), { ...componentContext, appId });
  } catch (e) {
    await p.close();
    throw e;
  }
  opened.add(p);
  return p;
}

async function closeOne(p: PubSub): Promise<void> {
  opened.delete(p);
  await p.close();
}

const unique = uniqueMqttName;
const text = (m: PubSubMessage) => Buffer.from(m.data).toString();


describe.skipIf(!available)('pubsub.mqtt3 against a real Mosquitto', () => {
  mosquittoForSuite(opened, (b) => (broker = b));

  it('delivers a QoS 1 message and acknowledges it: the next session of the same client does not get it again', async () => {
    const topic = unique('qos1');
    const client = unique('client');
    const p = await open({ consumerID: client });
    const got: PubSubMessage[] = [];
    p.subscribe(topic, {}, async (m) => void got.push(m));
    await p.publish(topic, Buffer.from('{"a":1}'), {}, 'application/json');
    await until(() => got.length === 1, () => got.map(text));
    expect(text(got[0])).toBe('{"a":1}');
    expect(got[0]).toMatchObject({ topic, metadata: { retained: 'false' } });
    // the PUBACK was written when the handler resolved (before the poll above saw it); the close
    // sends DISCONNECT after it on the same socket
    await closeOne(p);
    expect(await sessionBacklog(broker.url, client, topic)).toEqual([]);
  });

  it('QoS 0 publishes and subscriptions deliver too', async () => {
    const topic = unique('qos0');
    const p = await open({ qos: '0', consumerID: unique('client') });
    const got: string[] = [];
    p.subscribe(topic, {}, async (m) => void got.push(text(m)));
    for (let i = 0; i < 5; i++) await p.publish(topic, Buffer.from(`m${i}`));
    await until(() => got.length === 5, () => got);
    expect(got.sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('retain: the broker keeps the last message for later subscribers (component default and per publish); a bad retain is a 400', async () => {
    const kept = unique('retained');
    const p = await open({ retain: 'true', consumerID: unique('client') });
    await p.publish(kept, Buffer.from('last known good'));
    const perMessage = unique('retained-per-message');
    const q = await open({ consumerID: unique('client') });
    await q.publish(perMessage, Buffer.from('kept'), { retain: 'true' });
    const notKept = unique('not-retained');
    await p.publish(notKept, Buffer.from('gone'), { retain: 'false' });
    const got: PubSubMessage[] = [];
    const sub = await open({ consumerID: unique('client'), cleanSession: 'true' });
    // notKept first: the broker takes one client's SUBSCRIBEs in order, so once the others' retained
    // messages are here its subscription is in place, and a marker published to it now comes after
    // anything its subscription brought
    for (const t of [notKept, kept, perMessage]) sub.subscribe(t, {}, async (m) => void got.push(m));
    await until(() => got.length === 2, () => got.map(text));
    await p.publish(notKept, Buffer.from('marker'), { retain: 'false' });
    await until(() => got.some((m) => text(m) === 'marker'), () => got.map(text));
    got.splice(got.findIndex((m) => text(m) === 'marker'), 1);
    const byTopic = (a: string[], b: string[]) => a[0].localeCompare(b[0]);
    expect(got.map((m) => [m.topic, text(m), m.metadata.retained]).sort(byTopic)).toEqual(
      [
        [kept, 'last known good', 'true'],
        [perMessage, 'kept', 'true'],
      ].sort(byTopic),
    );
    const bad = await p.publish(kept, Buffer.from('x'), { retain: 'maybe' }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ApiError);
    expect((bad as ApiError).status).toBe(400);
    expect((bad as ApiError).message).toMatch(/retain.*not a boolean/);
  });

  it('wildcards: # takes every level below, + one level; an exact subscription wins over a matching filter', async () => {
    const base = unique('home');
    const p = await open({ consumerID: unique('client') });
    const got: Record<string, string[]> = { hash: [], plus: [], exact: [] };
    p.subscribe(`${base}/groundfloor/#`, {}, async (m) => void got.hash.push(m.topic));
    p.subscribe(`${base}/firstfloor/+/temperature`, {}, async (m) => void got.plus.push(m.topic));
    p.subscribe(`${base}/cellar/door`, {}, async (m) => void got.exact.push(m.topic));
    const published = [`${base}/groundfloor/foo/bar`, `${base}/groundfloor`, `${base}/firstfloor/kitchen/temperature`, `${base}/firstfloor/kitchen/humidity`, `${base}/firstfloor/a/b/temperature`, `${base}/cellar/door`];
    for (const t of published) await p.publish(t, Buffer.from('x'));
    // markers, one per subscription, from the same client: the broker keeps one publisher's order,
    // so a message wrongly matched would have come before them
    const markers = [`${base}/groundfloor/marker`, `${base}/firstfloor/marker/temperature`, `${base}/cellar/door`];
    for (const t of markers) await p.publish(t, Buffer.from('marker'));
    await until(() => got.hash.includes(markers[0]) && got.plus.includes(markers[1]) && got.exact.length === 2, () => got);
    expect(got).toEqual({ hash: [`${base}/groundfloor/foo/bar`, `${base}/groundfloor`, markers[0]], plus: [`${base}/firstfloor/kitchen/temperature`, markers[1]], exact: [`${base}/cellar/door`, markers[2]] });
    // a wildcard cannot be published to: refused before it reaches the broker (which would drop the connection)
    const bad = await p.publish(`${base}/+/x`, Buffer.from('x')).catch((e: unknown) => e);
    expect((bad as ApiError).status).toBe(400);
    expect(() => p.subscribe(`${base}/a#`, {}, async () => undefined)).toThrow(/# stands alone/);
  });

  it('a message the handler refuses is offered again until it is taken, then acknowledged', async () => {
    const topic = unique('retry');
    const client = unique('client');
    const p = await open({ consumerID: client });
    let calls = 0;
    p.subscribe(topic, {}, async () => {
      if (++calls < 3) throw new Error('not yet');
    });
    await p.publish(topic, Buffer.from('x'));
    await until(() => calls === 3, () => calls, 15_000);
    // the close stops every redelivery timer: what was offered by then is all there is
    await closeOne(p);
    expect(calls).toBe(3);
    expect(await sessionBacklog(broker.url, client, topic)).toEqual([]);
  });

  it('a message never taken stays with the broker: the next session of the client gets it', async () => {
    const topic = unique('unacked');
    const client = unique('client');
    const p = await open({ consumerID: client });
    let refused = 0;
    p.subscribe(topic, {}, async () => {
      refused++;
      throw new Error('the app is down');
    });
    await p.publish(topic, Buffer.from('keep me'));
    await until(() => refused >= 1, () => refused);
    await closeOne(p);
    const again = await open({ consumerID: client });
    const got: string[] = [];
    again.subscribe(topic, {}, async (m) => void got.push(text(m)));
    await until(() => got.length === 1, () => got);
    expect(got).toEqual(['keep me']);
  });

  it('the backlog check the tests above rely on sees a message a session still holds', async () => {
    const topic = unique('held');
    const client = unique('client');
    const p = await open({ consumerID: client });
    let refused = 0;
    p.subscribe(topic, {}, async () => {
      refused++;
      throw new Error('not taken');
    });
    await p.publish(topic, Buffer.from('still held'));
    await until(() => refused >= 1, () => refused);
    await closeOne(p);
    expect(await sessionBacklog(broker.url, client, topic)).toEqual(['still held']);
  });

  it('a broker restart loses no QoS 1 message: unacknowledged ones come again, publishes made while it was down arrive', async () => {
    const topic = unique('restart');
    const sub = await open({ consumerID: unique('subscriber') });
    const pub = await open({ consumerID: unique('publisher') });
    let refuse = true;
    let subscribed = false;
    const offered = new Set<string>();
    const taken = new Set<string>();
    sub.subscribe(topic, {}, async (m) => {
      if (text(m) === 'subscribed') return void (subscribed = true);
      offered.add(text(m));
      if (refuse) throw new Error('not yet');
      taken.add(text(m));
    });
    // subscribe() does not wait for the SUBACK, and the publisher is another connection: a marker
    // from the subscriber's own connection comes back only once the broker has the subscription
    await sub.publish(topic, Buffer.from('subscribed'));
    await until(() => subscribed, () => subscribed);
    for (let i = 0; i < 10; i++) await pub.publish(topic, Buffer.from(`before-${i}`));
    // each one offered (and refused) at least once; a count of offers would take a redelivery for one
    await until(() => offered.size === 10, () => [...offered].sort());
    await broker.stop();
    refuse = false;
    // while the broker is down: each publish waits for the connection to come back
    const during = Array.from({ length: 10 }, (_, i) => pub.publish(topic, Buffer.from(`during-${i}`)));
    await broker.start();
    await Promise.all(during);
    const want = [...Array.from({ length: 10 }, (_, i) => `before-${i}`), ...Array.from({ length: 10 }, (_, i) => `during-${i}`)];
    await until(() => want.every((w) => taken.has(w)), () => [...taken].sort(), 20_000);
    expect([...taken].sort()).toEqual(want.sort());
  }, 40_000);

  it('TLS (ssl://): the broker\'s certificate is checked against caCert, never skipped', async () => {
    const ca = makeTestCa();
    const tlsBroker = await startMosquitto({ tls: { cert: ca.cert, key: ca.key } });
    try {
      const topic = unique('tls');
      const p = await open({ url: tlsBroker.url, caCert: ca.caPem, consumerID: unique('client') });
      const got: string[] = [];
      p.subscribe(topic, {}, async (m) => void got.push(text(m)));
      await p.publish(topic, Buffer.from('over TLS'));
      await until(() => got.length === 1, () => got);
      expect(got).toEqual(['over TLS']);
      await closeOne(p);
      // the same broker without its CA: the system's roots do not vouch for it, so the start fails
      const started = Date.now();
      const e = await open({ url: tlsBroker.url, consumerID: unique('client') }).catch((x: Error) => x);
      expect((e as Error).message).toMatch(/certificate that does not verify.*set caCert/);
      expect(Date.now() - started).toBeLessThan(5000); // at once, not after the connect timeout
    } finally {
      await tlsBroker.close();
      ca.remove();
    }
  }, 40_000);

  it('mutual TLS: clientCert and clientKey log the client in where the broker requires a certificate', async () => {
    const ca = makeTestCa();
    const f = (n: string) => join(ca.dir, n);
    const run = (args: string[]) => execFileSync('openssl', args, { cwd: ca.dir, stdio: ['ignore', 'ignore', 'pipe'] });
    run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f('client.key'), '-out', f('client.csr'), '-subj', '/CN=rt-client']);
    writeFileSync(f('client.cnf'), 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n');
    run(['x509', '-req', '-in', f('client.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('client.crt'), '-days', '2', '-extfile', f('client.cnf')]);
    const tlsBroker = await startMosquitto({ tls: { cert: ca.cert, key: ca.key, clientCa: ca.caPem } });
    try {
      const topic = unique('mtls');
      const p = await open({ url: tlsBroker.url, caCert: ca.caPem, clientCert: readFileSync(f('client.crt'), 'utf8'), clientKey: readFileSync(f('client.key'), 'utf8'), consumerID: unique('client') });
      const got: string[] = [];
      p.subscribe(topic, {}, async (m) => void got.push(text(m)));
      await p.publish(topic, Buffer.from('mutual'));
      await until(() => got.length === 1, () => got);
      await closeOne(p);
      // without a client certificate the broker ends the handshake: the start fails
      const bare = factory() as PubSub;
      const e = await bare.init({ ...spec('pubsub.mqtt3', { url: tlsBroker.url, caCert: ca.caPem, consumerID: unique('client') }), initTimeoutMs: 3000 }, componentContext).catch((x: Error) => x);
      await bare.close();
      expect((e as Error).message).toMatch(/ended the TLS handshake .*wants a client certificate it trusts/);
    } finally {
      await tlsBroker.close();
      ca.remove();
    }
  }, 40_000);

  it('refuses bad metadata at init with a message naming the field, never the URL (it may hold a password)', async () => {
    const err = async (md: Record<string, string>) => {
      const p = factory() as PubSub;
      const e = await p.init(spec('pubsub.mqtt3', md), componentContext).then(
        () => undefined,
        (x: Error) => x,
      );
      await p.close();
      return e?.message ?? 'no error';
    };
    expect(await err({})).toMatch(/"url" is required/);
    expect(await err({ url: 'http://user:s3cret@host:1883' })).toMatch(/scheme "http:"/);
    expect(await err({ url: 'not a url s3cret' })).toMatch(/"url" is not a URL/);
    expect(await err({ url: broker.url, qos: '3' })).toMatch(/"qos" "3" is out of range: from 0 to 2/);
    expect(await err({ url: broker.url, retain: 'maybe' })).toMatch(/"retain" "maybe" is not a boolean/);
    expect(await err({ url: broker.url, cleanSession: 'sometimes' })).toMatch(/"cleanSession"/);
    expect(await err({ url: broker.url, clientCert: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----' })).toMatch(/"clientCert" is set but "clientKey" is not/);
    expect(await err({ url: broker.url, caCert: 'not pem' })).toMatch(/"caCert" is not PEM/);
    for (const md of [{ url: 'http://user:s3cret@host:1883' }, { url: 'not a url s3cret' }]) expect(await err(md)).not.toContain('s3cret');
  });

  it('a client MQTT cannot have (no client id with a persistent session) fails init at once, saying why', async () => {
    const p = factory() as PubSub;
    const started = Date.now();
    const e = await p.init(spec('pubsub.mqtt3', { url: broker.url }), { ...componentContext, appId: '' }).catch((x: Error) => x);
    await p.close();
    expect(Date.now() - started).toBeLessThan(5000);
    expect((e as Error).message).toMatch(/MQTT client settings refused: .*clientId/);
  });
});

describe('MQTT topic matching', () => {
  const level = fc.stringMatching(/^[a-z0-9]{1,4}$/);
  const topicLevels = fc.array(level, { minLength: 1, maxLength: 6 });

  it('a filter made from a topic by + for some levels, or # for a tail, matches it; changing a literal level does not', () => {
    fc.assert(
      fc.property(topicLevels, fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), fc.nat(6), (levels, plus, cut) => {
        const topic = levels.join('/');
        const withPlus = levels.map((l, i) => (plus[i] ? '+' : l)).join('/');
        expect(topicMatches(withPlus, topic)).toBe(true);
        const keep = Math.min(cut, levels.length);
        expect(topicMatches([...levels.slice(0, keep), '#'].join('/'), topic)).toBe(true);
        expect(filterProblem(withPlus)).toBeUndefined();
        const literal = levels.findIndex((_, i) => !plus[i]);
        if (literal >= 0) {
          const other = levels.map((l, i) => (i === literal ? `${l}x` : plus[i] ? '+' : l)).join('/');
          expect(topicMatches(other, topic)).toBe(false);
        }
        // one level more or less than a filter without # never matches
        expect(topicMatches(withPlus, `${topic}/z`)).toBe(false);
        expect(publishTopicProblem(topic)).toBeUndefined();
      }),
    );
  });

  it('edge cases of the spec: $ topics, shared subscriptions, misplaced wildcards', () => {
    expect(topicMatches('#', '$SYS/broker')).toBe(false);
    expect(topicMatches('+/broker', '$SYS/broker')).toBe(false);
    expect(topicMatches('$SYS/#', '$SYS/broker')).toBe(true);
    expect(topicMatches('$share/g1/a/+', 'a/b')).toBe(true);
    expect(topicMatches('a/+', 'a')).toBe(false);
    expect(topicMatches('a/#', 'a')).toBe(true);
    expect(filterProblem('a/#/b')).toMatch(/# stands alone/);
    expect(filterProblem('a/b+')).toMatch(/\+ stands alone/);
    expect(publishTopicProblem('a/#')).toMatch(/wildcard/);
    expect(publishTopicProblem('')).toMatch(/empty/);
  });
});

describe('the broker URL (metadata url)', () => {
  const schemes = { 'tcp:': 'mqtt', 'mqtt:': 'mqtt', 'ssl:': 'mqtts', 'tls:': 'mqtts', 'mqtts:': 'mqtts', 'tcps:': 'mqtts' } as const;

  it('reads scheme, credentials (percent-encoded), host and port; the default port follows TLS', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...(Object.keys(schemes) as (keyof typeof schemes)[])),
        fc.stringMatching(/^[a-zA-Z0-9_-]{1,12}$/),
        fc.string({ minLength: 1, maxLength: 16 }),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,10}(\.[a-z0-9]{1,6}){0,2}$/),
        fc.option(fc.integer({ min: 1, max: 65_535 }), { nil: undefined }),
        (scheme, user, password, host, port) => {
          const b = parseBrokerUrl(`${scheme}//${user}:${encodeURIComponent(password)}@${host}${port ? `:${port}` : ''}`);
          expect(b).toEqual({ protocol: schemes[scheme], host, port: port ?? (schemes[scheme] === 'mqtts' ? 8883 : 1883), username: user, password });
        },
      ),
    );
  });

  it('any other text is a MetadataError on "url" that never shows the password', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.stringMatching(/^[a-zA-Z0-9]{12}$/), (junk, secret) => {
        for (const url of [junk, `${junk}://u:${secret}@`, `http://u:${secret}@host:1`, `${secret}`]) {
          let e: unknown;
          try {
            parseBrokerUrl(url);
          } catch (x) {
            e = x;
          }
          if (e === undefined) continue; // a URL after all
          expect(e).toBeInstanceOf(MetadataError);
          expect((e as MetadataError).field).toBe('url');
          expect((e as Error).message).not.toContain(secret);
        }
      }),
    );
  });
});
