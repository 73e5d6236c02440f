/**
 * Asks a gRPC server which services it serves, with the server reflection protocol
 * (grpc.reflection.v1, falling back to v1alpha for older servers).
 */
import * as grpc from '@grpc/grpc-js';
import { reflectionDefinition } from './protos.ts';

interface ReflectionResponse {
  listServicesResponse?: { service: { name: string }[] } | null;
  errorResponse?: { errorCode: number; errorMessage: string } | null;
}

/** Lists the full names of the services at `address` (e.g. `unix:/tmp/x.sock`). */
export async function listServices(address: string, timeoutMs: number): Promise<string[]> {
  try {
    return await listWith('grpc.reflection.v1.ServerReflection', address, timeoutMs);
  } catch (e) {
    if ((e as grpc.ServiceError).code !== grpc.status.UNIMPLEMENTED) throw e;
    return listWith('grpc.reflection.v1alpha.ServerReflection', address, timeoutMs);
  }
}

function listWith(service: string, address: string, timeoutMs: number): Promise<string[]> {
  const Client = grpc.makeGenericClientConstructor(reflectionDefinition()[service] as grpc.ServiceDefinition, 'ServerReflection');
  const client = new Client(address, grpc.credentials.createInsecure());
  return new Promise<string[]>((resolve, reject) => {
    const call = (client as unknown as Record<string, (opts: grpc.CallOptions) => grpc.ClientDuplexStream<unknown, ReflectionResponse>>).ServerReflectionInfo({
      deadline: Date.now() + timeoutMs,
    });
    let done = false;
    const finish = (err: Error | undefined, names?: string[]) => {
      if (done) return;
      done = true;
      call.cancel();
      client.close();
      if (err) reject(err);
      else resolve(names ?? []);
    };
    call.on('data', (res: ReflectionResponse) => {
      if (res.errorResponse) finish(new Error(`reflection error ${res.errorResponse.errorCode}: ${res.errorResponse.errorMessage}`));
      else finish(undefined, (res.listServicesResponse?.service ?? []).map((s) => s.name));
    });
    call.on('error', (err) => finish(err));
    call.on('end', () => finish(new Error('reflection stream ended without an answer')));
    call.write({ listServices: '*' });
    call.end();
  });
}
