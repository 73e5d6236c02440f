/**
 * Coalesces concurrent single-key calls into bulk calls. Every call to a component is a
 * cross-process gRPC round trip, and its fixed cost (HTTP/2 stream, interceptors, a wake-up of
 * both processes) dwarfs the cost of one more key in it. So one call is in flight at a time
 * (by default); the calls that arrive meanwhile wait and go out together as one bulk call when
 * it returns. A lone call on an idle store goes out at once as a single call, so batching adds
 * no delay at low load and grows with load.
 */
interface Pending<In, Out> {
  input: In;
  resolve: (o: Out) => void;
  reject: (e: unknown) => void;
}

export class Batcher<In, Out> {
  private queue: Pending<In, Out>[] = [];
  private scheduled = false;
  private inFlight = 0;
  private readonly single: (input: In) => Promise<Out>;
  private readonly many: (inputs: In[]) => Promise<Out[]>;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;

  /**
   * `many` must answer in input order. When it fails, each input is retried with `single`, so
   * every caller gets its own answer or error (so only batch calls that are safe to repeat).
   */
  constructor(single: (input: In) => Promise<Out>, many: (inputs: In[]) => Promise<Out[]>, opts: { maxInFlight?: number; maxBatch?: number } = {}) {
    this.single = single;
    this.many = many;
    this.maxInFlight = opts.maxInFlight ?? 1;
    this.maxBatch = opts.maxBatch ?? 256;
  }

  run(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    // the rest of this turn's calls join the batch
    setImmediate(() => {
      this.scheduled = false;
      while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
        const batch = this.queue.splice(0, this.maxBatch);
        this.inFlight++;
        void this.send(batch).finally(() => {
          this.inFlight--;
          this.schedule();
        });
      }
    });
  }

  private async send(batch: Pending<In, Out>[]): Promise<void> {
    const one = (q: Pending<In, Out>) => this.single(q.input).then(q.resolve, q.reject);
    if (batch.length === 1) return one(batch[0]);
    let outs: Out[];
    try {
      outs = await this.many(batch.map((q) => q.input));
    } catch {
      await Promise.all(batch.map(one));
      return;
    }
    batch.forEach((q, i) => q.resolve(outs[i]));
  }
}
