// The part of autocannon 9's API the benchmark uses (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface RequestData {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
  }

  interface RequestSpec {
    setupRequest?: (req: RequestData, context: Record<string, unknown>) => RequestData | null;
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string | string[]>) => void;
  }

  interface Options {
    url: string;
    connections?: number;
    amount?: number;
    duration?: number;
    overallRate?: number;
    pipelining?: number;
    timeout?: number;
    requests?: RequestSpec[];
    ignoreCoordinatedOmission?: boolean;
  }

  interface Result {
    errors: number;
    timeouts: number;
    non2xx: number;
    statusCodeStats: Record<string, { count: number }>;
    duration: number;
    totalCompletedRequests: number;
  }

  interface Instance extends EventEmitter {
    stop(): void;
  }

  function autocannon(opts: Options, cb: (err: Error | null, result: Result) => void): Instance;
  export default autocannon;
}
