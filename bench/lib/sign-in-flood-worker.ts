/** Worker thread of the sign-in flood (bench/lib/sign-in-flood.ts): floods until the parent says 'stop', then posts the counts. */
import { parentPort, workerData } from 'node:worker_threads';
import { signInFloodLoop } from './sign-in-flood.ts';

const { hostname, port, rate, maxInFlight } = workerData as { hostname: string; port: number; rate: number; maxInFlight: number };
const flood = signInFloodLoop(hostname, port, rate, maxInFlight);
parentPort!.on('message', (m: string) => {
  if (m === 'stop') flood.stop();
});
const result = await flood.done;
// this thread's own CPU: what generating the flood cost the machine
const cpu = process.threadCpuUsage();
parentPort!.postMessage({ result, cpuMs: (cpu.user + cpu.system) / 1000 });
process.exit(0);
