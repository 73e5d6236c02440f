/**
 * A cluster with a node that runs our images: a private Docker engine builds the pause image and
 * `rt:dev` (only when stale), and the node imports them into its containerd. Used by the node,
 * chart and end-to-end suites and by `npm run cluster`.
 */
import { dockerMissing, startDocker, type Docker } from './docker.ts';
import { buildImages, importIntoContainerd, type BuiltImages } from './images.ts';
import { kubeNodeUnavailable, startKube, type KubeCluster } from './kube.ts';

export interface ClusterWithImages {
  kube: KubeCluster;
  docker: Docker;
  images: BuiltImages;
  /** Stops the cluster (pods, node, control plane), then lets go of the Docker engine. */
  stop(): Promise<void>;
}

/** Why such a cluster cannot run here, or undefined. */
export function clusterWithImagesUnavailable(): string | undefined {
  return kubeNodeUnavailable() ?? (dockerMissing() || undefined);
}

export async function startClusterWithImages(log: (line: string) => void = () => {}, opts: { hostNetwork?: boolean } = {}): Promise<ClusterWithImages> {
  const docker = await startDocker();
  try {
    const images = await buildImages(docker, { log });
    const kube = await startKube({
      log,
      hostNetwork: opts.hostNetwork,
      node: {
        sandboxImage: images.pause,
        importImages: async (socket) => {
          for (const image of [images.pause, images.rt]) await importIntoContainerd(docker, image, socket);
        },
      },
    });
    let stopped: Promise<void> | undefined;
    return {
      kube,
      docker,
      images,
      stop: () => (stopped ??= (async () => {
        await kube.stop();
        await docker.stop();
      })()),
    };
  } catch (e) {
    await docker.stop();
    throw e;
  }
}
