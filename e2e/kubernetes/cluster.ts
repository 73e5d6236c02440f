/**
 * The user's cluster for the end-to-end path: a real node from test/services/kube.ts, with a pod
 * network, Services and DNS, and rt:dev, the pause image and an image of the pluggable state
 * example imported into its containerd, or,
 * with RT_E2E_KUBECONFIG (and RT_E2E_IMAGE), a cluster the user has. The suite drives it only
 * through the real kubectl and helm.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDocker, type Docker } from '../../test/services/docker.ts';
import { buildImages, importIntoContainerd } from '../../test/services/images.ts';
import { ensureKubectlAndHelm, startKube, type CommandResult, type KubeCluster } from '../../test/services/kube.ts';
import { LOCAL_VALUES, ROOT } from '../../test/chart/render.ts';

export { CHART } from '../../test/chart/render.ts';
/** The example component's image: rt:dev (node and the gRPC libraries) plus the example's files. */
export const COMPONENT_IMAGE = 'rt-example-memstore:dev';

export interface UserCluster {
  rtImage: string;
  componentImage: string;
  /** The kubeconfig the suite's kubectl and helm use. */
  kubeconfig: string;
  kubectl(args: string[], opts?: { input?: string }): Promise<CommandResult>;
  helm(args: string[]): Promise<CommandResult>;
  /** The kubelet's log file of a container (read beside `kubectl logs`); '' on a cluster of the user's. */
  podLog(ns: string, pod: string, container: string): string;
  /** The host's address on the local node's veth: where pods reach servers the suite runs on this machine. */
  hostAddress?: string;
  /** Containers the node's containerd still has for pods of a namespace; undefined on a cluster of the user's. */
  containers(namespace: string): Promise<string[] | undefined>;
  /** Whether this is the local node (loopback values, hostPath output folders). */
  local: boolean;
  stop(): Promise<void>;
}

/** Builds the example component's image on top of rt:dev (cached by Docker's layer cache). */
export async function buildComponentImage(docker: Docker, rtImage: string): Promise<string> {
  const ctx = mkdtempSync(join(tmpdir(), 'rt-image-memstore-'));
  try {
    cpSync(join(ROOT, 'examples', 'pluggable-state'), join(ctx, 'example'), { recursive: true });
    cpSync(join(ROOT, 'sidecar', 'src', 'pluggable', 'proto'), join(ctx, 'proto'), { recursive: true });
    // under /app, so node finds rt's node_modules (@grpc/grpc-js, proto-loader, reflection)
    writeFileSync(
      join(ctx, 'Dockerfile'),
      [
        `FROM ${rtImage}`,
        'COPY proto /app/example/proto',
        'COPY example/ /app/example/',
        'ENV RT_PROTO_DIR=/app/example/proto RT_COMPONENTS_SOCKETS_FOLDER=/tmp/rt-components-sockets',
        'ENTRYPOINT ["node", "/app/example/main.ts"]',
        'CMD []',
        '',
      ].join('\n'),
    );
    await docker.docker(['build', '--network', 'host', '--force-rm', '-t', COMPONENT_IMAGE, ctx], { check: true, timeoutMs: 10 * 60_000 });
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
  return COMPONENT_IMAGE;
}

function run(bin: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = execFile(bin, args, { env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    child.stdin?.end(input ?? '');
  });
}

export async function startUserCluster(log: (s: string) => void): Promise<UserCluster> {
  const userConfig = process.env.RT_E2E_KUBECONFIG;
  if (userConfig) {
    const image = process.env.RT_E2E_IMAGE;
    const componentImage = process.env.RT_E2E_COMPONENT_IMAGE;
    if (!image || !componentImage) throw new Error('RT_E2E_KUBECONFIG needs RT_E2E_IMAGE (the rt image) and RT_E2E_COMPONENT_IMAGE (the example component built from examples/pluggable-state/Containerfile), both pullable by the cluster');
    const tools = await ensureKubectlAndHelm();
    const env = { ...process.env, KUBECONFIG: userConfig };
    return {
      rtImage: image,
      componentImage,
      kubeconfig: userConfig,
      kubectl: (args, opts) => run(tools.kubectl, args, env, opts?.input),
      helm: (args) => run(tools.helm, args, env),
      podLog: () => '',
      containers: async () => undefined,
      local: false,
      stop: async () => {},
    };
  }
  const docker = await startDocker();
  let kube: KubeCluster | undefined;
  try {
    const images = await buildImages(docker, { log });
    const componentImage = await buildComponentImage(docker, images.rt);
    kube = await startKube({
      node: {
        sandboxImage: images.pause,
        importImages: async (socket) => {
          for (const image of [images.pause, images.rt, componentImage]) await importIntoContainerd(docker, image, socket);
        },
      },
    });
    const k = kube;
    return {
      rtImage: images.rt,
      componentImage,
      kubeconfig: k.kubeconfig,
      kubectl: (args, opts) => k.kubectl(args, opts),
      helm: (args) => k.helm(args),
      podLog: (ns, pod, container) => k.node!.podLog(ns, pod, container),
      containers: async (namespace) => (await k.node!.ctr(['containers', 'list', '-q', `labels."io.kubernetes.pod.namespace"==${namespace}`])).stdout.split('\n').filter(Boolean),
      hostAddress: k.network?.hostAddress,
      local: true,
      stop: async () => {
        await k.stop();
        await docker.stop();
      },
    };
  } catch (e) {
    await kube?.stop();
    await docker.stop();
    throw e;
  }
}

/** The chart's values for this cluster: the local node's image and storage, the user's image elsewhere; every other value is the chart's default. */
export async function chartValues(c: UserCluster): Promise<string[]> {
  if (c.local) return ['-f', LOCAL_VALUES];
  const [repository, tag] = splitImage(c.rtImage);
  return ['--set', `image.repository=${repository}`, '--set', `image.tag=${tag}`];
}

function splitImage(image: string): [string, string] {
  const at = image.lastIndexOf(':');
  return at > image.lastIndexOf('/') ? [image.slice(0, at), image.slice(at + 1)] : [image, 'latest'];
}

export function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}
