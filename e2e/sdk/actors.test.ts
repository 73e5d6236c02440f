/**
 * The actor cases of the @dapr/dapr JS SDK's own end-to-end suite (its test/e2e/http/actors.test.ts),
 * replayed against rt as the SDK runs them: actors hosted by the SDK's DaprServer (HTTP), called
 * through its ActorProxyBuilder and DaprClient, a real sidecar with an actor state store on
 * SQLite and its embedded scheduler for reminders. The actor classes are written here with the
 * behaviour the suite's demo actors have (counter, say, timers, reminders, delete state).
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AbstractActor, ActorId, ActorProxyBuilder, CommunicationProtocolEnum, DaprClient, DaprServer, Temporal, type DaprClientOptions } from '@dapr/dapr';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { componentYaml } from '../../test/grpc/harness.ts';
import { silentDaprLogger } from '../../test/services/dapr-server.ts';
import { freePort } from '../../test/services/net.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seconds = (s: number) => Temporal.Duration.from({ seconds: s });
const ms = (n: number) => Temporal.Duration.from({ milliseconds: n });

class CounterActor extends AbstractActor {
  counter = 0;
  async countBy(amount: number, multiplier: number): Promise<void> {
    this.counter += amount * multiplier;
    await this.getStateManager().setState('counter', this.counter);
    await this.getStateManager().saveState();
  }
  async getCounter(): Promise<number> {
    return ((await this.getStateManager().tryGetState('counter'))[1] as number | undefined) ?? 0;
  }
}

class SayActor extends AbstractActor {
  async sayString(msg: string): Promise<string> {
    return `Actor said: "${msg}"`;
  }
  async sayObject(msg: object): Promise<object> {
    return { said: msg };
  }
  async sayMulti(a: number, b: string, c: object, d: number[]): Promise<object> {
    const t = (v: unknown) => ({ value: v, type: typeof v });
    return { a: t(a), b: t(b), c: t(c), d: t(d) };
  }
}

/**
 * A timer adds its state (100) to the counter and notes when it fired; periodic, once, or with a
 * ttl. `mark` registers a one-shot timer of another name: the timers of one activation fire in
 * due order through its turn, so once the marker has fired, any fire due before it has come.
 */
abstract class TimerActorBase extends AbstractActor {
  counter = 0;
  fires: number[] = [];
  marked = false;
  abstract start(): Promise<void>;
  async init(): Promise<string> {
    await this.start();
    return 'Actor Initialized';
  }
  async onTimer(by: number): Promise<void> {
    this.counter += by;
    this.fires.push(Date.now());
  }
  async getCounter(): Promise<number> {
    return this.counter;
  }
  async getFires(): Promise<number[]> {
    return this.fires;
  }
  async removeTimer(): Promise<void> {
    await this.unregisterActorTimer('my-timer-name');
  }
  async mark(dueMs: number): Promise<void> {
    await this.registerActorTimer('marker', 'onMarker', ms(dueMs));
  }
  async onMarker(): Promise<void> {
    this.marked = true;
  }
  async isMarked(): Promise<boolean> {
    return this.marked;
  }
}
class TimerActor extends TimerActorBase {
  async start() {
    await this.registerActorTimer('my-timer-name', 'onTimer', seconds(2), seconds(1), undefined, 100);
  }
}
class TimerOnceActor extends TimerActorBase {
  async start() {
    await this.registerActorTimer('my-timer-name', 'onTimer', seconds(2), undefined, undefined, 100);
  }
}
class TimerTtlActor extends TimerActorBase {
  async start() {
    // fires at 2 s and 3 s; the ttl of 2.5 s ends it after the first
    await this.registerActorTimer('my-timer-name', 'onTimer', seconds(2), seconds(1), ms(2500), 100);
  }
}

/** The marker reminder's state: any other state is added to the counter. */
const MARKER = 1;

/** A reminder adds its state (123) to the counter; `mark` registers a one-shot marker reminder. */
abstract class ReminderActorBase extends AbstractActor {
  counter = 0;
  marked = false;
  abstract start(): Promise<void>;
  async init(): Promise<string> {
    await this.start();
    return 'Actor Initialized';
  }
  async getCounter(): Promise<number> {
    return this.counter;
  }
  async removeReminder(): Promise<void> {
    await this.unregisterActorReminder('my-reminder-name');
  }
  async mark(dueMs: number): Promise<void> {
    await this.registerActorReminder('marker', ms(dueMs), undefined, undefined, MARKER);
  }
  async isMarked(): Promise<boolean> {
    return this.marked;
  }
  override async receiveReminder(data: string): Promise<void> {
    if (Number(data) === MARKER) this.marked = true;
    else this.counter += Number(data);
  }
}
class ReminderActor extends ReminderActorBase {
  async start() {
    await this.registerActorReminder('my-reminder-name', ms(1500), seconds(1), undefined, 123);
  }
}
class ReminderOnceActor extends ReminderActorBase {
  async start() {
    await this.registerActorReminder('my-reminder-name', ms(1500), undefined, undefined, 123);
  }
}

