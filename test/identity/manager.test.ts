/**
 * The identity manager on fake time (a ManualClock), against a test issuer (a real CA gRPC server
 * whose clock is the test's): the first certificate, renewal at about 70% of its life, the issuer
 * down at renewal (the current certificate keeps serving, a warning when its end is near, expired
 * after notAfter), and renewal once the issuer is back; the rotation event carries each new one.
 */
import { X509Certificate } from 'node:crypto';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { IdentityManager, type Svid } from '../../sidecar/src/identity/manager.ts';
import { GrpcSigner } from '../../sidecar/src/identity/signers.ts';
import { ManualClock } from '../../shared/clock.ts';
import { startTestIssuer, type TestIssuer } from './test-issuer.ts';

const LIFE = 100_000;

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('IdentityManager', () => {
  const open: { stop(): unknown }[] = [];
  afterEach(async () => {
    for (const o of open.splice(0)) await o.stop();
  });

  async function setup(): Promise<{ clock: ManualClock; issuer: TestIssuer; manager: IdentityManager; logs: { level: number; msg: string }[]; rotations: Svid[] }> {
    const clock = new ManualClock(Date.now());
    const issuer = await startTestIssuer({ ttlMs: LIFE, now: () => clock.now() });
    const logs: { level: number; msg: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as { level: number; msg: string }) });
    const manager = new IdentityManager({ id: { trustDomain: 'cluster.local', namespace: 'orders', appId: 'checkout' }, signer: new GrpcSigner({ address: issuer.address }), log, clock });
    const rotations: Svid[] = [];
    manager.onRotate((s) => rotations.push(s));
    open.push(issuer, { stop: () => manager.close() });
    return { clock, issuer, manager, logs, rotations };
  }

  /** Moves the clock to `at` (ms after the first certificate arrived) in steps, letting each attempt's network round finish. */
  async function stepTo(clock: ManualClock, start: number, at: number, stop?: () => boolean): Promise<void> {
    while (clock.now() < start + at && !stop?.()) {
      await clock.advance(Math.min(1000, start + at - clock.now()));
      await new Promise((r) => setTimeout(r, 15));
    }
  }

  it('gets a certificate for its own key and renews it at about 70% of its life, announcing each', async () => {
    const { clock, manager, rotations } = await setup();
    await manager.start();
    const first = manager.current!;
    expect(first).toBeDefined();
    expect(rotations).toEqual([first]);
    expect(new X509Certificate(first.certPem).subjectAltName).toBe('URI:spiffe://cluster.local/ns/orders/checkout');
    expect(first.notAfter - first.receivedAt).toBeLessThanOrEqual(LIFE);
    expect(manager.secondsLeft()).toBeGreaterThan(LIFE / 1000 - 2); // notAfter has whole seconds
    expect(manager.secondsLeft()).toBeLessThanOrEqual(LIFE / 1000);
    expect(manager.problem()).toBeUndefined();
    // nothing before 65% of the life (70% less the jitter)
    await stepTo(clock, first.receivedAt, 0.64 * LIFE);
    expect(rotations).toHaveLength(1);
    await stepTo(clock, first.receivedAt, 0.76 * LIFE, () => rotations.length > 1);
    await until(() => rotations.length === 2, 'the renewal');
    const second = manager.current!;
    expect(second).not.toBe(first);
    expect(second.keyPem).not.toBe(first.keyPem); // a fresh key each time
    expect(second.notAfter).toBeGreaterThan(first.notAfter);
  });

  it('keeps the current certificate while the issuer is down at renewal, warns near its end, says when it expired, and renews once the issuer is back', async () => {
    const { clock, issuer, manager, logs, rotations } = await setup();
    await manager.start();
    const first = manager.current!;
    await issuer.stop();
    await stepTo(clock, first.receivedAt, 0.8 * LIFE);
    await until(() => logs.some((l) => /renewing the workload certificate failed/.test(l.msg)), 'a failed renewal');
    expect(manager.current).toBe(first);
    expect(manager.problem()).toBeUndefined(); // still valid: still serving
    await stepTo(clock, first.receivedAt, 0.97 * LIFE);
    await until(() => logs.some((l) => /expires in \d+ s and renewal keeps failing/.test(l.msg)), 'the near-expiry warning');
    expect(logs.find((l) => /expires in/.test(l.msg))!.level).toBe(40);
    expect(manager.problem()).toBeUndefined();
    await stepTo(clock, first.receivedAt, LIFE + 1000);
    expect(manager.problem()).toMatch(/workload certificate expired at .* identity issuer at 127\.0\.0\.1:\d+ has not renewed it/);
    expect(manager.secondsLeft()!).toBeLessThan(0);
    expect(rotations).toHaveLength(1);
    await issuer.start();
    await stepTo(clock, first.receivedAt, 2 * LIFE, () => rotations.length > 1);
    await until(() => rotations.length === 2, 'the renewal after the outage');
    expect(manager.problem()).toBeUndefined();
    expect(manager.secondsLeft()!).toBeGreaterThan(0.9 * (LIFE / 1000));
  });

  it('reports the issuer down at start and gets its first certificate once it is up', async () => {
    const { issuer, manager } = await setup();
    await issuer.stop();
    let got = false;
    void manager.ready().then(() => (got = true));
    await manager.start();
    expect(manager.current).toBeUndefined();
    expect(manager.problem()).toMatch(/no workload certificate yet from the identity issuer at 127\.0\.0\.1:\d+: unreachable/);
    expect(got).toBe(false);
  });
});
