/** Worker thread of the flood (bench/lib/flood.ts): floods until the parent says 'stop', then posts the counts. */
import { parentPort, workerData } from 'node:worker_threads';
import { floodLoop } from './flood.ts';

const { hostname, port } = workerData as { hostname: string; port: number };
const flood = floodLoop(hostname, port);
parentPort!.on('message', (m: string) => {
  if (m === 'stop') flood.stop();
});
const result = await flood.done;
// this thread's own CPU: what generating the flood cost the machine
const cpu = process.threadCpuUsage();
parentPort!.postMessage({ result, cpuMs: (cpu.user + cpu.system) / 1000 });
process.exit(0);