class DeleteStateActor extends AbstractActor {
  async init(): Promise<string> {
    await this.getStateManager().setState('data', 'text');
    await this.getStateManager().saveState();
    return 'initialized';
  }
  async tryGetState(): Promise<boolean> {
    return (await this.getStateManager().tryGetState('data'))[0];
  }
  async deleteState(name: string): Promise<void> {
    await this.getStateManager().removeState(name);
    await this.getStateManager().saveState();
  }
}

const ACTORS = [CounterActor, SayActor, TimerActor, TimerOnceActor, TimerTtlActor, ReminderActor, ReminderOnceActor, DeleteStateActor];

let dir: string;
let sidecar: Sidecar;
let server: DaprServer;
let client: DaprClient;
let sidecarBase: string;
let appPort: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-sdk-actors-'));
  await mkdir(join(dir, 'resources'));
  await writeFile(join(dir, 'resources', 'store.yaml'), componentYaml('statestore', 'state.sqlite', { connectionString: join(dir, 'actors.db'), actorStateStore: 'true' }));
  appPort = await freePort();
  sidecar = await startSidecar({ appId: 'sdk-actors', appPort, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [join(dir, 'resources')], logger: pino({ level: 'silent' }) });
  sidecarBase = `http://127.0.0.1:${sidecar.httpPort}`;
  const options: DaprClientOptions = {
    daprHost: '127.0.0.1',
    daprPort: String(sidecar.httpPort),
    communicationProtocol: CommunicationProtocolEnum.HTTP,
    isKeepAlive: false,
    logger: silentDaprLogger,
    actor: { actorIdleTimeout: '1h', actorScanInterval: '30s', drainOngoingCallTimeout: '1m', drainRebalancedActors: true, reentrancy: { enabled: true, maxStackDepth: 32 }, remindersStoragePartitions: 0 },
  };
  server = new DaprServer({ serverHost: '127.0.0.1', serverPort: String(appPort), communicationProtocol: CommunicationProtocolEnum.HTTP, clientOptions: options, logger: silentDaprLogger });
  client = new DaprClient(options);
  await server.actor.init();
  for (const a of ACTORS) await server.actor.registerActor(a as never);
  await server.start();
  // the sidecar has asked the app for its actor types
  for (let i = 0; i < 200; i++) {
    const md = (await (await fetch(`${sidecarBase}/v1.0/metadata`)).json()) as { actors: unknown[] };
    if (md.actors.some((a) => (a as { type: string }).type === 'CounterActor')) break;
    await sleep(25);
  }
}, 30_000);

afterAll(async () => {
  await server?.stop().catch(() => undefined);
  await client?.stop().catch(() => undefined);
  await sidecar?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 30_000);

describe('the JS SDK suite actor cases (HTTP)', () => {
  it('the sidecar learns every registered type and the runtime settings from /dapr/config', async () => {
    const md = (await (await fetch(`${sidecarBase}/v1.0/metadata`)).json()) as { actors: { type: string; count: number }[] };
    const names = ACTORS.map((a) => a.name);
    // beside the workflow engine's own types
    expect(md.actors.filter((a) => names.includes(a.type)).map((a) => a.type).sort()).toEqual(names.sort());
    expect(sidecar.ctx.services.actors!.configOf('CounterActor').reentrancy).toEqual({ enabled: true, maxStackDepth: 32 });
  });

  it('actorProxy: counts through the proxy, in actor state', async () => {
    const actor = new ActorProxyBuilder<CounterActor>(CounterActor, client).build(ActorId.createRandomId());
    expect(await actor.getCounter()).toEqual(0);
    await actor.countBy(1, 1);
    expect(await actor.getCounter()).toEqual(1);
    await actor.countBy(1, 10);
    expect(await actor.getCounter()).toEqual(11);
  });

  it('actorProxy over the gRPC client (InvokeActor): counts, and says things', async () => {
    const grpcClient = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(sidecar.grpcPort), communicationProtocol: CommunicationProtocolEnum.GRPC, logger: silentDaprLogger });
    try {
      const counter = new ActorProxyBuilder<CounterActor>(CounterActor, grpcClient).build(ActorId.createRandomId());
      await counter.countBy(2, 3);
      expect(await counter.getCounter()).toEqual(6);
      const say = new ActorProxyBuilder<SayActor>(SayActor, grpcClient).build(ActorId.createRandomId());
      expect(await say.sayString('over gRPC')).toEqual('Actor said: "over gRPC"');
    } finally {
      await grpcClient.stop().catch(() => undefined);
    }
  });

  it('a method the actor does not have is a 500; one it has a 200', async () => {
    const id = ActorId.createRandomId();
    const url = `${sidecarBase}/v1.0/actors/CounterActor/${id.getURLSafeId()}/method`;
    expect((await fetch(`${url}/getCounter`)).status).toBe(200);
    expect((await fetch(`${url}/sayHello`)).status).toBe(500);
  });

  it('deletes actor state', async () => {
    const actor = new ActorProxyBuilder<DeleteStateActor>(DeleteStateActor, client).build(ActorId.createRandomId());
    await actor.init();
    expect(await actor.tryGetState()).toEqual(true);
    await actor.deleteState('data');
    expect(await actor.tryGetState()).toEqual(false);
  });

  it('invokes with a text message, an object, several parameters, and through client.actor.create', async () => {
    const say = new ActorProxyBuilder<SayActor>(SayActor, client).build(ActorId.createRandomId());
    expect(await say.sayString('Hello World')).toEqual('Actor said: "Hello World"');
    expect(JSON.stringify(await say.sayObject({ hello: 'world' }))).toEqual('{"said":{"hello":"world"}}');
    const multi = '{"a":{"value":123,"type":"number"},"b":{"value":"123","type":"string"},"c":{"value":{"hello":"world 123"},"type":"object"},"d":{"value":[1,2,3],"type":"object"}}';
    expect(JSON.stringify(await say.sayMulti(123, '123', { hello: 'world 123' }, [1, 2, 3]))).toEqual(multi);
    const created = client.actor.create<SayActor>(SayActor);
    expect(JSON.stringify(await created.sayMulti(123, '123', { hello: 'world 123' }, [1, 2, 3]))).toEqual(multi);
  });

  it('an actor with an id holding "/" (URL-safe in the path)', async () => {
    const actor = new ActorProxyBuilder<SayActor>(SayActor, client).build(new ActorId('test/actor'));
    expect(await actor.sayString('x')).toEqual('Actor said: "x"');
  });
});

