/**
 * The real @dapr/dapr DaprServer over gRPC as an app that speaks gRPC (--app-protocol grpc), its
 * client pointed at the app's own sidecar, and the SDK's logging silenced.
 */
import { CommunicationProtocolEnum, DaprServer, LogLevel } from '@dapr/dapr';

const noop = () => undefined;
/** The SDK's logger options with every level silenced. */
export const silentDaprLogger = { level: LogLevel.Error, service: { error: noop, warn: noop, info: noop, verbose: noop, debug: noop } };

/** A DaprServer serving the app callback on `appPort`; register handlers, then `start()` it. */
export function daprGrpcServer(appPort: number, sidecarGrpcPort: number): DaprServer {
  return new DaprServer({
    serverHost: '127.0.0.1',
    serverPort: String(appPort),
    communicationProtocol: CommunicationProtocolEnum.GRPC,
    clientOptions: { daprHost: '127.0.0.1', daprPort: String(sidecarGrpcPort), communicationProtocol: CommunicationProtocolEnum.GRPC, logger: silentDaprLogger },
    logger: silentDaprLogger,
  });
}
