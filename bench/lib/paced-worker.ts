/**
 * Worker thread of a paced phase (bench/lib/paced.ts): sends the requests at their due times and
 * measures their latencies, with a heap of its own that holds only its raw requests, so the main
 * thread's garbage collections never delay a request.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { type PacedJob, type PacedMessage, pacedLoop } from './paced.ts';

const { job, wantAnswers } = workerData as { job: PacedJob; wantAnswers: boolean };
const port = parentPort!;

let batch: [number, number, string, boolean][] = [];
let flushTimer: NodeJS.Timeout | null = null;
const flush = () => {
  flushTimer = null;
  if (batch.length === 0) return;
  port.postMessage({ answers: batch } satisfies PacedMessage);
  batch = [];
};

const result = await pacedLoop(
  job,
  wantAnswers
    ? (i, status, body, signed) => {
        batch.push([i, status, body.toString('utf8'), signed]);
        if (batch.length >= 512) flush();
        else flushTimer ??= setTimeout(flush, 20);
      }
    : undefined,
);
if (flushTimer) clearTimeout(flushTimer);
flush();
port.postMessage({ result } satisfies PacedMessage);