/** Waits (at most `timeout`) until `check` holds: the fires come on the sidecar's clock. */
const until = (check: () => Promise<boolean>, timeout: number) => expect.poll(check, { timeout, interval: 50 }).toBe(true);

/**
 * No fixed sleeps: each case waits for what must happen, and proves that nothing more happens
 * with a marker (a one-shot timer or reminder due after the fire that must not come): once the
 * marker has fired, that fire would have come before it.
 */
describe('the JS SDK suite timer and reminder cases (HTTP)', () => {
  it('fires a periodic timer every period, and stops when it is removed', async () => {
    const actor = new ActorProxyBuilder<TimerActor>(TimerActor, client).build(ActorId.createRandomId());
    const t0 = Date.now();
    await actor.init();
    expect(await actor.getCounter()).toEqual(0);
    await until(async () => (await actor.getCounter()) >= 300, 8000);
    await actor.removeTimer();
    const fires = await actor.getFires();
    // due 2 s after registration, then every 1 s: fire k never comes before 2 s + k periods
    fires.forEach((at, k) => expect(at).toBeGreaterThanOrEqual(t0 + 2000 + k * 1000 - 5));
    expect(await actor.getCounter()).toEqual(100 * fires.length);
    // a fire still due would be due within a period of the last one: the marker is due later
    await actor.mark(1200);
    await until(() => actor.isMarked(), 5000);
    expect(await actor.getFires()).toEqual(fires);
  }, 15_000);

  it('applies a timer ttl', async () => {
    const actor = new ActorProxyBuilder<TimerTtlActor>(TimerTtlActor, client).build(ActorId.createRandomId());
    await actor.init();
    // due 3.5 s from now: after the fire at 3 s the ttl of 2.5 s must stop
    await actor.mark(3500);
    await until(() => actor.isMarked(), 8000);
    expect(await actor.getCounter()).toEqual(100);
  }, 15_000);

  it('fires a timer without a period once', async () => {
    const actor = new ActorProxyBuilder<TimerOnceActor>(TimerOnceActor, client).build(ActorId.createRandomId());
    await actor.init();
    // due 1 s after the only fire (2 s)
    await actor.mark(3000);
    await until(() => actor.isMarked(), 8000);
    expect(await actor.getCounter()).toEqual(100);
  }, 15_000);

  /**
   * The scheduler's engine takes due jobs off a min-heap and dispatches them in due order; the
   * sidecar's hop from a trigger to the actor's turn is asynchronous, so the marker reminder is
   * due half a second after the fire that must not come, not just after it.
   */
  it('fires a reminder, and not after it is unregistered', async () => {
    const actor = new ActorProxyBuilder<ReminderActor>(ReminderActor, client).build(ActorId.createRandomId());
    await actor.init();
    expect(await actor.getCounter()).toEqual(0);
    await until(async () => (await actor.getCounter()) >= 123, 8000);
    await actor.removeReminder();
    const counted = await actor.getCounter();
    // a fire still due would be due within a period (1 s) of the last one
    await actor.mark(1500);
    await until(() => actor.isMarked(), 8000);
    expect(await actor.getCounter()).toEqual(counted);
  }, 15_000);

  it('fires a reminder without a period once', async () => {
    const actor = new ActorProxyBuilder<ReminderOnceActor>(ReminderOnceActor, client).build(ActorId.createRandomId());
    await actor.init();
    // due 1 s after the only fire (1.5 s), and half a second more for the hop (above)
    await actor.mark(3000);
    await until(() => actor.isMarked(), 8000);
    expect(await actor.getCounter()).toEqual(123);
  }, 15_000);
});
