/**
 * `npm run image`: builds rt:dev (and the pause and Node bases it needs here) with the engine at
 * DOCKER_HOST, or with a private dockerd started for the build and stopped after it. Each image is
 * rebuilt only when its inputs changed. Prints the images and their sizes.
 */
import { startDocker } from '../test/services/docker.ts';
import { buildImages } from '../test/services/images.ts';

const started = Date.now();
const d = await startDocker();
try {
  const built = await buildImages(d, { log: (line) => console.log(line) });
  for (const [image, size] of Object.entries(built.sizes)) {
    console.log(`${image.padEnd(28)} ${(size / 1e6).toFixed(1).padStart(7)} MB  ${built.ids[image]!.slice(7, 19)}`);
  }
  console.log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} finally {
  await d.stop();
}
