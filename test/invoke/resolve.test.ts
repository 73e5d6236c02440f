/**
 * Kubernetes-mode name resolution: the sidecar finds `<app-id>-rt.<namespace>.svc.<domain>`
 * through DNS and rotates over its addresses. There is no cluster DNS here, so node's own DNS
 * resolver is pointed at a small DNS server on loopback that answers like a headless Service
 * (one A or AAAA record per ready pod).
 */
import { createSocket, type Socket } from 'node:dgram';
import { promises as dns } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DnsResolver, ResolveError } from '../../sidecar/src/invoke/resolve.ts';

/** name → IPv4 or IPv6 addresses; a name not here answers NXDOMAIN. */
const zone = new Map<string, string[]>();
let queries: string[] = [];

/** Parses one question (name, type) and answers it from `zone` (RFC 1035 §4.1). */
function answer(q: Buffer): Buffer {
  const labels: string[] = [];
  let i = 12;
  while (q[i] !== 0) {
    labels.push(q.subarray(i + 1, i + 1 + q[i]).toString());
    i += q[i] + 1;
  }
  const qEnd = i + 5; // zero byte, type, class
  const type = q.readUInt16BE(i + 1);
  const name = labels.join('.').toLowerCase();
  queries.push(`${name} ${type === 1 ? 'A' : type === 28 ? 'AAAA' : type}`);
  const known = zone.get(name);
  const want = (known ?? []).filter((a) => (type === 1 ? !a.includes(':') : type === 28 && a.includes(':')));
  const header = Buffer.alloc(12);
  q.copy(header, 0, 0, 2); // id
  header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2); // response, recursion desired+available; NXDOMAIN when unknown
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(want.length, 6);
  const answers = want.map((a) => {
    const rdata = type === 1 ? Buffer.from(a.split('.').map(Number)) : ipv6(a);
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0); // the question's name
    rr.writeUInt16BE(type, 2);
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(5, 6); // TTL
    rr.writeUInt16BE(rdata.length, 10);
    return Buffer.concat([rr, rdata]);
  });
  return Buffer.concat([header, q.subarray(12, qEnd), ...answers]);
}

function ipv6(a: string): Buffer {
  const [head, tail = ''] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

describe('kubernetes-mode resolution through DNS', () => {
  let server: Socket;
  let lookup: dns.Resolver;

  beforeAll(async () => {
    server = createSocket('udp4');
    server.on('message', (msg, rinfo) => server.send(answer(msg), rinfo.port, rinfo.address));
    await new Promise<void>((r) => server.bind(0, '127.0.0.1', () => r()));
    lookup = new dns.Resolver({ timeout: 500, tries: 1 });
    lookup.setServers([`127.0.0.1:${server.address().port}`]);
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("finds <app-id>-rt.<namespace>.svc.<domain> and rotates over the pods' addresses", async () => {
    zone.set('orders-rt.shop.svc.cluster.local', ['10.0.0.7', '10.0.0.8', '10.0.0.9']);
    const r = new DnsResolver({ dns: lookup, clusterDomain: 'cluster.local' });
    const got = [];
    for (let i = 0; i < 6; i++) got.push(await r.resolve({ appId: 'orders', namespace: 'shop' }));
    expect(got).toEqual(['10.0.0.7:50002', '10.0.0.8:50002', '10.0.0.9:50002', '10.0.0.7:50002', '10.0.0.8:50002', '10.0.0.9:50002']);
  });

  it('keeps the records for their time, and looks again after a call to them failed', async () => {
    zone.set('cart-rt.default.svc.example.org', ['10.1.0.1']);
    queries = [];
    const r = new DnsResolver({ dns: lookup, clusterDomain: 'example.org', ttlMs: 60_000 });
    const t = { appId: 'cart', namespace: 'default' };
    expect(await r.resolve(t)).toBe('10.1.0.1:50002');
    zone.set('cart-rt.default.svc.example.org', ['10.1.0.2']); // the pod was replaced
    expect(await r.resolve(t)).toBe('10.1.0.1:50002');
    expect(queries).toEqual(['cart-rt.default.svc.example.org A']);
    r.failed(t);
    expect(await r.resolve(t)).toBe('10.1.0.2:50002');
  });

  it('reaches pods of an IPv6-only cluster through AAAA records', async () => {
    zone.set('pay-rt.default.svc.cluster.local', ['fd00::12']);
    const r = new DnsResolver({ dns: lookup });
    expect(await r.resolve({ appId: 'pay', namespace: 'default' })).toBe('[fd00::12]:50002');
  });

  it('says what was tried when the Service is missing, and refuses app ids no Service can be named after', async () => {
    const r = new DnsResolver({ dns: lookup });
    const err = await r.resolve({ appId: 'nobody', namespace: 'default' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResolveError);
    expect((err as Error).message).toMatch(/could not resolve nobody-rt\.default\.svc\.cluster\.local through cluster DNS \(ENOTFOUND\)/);
    await expect(r.resolve({ appId: 'Big_App', namespace: 'default' })).rejects.toThrow(/cannot name a Kubernetes Service/);
  });
});
