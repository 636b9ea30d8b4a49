/**
 * The crypto ceiling of this machine: one RSA-2048 verify (the request's signature) plus one sign
 * (the response's) is the server's unavoidable crypto per request. Measured with node:crypto and
 * cached KeyObjects, (a) synchronously on one thread (= per core) and (b) with the callback forms,
 * which run on libuv's thread pool and so use every core.
 */
import { generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import os from 'node:os';

export interface CryptoCeiling {
  /** sync, one thread: operations per second */
  signPerSec: number;
  verifyPerSec: number;
  /** sync, one thread: verify + sign pairs per second (= one request's crypto, per core) */
  pairsPerSecPerCore: number;
  /** callback form on the thread pool, all cores: verify + sign pairs per second */
  pairsPerSecThreadpool: number;
  cores: number;
  threadpoolSize: number;
}

function loop(seconds: number, op: () => void): number {
  const end = performance.now() + seconds * 1000;
  let n = 0;
  const t0 = performance.now();
  while (performance.now() < end) {
    op();
    n++;
  }
  return n / ((performance.now() - t0) / 1000);
}

export async function measureCryptoCeiling(seconds: number): Promise<CryptoCeiling> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  // A signing string of the usual size (nine short lines).
  const data = Buffer.from(
    `GET\n/api/open/v1/payments/T_0001\nsvcop_0123456789abcdef\nk1\n1700000000\n${randomBytes(16).toString('hex')}\n`,
  );
  const sig = sign('sha256', data, privateKey);
  loop(0.3, () => verify('sha256', data, publicKey, sign('sha256', data, privateKey))); // warm-up (JIT, CPU clock)

  const signPerSec = loop(seconds / 3, () => sign('sha256', data, privateKey));
  const verifyPerSec = loop(seconds / 6, () => verify('sha256', data, publicKey, sig));
  const pairsPerSecPerCore = loop(seconds / 2, () => {
    verify('sha256', data, publicKey, sig);
    sign('sha256', data, privateKey);
  });

  // Thread pool: keep plenty of pairs in flight so every pool thread stays busy.
  const pairsPerSecThreadpool = await new Promise<number>((resolve) => {
    const t0 = performance.now();
    const end = t0 + seconds * 1000;
    let done = 0;
    let inflight = 0;
    const one = () => {
      inflight++;
      verify('sha256', data, publicKey, sig, () => {
        sign('sha256', data, privateKey, () => {
          inflight--;
          done++;
          if (performance.now() < end) one();
          else if (inflight === 0) resolve(done / ((performance.now() - t0) / 1000));
        });
      });
    };
    for (let i = 0; i < 32; i++) one();
  });

  return {
    signPerSec,
    verifyPerSec,
    pairsPerSecPerCore,
    pairsPerSecThreadpool,
    cores: os.availableParallelism(),
    threadpoolSize: Number(process.env.UV_THREADPOOL_SIZE ?? 4),
  };
}
