/**
 * App health for apps that speak gRPC (--app-protocol grpc): the probe is the app's
 * `dapr.proto.runtime.v1.AppCallbackHealthCheck/HealthCheck` (what the ecosystem's SDK servers
 * implement), not an HTTP GET of the health path, which a gRPC server cannot answer. Status OK is
 * healthy; anything else, UNIMPLEMENTED included, is a failed probe. The request is
 * google.protobuf.Empty and the answer's fields are not read, so no proto is loaded.
 */
import type { Client } from '@grpc/grpc-js';

const METHOD = '/dapr.proto.runtime.v1.AppCallbackHealthCheck/HealthCheck';
const EMPTY = Buffer.alloc(0);

export class GrpcHealthProbe {
  private client?: Client;
  private readonly address: string;
  private readonly token?: string;

  constructor(address: string, token?: string) {
    this.address = address;
    this.token = token;
  }

  /** One probe: resolves true when the app answered OK within `timeoutMs`. */
  async probe(timeoutMs: number): Promise<boolean> {
    const grpc = await import('@grpc/grpc-js');
    this.client ??= new grpc.Client(this.address, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    if (this.token) {
      md.set('rt-api-token', this.token);
      md.set('dapr-api-token', this.token);
    }
    const client = this.client;
    return new Promise<boolean>((resolve) => {
      client.makeUnaryRequest(
        METHOD,
        () => EMPTY,
        (b: Buffer) => b,
        EMPTY,
        md,
        { deadline: Date.now() + timeoutMs },
        (err) => resolve(!err),
      );
    });
  }

  close(): void {
    this.client?.close();
  }
}
